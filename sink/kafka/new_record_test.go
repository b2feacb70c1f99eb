package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// NewRecord: key and value of the lengths asked, zero, side by side in
// one buffer without room to grow into each other; a length of 0 leaves
// the field nil.
func TestNewRecord(t *testing.T) {
	for _, n := range [][2]int{{0, 0}, {0, 7}, {5, 0}, {10, 16}, {16, 16}, {1, 63}, {100, 156}, {100, 157}, {40, 40}, {1, 159}, {200, 24}, {3, 5000}, {-1, 4}} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := NewRecord("t", n[0], n[1])
			if r.Topic != "t" {
				t.Fatalf("topic %q", r.Topic)
			}
			for _, f := range []struct {
				name string
				b    []byte
				want int
			}{{"key", r.Key, max(n[0], 0)}, {"value", r.Value, n[1]}} {
				if f.want == 0 && f.b != nil {
					t.Fatalf("%s %v, want nil", f.name, f.b)
				}
				if len(f.b) != f.want || cap(f.b) != f.want || !bytes.Equal(f.b, make([]byte, f.want)) {
					t.Fatalf("%s: len %d cap %d %v; want %d zero bytes, no spare capacity", f.name, len(f.b), cap(f.b), f.b, f.want)
				}
			}
			if len(r.Key) == 0 {
				return
			}
			// Appending to the key must not write over the value.
			for i := range r.Value {
				r.Value[i] = 'v'
			}
			_ = append(r.Key, bytes.Repeat([]byte{'k'}, 8)...)
			if bytes.ContainsRune(r.Value, 'k') {
				t.Fatalf("an append to the key wrote into the value: %q", r.Value)
			}
		})
	}
}

