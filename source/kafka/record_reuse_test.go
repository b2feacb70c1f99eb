package kafka

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/source"
)

// reuseInput produces batches of snappy-compressed records to partition
// 0 of topic "in", one batch per produce, and returns their values: the
// records of a batch point into its decompressed bytes, which a reader
// reusing the records' memory decompresses a later batch into.
func reuseInput(t *testing.T, e *env, batches, perBatch int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var want []string
	for b := range batches {
		var rs []*kgo.Record
		for i := range perBatch {
			v := fmt.Sprintf("batch %03d record %03d %s", b, i, strings.Repeat("x", 40))
			want = append(want, v)
			rs = append(rs, &kgo.Record{Topic: "in", Partition: 0, Key: []byte(v[:15]), Value: []byte(v),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(v)}}, Timestamp: time.UnixMilli(int64(1000 + i))})
		}
		if err := cl.ProduceSync(ctxFor(t), rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	return want
}

// readAllOf reads the whole of partition 0 of "in" with decode (one
// fetch of one batch at a time, so that a batch's memory is free to be
// reused before the next is fetched) and returns what it emitted.
func readAllOf[T any](t *testing.T, e *env, n int, decode Decoder[T], opts ...Option) []T {
	t.Helper()
	opts = append([]Option{Bounded(), MaxBufferedFetches(1),
		ClientOptions(kgo.FetchMaxBytes(512), kgo.FetchMaxPartitionBytes(512))}, opts...)
	s, err := NewSource(e.seeds, Topics("in"), decode, opts...)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := s.NewReader(source.ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := sr.(*Reader[T])
	defer r.Close()
	out := &fakeOutput[T]{}
	st, err := pollUntil(t, r, out, func() bool { return false })
	if err != nil || st != source.EndOfInput {
		t.Fatalf("read: status %v, err %v", st, err)
	}
	if len(out.values) != n {
		t.Fatalf("read %d records, want %d", len(out.values), n)
	}
	return out.values
}

// A decoder of one's own may keep the record and its bytes: the source
// reuses nothing of the records then, and what it emitted stays as it
// was read, batches later.
func TestDecoderMayKeepTheRecord(t *testing.T) {
	e := newEnv(t, 1, "in")
	want := reuseInput(t, e, 12, 50)
	t.Run("value", func(t *testing.T) {
		got := readAllOf(t, e, len(want), func(r *kgo.Record) ([]byte, error) { return r.Value, nil })
		for i, v := range got {
			if string(v) != want[i] {
				t.Fatalf("record %d reads %q after the read, want %q", i, v, want[i])
			}
		}
	})
	t.Run("record", func(t *testing.T) {
		got := readAllOf(t, e, len(want), func(r *kgo.Record) (*kgo.Record, error) { return r, nil })
		for i, r := range got {
			if string(r.Value) != want[i] || string(r.Key) != want[i][:15] || r.Offset != int64(i) ||
				len(r.Headers) != 1 || string(r.Headers[0].Value) != want[i] {
				t.Fatalf("record %d reads offset %d key %q value %q headers %v after the read, want offset %d value %q",
					i, r.Offset, r.Key, r.Value, r.Headers, i, want[i])
			}
		}
	})
}

// The source reuses the records' memory with ValueDecoder and with a
// decoder declared with DecoderKeepsNothing, and reads every record right.
func TestDecoderKeepingNothingReusesRecords(t *testing.T) {
	e := newEnv(t, 1, "in")
	want := reuseInput(t, e, 12, 50)
	t.Run("ValueDecoder", func(t *testing.T) {
		got := readAllOf(t, e, len(want), ValueDecoder[string](codec.String{}))
		for i, v := range got {
			if v != want[i] {
				t.Fatalf("record %d is %q, want %q", i, v, want[i])
			}
		}
	})
	t.Run("DecoderKeepsNothing", func(t *testing.T) {
		got := readAllOf(t, e, len(want), func(r *kgo.Record) (string, error) {
			if !bytes.Equal(r.Headers[0].Value, r.Value) {
				return "", fmt.Errorf("header %q, value %q", r.Headers[0].Value, r.Value)
			}
			return string(r.Key) + string(r.Value[15:]), nil
		}, DecoderKeepsNothing())
		for i, v := range got {
			if v != want[i] {
				t.Fatalf("record %d is %q, want %q", i, v, want[i])
			}
		}
	})
}

// NewSource reuses the records' memory for ValueDecoder's decoders and
// for decoders declared with DecoderKeepsNothing, not for others.
func TestReuseFollowsTheDecoder(t *testing.T) {
	own := func(r *kgo.Record) ([]byte, error) { return r.Value, nil }
	for _, tc := range []struct {
		name string
		src  func() (*Source[[]byte], error)
		want bool
	}{
		{"ValueDecoder", func() (*Source[[]byte], error) {
			return NewSource([]string{"x:9092"}, Topics("t"), ValueDecoder[[]byte](codec.Bytes{}))
		}, true},
		{"own decoder", func() (*Source[[]byte], error) { return NewSource([]string{"x:9092"}, Topics("t"), own) }, false},
		{"own decoder converted", func() (*Source[[]byte], error) {
			return NewSource([]string{"x:9092"}, Topics("t"), Decoder[[]byte](own))
		}, false},
		{"own decoder keeping nothing", func() (*Source[[]byte], error) {
			return NewSource([]string{"x:9092"}, Topics("t"), own, DecoderKeepsNothing())
		}, true},
	} {
		s, err := tc.src()
		if err != nil {
			t.Fatal(err)
		}
		if s.cfg.reuse != tc.want {
			t.Errorf("%s: reuse %v, want %v", tc.name, s.cfg.reuse, tc.want)
		}
	}
	// Another type's ValueDecoder is told apart from a function literal.
	s, err := NewSource([]string{"x:9092"}, Topics("t"), ValueDecoder[int64](codec.Int[int64]{}))
	if err != nil || !s.cfg.reuse {
		t.Errorf("ValueDecoder[int64]: reuse %v, err %v", s != nil && s.cfg.reuse, err)
	}
}

// The pool remembers recordPoolSpares slices of each kind, the latest,
// and hands out the smallest that fits if it is at most twice what is
// asked; a collection takes the spares nobody took.
func TestRecordPoolSpares(t *testing.T) {
	// No collection but the test's own: the spares are held weakly.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var p recordPool
	if got := p.GetRecords(10); got != nil {
		t.Fatalf("empty pool gave a slice of %d", cap(got))
	}
	for _, n := range []int{10, 100, 50, 200, 20} {
		p.PutRecords(make([]kgo.Record, n))
	}
	if len(p.recs) != recordPoolSpares {
		t.Fatalf("%d spares, want %d", len(p.recs), recordPoolSpares)
	}
	if got := p.GetRecords(11); cap(got) != 20 || len(got) != 0 {
		t.Fatalf("GetRecords(11) gave capacity %d length %d, want 20 and 0", cap(got), len(got))
	}
	if got := cap(p.GetRecords(80)); got != 100 {
		t.Fatalf("GetRecords(80) gave capacity %d, want 100", got)
	}
	if got := p.GetRecords(300); got != nil {
		t.Fatalf("GetRecords(300) gave capacity %d, want none", cap(got))
	}
	// Not a spare of more than twice what is asked.
	if got := p.GetRecords(99); got != nil {
		t.Fatalf("GetRecords(99) gave capacity %d, want none", cap(got))
	}
	if got := cap(p.GetRecords(100)); got != 200 {
		t.Fatalf("GetRecords(100) gave capacity %d, want 200", got)
	}
	// Snappy's header gives the decompressed size; other codecs get the
	// largest spare.
	p.PutDecompressBytes(make([]byte, 1000))
	p.PutDecompressBytes(make([]byte, 300))
	if got := cap(p.GetDecompressBytes([]byte{200, 1, 0}, kgo.CodecSnappy)); got != 300 { // 200 bytes decompressed
		t.Fatalf("snappy of 200 bytes got capacity %d, want 300", got)
	}
	p.PutDecompressBytes(make([]byte, 300))
	if got := cap(p.GetDecompressBytes([]byte{1, 2, 3}, kgo.CodecLz4)); got != 1000 {
		t.Fatalf("lz4 got capacity %d, want 1000", got)
	}
	// What is left goes with the next collection.
	if len(p.recs) != 1 || len(p.bufs) != 1 {
		t.Fatalf("%d and %d spares left before the collection, want 1 and 1", len(p.recs), len(p.bufs))
	}
	runtime.GC()
	if got := p.GetRecords(50); got != nil {
		t.Fatalf("after a collection GetRecords(50) gave capacity %d, want none", cap(got))
	}
	if got := p.GetDecompressBytes(nil, kgo.CodecLz4); got != nil {
		t.Fatalf("after a collection GetDecompressBytes gave capacity %d, want none", cap(got))
	}
	if len(p.recs) != 0 {
		t.Fatalf("%d collected spares remembered", len(p.recs))
	}
}

// valueError is a decoder's error that holds the refused record's value.
type valueError struct{ value []byte }

func (e *valueError) Error() string { return fmt.Sprintf("refused %q", e.value) }

// The records the decoder refuses are never reused, even when it keeps
// nothing of the others: their errors (and what the decoder kept of
// them) and their dead-letter copies read their bytes as they were.
func TestRefusedRecordsAreNotReused(t *testing.T) {
	e := newEnv(t, 1, "in", "dlq")
	want := reuseInput(t, e, 12, 50)
	var refused []*valueError
	var wantRefused []string
	for i, v := range want {
		if i%37 == 5 {
			wantRefused = append(wantRefused, v)
		}
	}
	got := readAllOf(t, e, len(want)-len(wantRefused), func(r *kgo.Record) (string, error) {
		if r.Offset%37 == 5 {
			err := &valueError{r.Value}
			refused = append(refused, err)
			return "", err
		}
		return string(r.Value), nil
	}, DecoderKeepsNothing(), OnBadRecord(DeadLetterTopic("dlq")))
	if len(got) == 0 || got[len(got)-1] != want[len(want)-1] {
		t.Fatalf("read %d records, the last %q", len(got), got[len(got)-1])
	}
	if len(refused) != len(wantRefused) {
		t.Fatalf("%d refused, want %d", len(refused), len(wantRefused))
	}
	for i, err := range refused {
		if string(err.value) != wantRefused[i] {
			t.Fatalf("refused record %d reads %q after the read, want %q", i, err.value, wantRefused[i])
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.ConsumeTopics("dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var dead []string
	ctx := ctxFor(t)
	for len(dead) < len(wantRefused) && ctx.Err() == nil {
		for _, r := range cl.PollFetches(ctx).Records() {
			dead = append(dead, string(r.Value))
		}
	}
	if fmt.Sprint(dead) != fmt.Sprint(wantRefused) {
		t.Fatalf("dead-letter topic holds %q, want %q", dead, wantRefused)
	}
}
