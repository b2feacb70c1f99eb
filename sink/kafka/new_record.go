package kafka

import (
	"sync"

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
type recordAndBytes[B any] struct {
	rec  kgo.Record
	data B
}

func carve[B any](bytes func(*B) []byte) (*kgo.Record, []byte) {
	o := new(recordAndBytes[B])
	return &o.rec, bytes(&o.data)
}

// recordWithBytes returns a zero record and n bytes beside it, in one
// allocation when n is at most 256; past that the bytes are an allocation
// of their own (the record's 160 bytes are then a small part).
func recordWithBytes(n int) (*kgo.Record, []byte) {
	switch {
	case n == 0:
		return new(kgo.Record), nil
	case n <= 16:
		return carve(func(b *[16]byte) []byte { return b[:n] })
	case n <= 32:
		return carve(func(b *[32]byte) []byte { return b[:n] })
	case n <= 48:
		return carve(func(b *[48]byte) []byte { return b[:n] })
	case n <= 64:
		return carve(func(b *[64]byte) []byte { return b[:n] })
	case n <= 80:
		return carve(func(b *[80]byte) []byte { return b[:n] })
	case n <= 96:
		return carve(func(b *[96]byte) []byte { return b[:n] })
	case n <= 128:
		return carve(func(b *[128]byte) []byte { return b[:n] })
	case n <= 160:
		return carve(func(b *[160]byte) []byte { return b[:n] })
	case n <= 192:
		return carve(func(b *[192]byte) []byte { return b[:n] })
	case n <= 224:
		return carve(func(b *[224]byte) []byte { return b[:n] })
	case n <= 256:
		return carve(func(b *[256]byte) []byte { return b[:n] })
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