// The library's serializers encode into a shared scratch buffer and copy
// into the record: records made one after another, and concurrently by
// several subtasks, keep their own keys and values.
func TestSerializersRecordsOwnTheirBytes(t *testing.T) {
	kv := KeyValueSerializer("out", func(v string) string { return "key-" + v }, codec.String{}, codec.String{})
	val := ValueSerializer("out", codec.String{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			var want []string
			var recs, recs2 []*kgo.Record
			for i := range 2000 {
				v := fmt.Sprintf("%d-%d-%s", g, i, bytes.Repeat([]byte{'x'}, i%300))
				r, err := kv(v)
				if err != nil {
					errs <- err
					return
				}
				r2, err := val(v)
				if err != nil {
					errs <- err
					return
				}
				want, recs, recs2 = append(want, v), append(recs, r), append(recs2, r2)
			}
			for i, v := range want {
				r, r2 := recs[i], recs2[i]
				if r.Topic != "out" || string(r.Key) != "key-"+v || string(r.Value) != v || r2.Topic != "out" || r2.Key != nil || string(r2.Value) != v {
					errs <- fmt.Errorf("records %d of goroutine %d: %q %q %q / %q %q %q, want out %q %q / out no key %q",
						i, g, r.Topic, r.Key, r.Value, r2.Topic, r2.Key, r2.Value, "key-"+v, v, v)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A value the codec refuses: the record returned with the error carries
// the topic and, from KeyValueSerializer, a copy of the key.
func TestSerializersPartialRecord(t *testing.T) {
	kv := KeyValueSerializer("out", func(v string) string { return v }, codec.String{}, refusing{})
	r, err := kv("k1")
	if err == nil || r == nil || r.Topic != "out" || string(r.Key) != "k1" || r.Value != nil {
		t.Fatalf("got %+v, %v; want the record with topic and key, and the error", r, err)
	}
	if _, err := kv("k2"); err == nil || string(r.Key) != "k1" {
		t.Fatalf("the next record's encoding changed the first one's key to %q", r.Key)
	}
	r, err = ValueSerializer[string]("out", refusing{})("v")
	if err == nil || r == nil || r.Topic != "out" || r.Key != nil || r.Value != nil {
		t.Fatalf("got %+v, %v; want the record with its topic only, and the error", r, err)
	}
}

// refusing is a codec that writes a byte and then refuses.
type refusing struct{}

func (refusing) Append(dst []byte, _ string) ([]byte, error) {
	return append(dst, '!'), errors.New("refused")
}

func (refusing) Decode([]byte) (string, error) { return "", errors.New("refused") }

// recycledWithin makes a record, hands it to use and makes another of
// its size, tries times or until NewRecord hands out the first one
// again, which it returns (nil if none came back: sync.Pool may drop
// what it is given, the race detector a quarter of it).
func recycledWithin(t *testing.T, tries int, use func(*kgo.Record)) *kgo.Record {
	t.Helper()
	for range tries {
		r := NewRecord("first", 10, 16)
		use(r)
		if r2 := NewRecord("second", 10, 16); r2 == r {
			return r2
		}
	}
	return nil
}

// A record NewRecord made comes back from NewRecord once recycled, as
// NewRecord makes a new one: zero bytes, no headers, partition, offset or
// timestamp of its first use.
func TestNewRecordRecycled(t *testing.T) {
	r := recycledWithin(t, 200, func(r *kgo.Record) {
		copy(r.Key, "0123456789")
		copy(r.Value, "abcdefghijklmnop")
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "h", Value: []byte("v")})
		r.Partition, r.Offset, r.Timestamp, r.ProducerID = 3, 77, time.UnixMilli(5), 9
		recycleRecord(r)
	})
	if r == nil {
		t.Fatal("NewRecord never handed out a recycled record")
	}
	if r.Topic != "second" || !bytes.Equal(r.Key, make([]byte, 10)) || !bytes.Equal(r.Value, make([]byte, 16)) ||
		cap(r.Key) != 10 || cap(r.Value) != 16 || r.Headers != nil || r.Partition != 0 || r.Offset != 0 ||
		!r.Timestamp.IsZero() || r.ProducerID != 0 {
		t.Fatalf("recycled record %+v: want topic second, zero key and value, nothing of its first use", r)
	}
	if r.Context == nil || r.Context.Done() != nil || r.Context.Err() != nil || r.Context.Value("k") != nil {
		t.Fatalf("recycled record's Context %v: want the mark, never done, no values", r.Context)
	}
}

// A record whose Context the serializer replaced, or a copy of a
// record, is not recycled: NewRecord never hands it out again.
func TestNewRecordNotRecycled(t *testing.T) {
	if r := recycledWithin(t, 50, func(r *kgo.Record) {
		r.Context = context.Background()
		recycleRecord(r)
	}); r != nil {
		t.Fatalf("a record with the serializer's own Context was recycled")
	}
	for range 50 {
		r := NewRecord("first", 10, 16)
		c := *r
		recycleRecord(&c)
		if r2 := NewRecord("second", 10, 16); r2 == r || r2 == &c {
			t.Fatalf("a copy of a record was recycled")
		}
	}
	recycleRecord(nil)
	recycleRecord(&kgo.Record{})
}

// The sink's promise recycles a record once acknowledged, not one that
// failed (whose error names its topic and partition).
func TestPromiseRecyclesAcknowledged(t *testing.T) {
	res := newResults()
	if r := recycledWithin(t, 200, func(r *kgo.Record) { res.promise(r, nil) }); r == nil {
		t.Fatal("no acknowledged record was recycled")
	}
	if r := recycledWithin(t, 50, func(r *kgo.Record) { res.promise(r, errors.New("refused")) }); r != nil {
		t.Fatal("a failed record was recycled")
	}
}

// Records recycled while the sink writes: every value written arrives
// with its own key, none overwritten by a later record's (a record
// recycled before franz-go is done with it would be).
func TestRecycledRecordsWrittenIntact(t *testing.T) {
	seeds := cluster(t, 2, "out")
	s, err := NewSink(seeds, KeyValueSerializer("out", func(v string) string { return "k" + v }, codec.String{}, codec.String{}),
		Guarantee(AtLeastOnce), ClientOptions(kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(64)))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const n = 20000
	for i := range n {
		if err := w.Write(fmt.Sprintf("%06d", i), source.NoTimestamp); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.(sink.PrecommittingWriter[string]).PrepareCommit(1); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testutil.Context(t, 0)
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d values: %v", len(seen), n, ctx.Err())
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != "k"+string(r.Value) || seen[string(r.Value)] {
				bad = fmt.Errorf("record key %q value %q (seen before: %v)", r.Key, r.Value, seen[string(r.Value)])
			}
			seen[string(r.Value)] = true
		})
		if bad != nil {
			t.Fatal(bad)
		}
	}
}
