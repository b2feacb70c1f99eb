package kafka

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/source"
)

var errPoison = errors.New("poison")

// poisonDecoder decodes int64 values; it panics with "boom" on the value
// "panic", panics with errPoison on "panic-error", and refuses anything
// else that is not a number.
func poisonDecoder(rec *kgo.Record) (int64, error) {
	switch string(rec.Value) {
	case "panic":
		panic("boom")
	case "panic-error":
		panic(errPoison)
	}
	return codec.Int[int64]{}.Decode(rec.Value)
}

// produceRecords writes records to partition 0 of "in".
func (e *env) produceRecords(rs ...*kgo.Record) {
	e.t.Helper()
	for _, r := range rs {
		r.Topic = "in"
	}
	if err := e.cl.ProduceSync(ctxFor(e.t), rs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

func intRecord(v int64) *kgo.Record {
	b, _ := codec.Int[int64]{}.Append(nil, v)
	return &kgo.Record{Value: b}
}

func poisonReader(t *testing.T, e *env, opts ...Option) *Reader[int64] {
	t.Helper()
	s, err := NewSource(e.seeds, Topics("in"), poisonDecoder, opts...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.NewReader(source.ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r.(*Reader[int64])
}

// A panicking decoder fails the reader under the default policy, with an
// error naming the record and the panic value, like a decoder error.
func TestDecoderPanicFails(t *testing.T) {
	e := newEnv(t, 1, "in")
	e.produceRecords(intRecord(1), &kgo.Record{Value: []byte("panic")}, intRecord(2))
	r := poisonReader(t, e)
	out := &fakeOutput[int64]{}
	_, err := pollUntil(t, r, out, func() bool { return false })
	if !errors.Is(err, ErrBadRecord) || !errors.Is(err, ErrDecoderPanic) ||
		!strings.Contains(err.Error(), "topic in partition 0 offset 1") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err %v; want ErrBadRecord and ErrDecoderPanic naming topic in partition 0 offset 1 and the panic value boom", err)
	}
	if fmt.Sprint(out.values) != "[1]" {
		t.Fatalf("emitted %v before the poison record, want [1]", out.values)
	}
	if n := r.SkippedRecords(); n != 0 {
		t.Fatalf("skipped %d records under the fail policy", n)
	}

	// A panic with an error value: the error is there to match.
	e2 := newEnv(t, 1, "in")
	e2.produceRecords(&kgo.Record{Value: []byte("panic-error")})
	_, err = pollUntil(t, poisonReader(t, e2), &fakeOutput[int64]{}, func() bool { return false })
	if !errors.Is(err, errPoison) || !errors.Is(err, ErrDecoderPanic) || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("err %v; want it to wrap the panic's error and ErrDecoderPanic, naming offset 0", err)
	}
}

// Under the skip and dead-letter policies a panicking decoder's record is
// skipped like a refused one and counted, per reader and per partition;
// the dead-letter copy has the record's headers, its origin, and the
// panic in sluice.error.
func TestDecoderPanicSkippedAndDeadLettered(t *testing.T) {
	e := newEnv(t, 1, "in", "dlq")
	e.produceRecords(
		intRecord(1),
		&kgo.Record{Key: []byte("k"), Value: []byte("panic"), Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}}}, // offset 1
		intRecord(2),
		&kgo.Record{Value: []byte("not a number")}, // offset 3
		intRecord(3),
	)
	for _, c := range []struct {
		name   string
		policy BadRecordPolicy
		dead   int64
	}{
		{"skip", SkipBadRecords(), 0},
		{"dead-letter", DeadLetterTopic("dlq"), 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := poisonReader(t, e, OnBadRecord(c.policy))
			out := &fakeOutput[int64]{}
			if _, err := pollUntil(t, r, out, func() bool { return len(out.values) == 3 }); err != nil {
				t.Fatalf("poll: %v", err)
			}
			if _, err := r.SnapshotState(1); err != nil { // waits for the dead-letter copies
				t.Fatal(err)
			}
			if fmt.Sprint(out.values) != "[1 2 3]" {
				t.Fatalf("emitted %v, want [1 2 3]", out.values)
			}
			if got := r.SkippedRecords(); got != 2 {
				t.Errorf("SkippedRecords %d, want 2 (a panic and a refusal)", got)
			}
			if got := r.DeadLetteredRecords(); got != c.dead {
				t.Errorf("DeadLetteredRecords %d, want %d", got, c.dead)
			}
			m := r.Metrics()
			if len(m) != 1 || m[0].SkippedRecords != 2 || m[0].DeadLetteredRecords != c.dead {
				t.Errorf("partition metrics %+v, want 2 skipped and %d dead-lettered", m, c.dead)
			}
			if m[0].CurrentOffset != 5 {
				t.Errorf("offset %d after the five records, want 5", m[0].CurrentOffset)
			}
		})
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.ConsumeTopics("dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	ctx := ctxFor(t)
	for len(recs) < 2 && ctx.Err() == nil {
		recs = append(recs, cl.PollFetches(ctx).Records()...)
	}
	if len(recs) != 2 {
		t.Fatalf("dead-letter topic holds %d records, want 2", len(recs))
	}
	p := recs[0]
	h := map[string]string{}
	for _, x := range p.Headers {
		h[x.Key] = string(x.Value)
	}
	if string(p.Key) != "k" || string(p.Value) != "panic" || h["trace"] != "abc" ||
		h[HeaderSourceTopic] != "in" || h[HeaderSourcePartition] != "0" || h[HeaderSourceOffset] != "1" ||
		!strings.Contains(h[HeaderError], "decoder panicked") || !strings.Contains(h[HeaderError], "boom") {
		t.Fatalf("dead-letter copy of the panic record %q=%q with headers %v; want the record, its own header, its origin and the panic in %s",
			p.Key, p.Value, h, HeaderError)
	}
	if string(recs[1].Value) != "not a number" {
		t.Fatalf("second dead-letter record %q, want the refused one", recs[1].Value)
	}
}
