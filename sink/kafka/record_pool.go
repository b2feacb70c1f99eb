package kafka

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxReusedBytes bounds the key and value capacity a reused record keeps:
// a record that once held a large value does not pin it for every small
// one after it.
const maxReusedBytes = 4 << 10

// recordPool holds the records of one reusing serializer (ValueSerializer,
// KeyValueSerializer, RecordSerializer) whose outcome franz-go has
// reported, for the serializer to fill again: without it every record
// written is a kgo.Record (about 200 bytes) and its key and value of
// garbage, a third of what the exactly-once Kafka job allocated (issue
// 32). A record of the pool carries the pool as its Context, which is how
// the writer's promise knows it may hand the record back (recycle); the
// pool is an empty context for anything else that reads it (franz-go's
// hooks).
//
// The pool is a stack: the record filled next is the one acknowledged
// last, still in the processor's caches (franz-go touched it to report
// its offset). A sync.Pool gives the task the oldest record another
// processor freed, a cache miss per record that cost more CPU than the
// allocation it saved. At most maxFreeRecords wait.
type recordPool struct {
	context.Context
	mu   sync.Mutex
	free []*kgo.Record
}

// maxFreeRecords bounds the records a pool keeps for reuse: about the
// records a producer buffers under the default budget
// (MaxBufferedRecords of producerShare), 2 MiB of records.
const maxFreeRecords = 8 << 10

func newRecordPool() *recordPool { return &recordPool{Context: context.Background()} }

// get returns an empty record of the pool: Key and Value are empty
// slices with the capacity of an earlier record's, Headers empty.
func (p *recordPool) get() *kgo.Record {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		r := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return r
	}
	p.mu.Unlock()
	return &kgo.Record{Context: p}
}

// recycle hands r back to its pool if it came from one. Only for a
// record franz-go acknowledged: it then holds nothing of it (the promise
// is the last it does with a record), and neither does the writer once
// its promise returns. A failed record is left to the collector, so that
// nothing franz-go might still be writing is overwritten.
func recycle(r *kgo.Record) {
	p, ok := r.Context.(*recordPool)
	if !ok {
		return
	}
	key, value, headers := r.Key[:0], r.Value[:0], r.Headers[:0]
	if cap(key) > maxReusedBytes {
		key = nil
	}
	if cap(value) > maxReusedBytes {
		value = nil
	}
	clear(r.Headers[:cap(r.Headers)])
	*r = kgo.Record{Key: key, Value: value, Headers: headers, Context: p}
	p.mu.Lock()
	if len(p.free) < maxFreeRecords {
		p.free = append(p.free, r)
	}
	p.mu.Unlock()
}

// RecordSerializer returns a Serializer whose records the sink reuses:
// fill sets r's topic, key, value (and headers, partition or timestamp if
// it wants) for v, and the sink hands r to fill again for a later value
// once the broker has acknowledged it. r comes empty, except that Key and
// Value are empty slices (not nil) with the capacity of an earlier
// record's bytes: fill appends to them (r.Value = append(r.Value[:0],
// ...), a codec's Append(r.Value[:0], v)), or sets nil for a null key or
// value. fill must not keep r or its slices, nor set r.Context. A record
// fill fails on is written as the SerializerErrorPolicy says, and not
// reused. ValueSerializer and KeyValueSerializer are RecordSerializers.
func RecordSerializer[T any](fill func(r *kgo.Record, v T) error) Serializer[T] {
	pool := newRecordPool()
	return func(v T) (*kgo.Record, error) {
		r := pool.get()
		if err := fill(r, v); err != nil {
			r.Context = nil // the dead-letter copy may share its bytes
			return r, err
		}
		return r, nil
	}
}
