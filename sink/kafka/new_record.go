package kafka

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// NewRecord returns a record for topic whose Key and Value are keyLen and
// valueLen bytes (zero, to be filled by the caller), made in one
// allocation with the record when they are small: a Serializer that
// builds its records with it makes one object a record instead of three
// (the record, its key, its value). The sink holds every record until
// the broker acknowledges it, so a record's key and value live as long
// as it anyway; for the exactly-once Kafka job (a 10-byte key and a
// 16-byte value) the one allocation is 192 bytes, as the three were, at
// a third of the allocator's calls and of the objects the collector
// sweeps (docs/performance.md, issue 32).
//
// A length of 0 leaves Key (Value) nil: a record without a key (a
// tombstone), as a serializer's []byte(nil) would. Key and Value have no
// room to grow (their capacity is their length): an append copies.
//
// Once the broker has acknowledged a record NewRecord made, the sink
// reuses it (and its key's and value's bytes) for a later NewRecord, so
// that a job writing records at a steady rate allocates none past those
// awaiting their acknowledgement: a Serializer returns the record to the
// sink and must not keep it, nor its Key or Value, nor return it twice.
// The record's Context marks it as NewRecord's; a serializer that sets
// its own Context opts the record out (it is then left to the collector).
func NewRecord(topic string, keyLen, valueLen int) *kgo.Record {
	keyLen, valueLen = max(keyLen, 0), max(valueLen, 0)
	r, b := recordWithBytes(keyLen + valueLen)
	r.Topic = topic
	if keyLen > 0 {
		r.Key = b[:keyLen:keyLen]
	}
	if valueLen > 0 {
		r.Value = b[keyLen : keyLen+valueLen : keyLen+valueLen]
	}
	return r
}

// recordAndBytes is a record and the bytes of its key and value, one
// object: kgo.Record is 160 bytes, and each size of B below makes the
// whole one of the Go allocator's size classes (176 to 416 bytes), so
// nothing is lost to rounding.
//
// The record's Context is the object itself (a context.Context without
// deadline, cancellation or values, as context.Background): it marks the
// record as NewRecord's, which the sink puts back into recordPools once
// the broker has acknowledged it (recycleRecord), for NewRecord to hand
// out again.
type recordAndBytes[B any] struct {
	rec  kgo.Record
	data B
}

// Deadline, Done, Err and Value make recordAndBytes a context.Context
// that is never done and carries nothing.
func (*recordAndBytes[B]) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*recordAndBytes[B]) Done() <-chan struct{}       { return nil }
func (*recordAndBytes[B]) Err() error                  { return nil }
func (*recordAndBytes[B]) Value(any) any               { return nil }

// recordPools hold the objects of NewRecord the sink recycled, by the
// size of their bytes: 16, 32, 48, 64, 80, 96, 128, 160, 192, 224, 256.
var recordPools [11]sync.Pool

// carve returns the record and n bytes of a recordAndBytes of pool, one
// recycled if it has one (its bytes zeroed), else a new one.
func carve[B any](pool int, n int, bytes func(*B) []byte) (*kgo.Record, []byte) {
	o, _ := recordPools[pool].Get().(*recordAndBytes[B])
	if o == nil {
		o = new(recordAndBytes[B])
	}
	o.rec.Context = o
	b := bytes(&o.data)[:n:n]
	clear(b)
	return &o.rec, b
}

// recycleRecord puts r back into its pool when NewRecord made it (its
// Context is the object it is part of), for NewRecord to hand out again:
// the sink calls it once the broker has acknowledged r, when neither
// franz-go nor the sink reads r any more. A record whose Context the
// serializer replaced, or a copy of a record (its Context is another
// record's object), is left to the collector.
func recycleRecord(r *kgo.Record) {
	if r == nil {
		return
	}
	switch o := r.Context.(type) {
	case *recordAndBytes[[16]byte]:
		put(o, r, 0)
	case *recordAndBytes[[32]byte]:
		put(o, r, 1)
	case *recordAndBytes[[48]byte]:
		put(o, r, 2)
	case *recordAndBytes[[64]byte]:
		put(o, r, 3)
	case *recordAndBytes[[80]byte]:
		put(o, r, 4)
	case *recordAndBytes[[96]byte]:
		put(o, r, 5)
	case *recordAndBytes[[128]byte]:
		put(o, r, 6)
	case *recordAndBytes[[160]byte]:
		put(o, r, 7)
	case *recordAndBytes[[192]byte]:
		put(o, r, 8)
	case *recordAndBytes[[224]byte]:
		put(o, r, 9)
	case *recordAndBytes[[256]byte]:
		put(o, r, 10)
	}
}

func put[B any](o *recordAndBytes[B], r *kgo.Record, pool int) {
	if r != &o.rec {
		return
	}
	o.rec = kgo.Record{}
	recordPools[pool].Put(o)
}

// recordWithBytes returns a zero record and n zero bytes beside it, in
// one allocation when n is at most 256 (recycled if the sink has one of
// its size); past that the bytes are an allocation of their own (the
// record's 160 bytes are then a small part).
func recordWithBytes(n int) (*kgo.Record, []byte) {
	switch {
	case n == 0:
		return new(kgo.Record), nil
	case n <= 16:
		return carve(0, n, func(b *[16]byte) []byte { return b[:] })
	case n <= 32:
		return carve(1, n, func(b *[32]byte) []byte { return b[:] })
	case n <= 48:
		return carve(2, n, func(b *[48]byte) []byte { return b[:] })
	case n <= 64:
		return carve(3, n, func(b *[64]byte) []byte { return b[:] })
	case n <= 80:
		return carve(4, n, func(b *[80]byte) []byte { return b[:] })
	case n <= 96:
		return carve(5, n, func(b *[96]byte) []byte { return b[:] })
	case n <= 128:
		return carve(6, n, func(b *[128]byte) []byte { return b[:] })
	case n <= 160:
		return carve(7, n, func(b *[160]byte) []byte { return b[:] })
	case n <= 192:
		return carve(8, n, func(b *[192]byte) []byte { return b[:] })
	case n <= 224:
		return carve(9, n, func(b *[224]byte) []byte { return b[:] })
	case n <= 256:
		return carve(10, n, func(b *[256]byte) []byte { return b[:] })
	}
	return new(kgo.Record), make([]byte, n)
}

// scratchMax bounds the encoding buffers serializerScratch keeps: a
// buffer grown past it for one large value is dropped after use.
const scratchMax = 64 << 10

// serializerScratch holds the buffers ValueSerializer and
// KeyValueSerializer encode into before NewRecord: a Serializer is shared
// by the sink's subtasks, which call it concurrently.
var serializerScratch = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// encodedRecord returns a record for topic whose key and value are copies
// of key and value (nil stays nil).
func encodedRecord(topic string, key, value []byte) *kgo.Record {
	r := NewRecord(topic, len(key), len(value))
	copy(r.Key, key)
	copy(r.Value, value)
	return r
}
