package operators

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// stepReader runs the test's steps, one per PollNext, on the output the
// source operator gives it.
type stepReader struct {
	steps []func(out source.ReaderOutput[int64]) error
	avail chan struct{}
}

func (r *stepReader) PollNext(out source.Output[int64]) (source.Status, error) {
	if len(r.steps) == 0 {
		return source.NothingAvailable, nil
	}
	step := r.steps[0]
	r.steps = r.steps[1:]
	return source.MoreAvailable, step(out.(source.ReaderOutput[int64]))
}
func (r *stepReader) Available() <-chan struct{} { return r.avail }
func (r *stepReader) Close() error               { return nil }

type stepSource struct{ r *stepReader }

func (s stepSource) Bounded() bool                                                { return false }
func (s stepSource) NewReader(source.ReaderContext) (source.Reader[int64], error) { return s.r, nil }

// sourceRun is a source operator under test: what it sent down the chain
// (records, watermarks, idleness changes) in order.
type sourceRun struct {
	t      *testing.T
	clock  *fakeClock
	reader *stepReader
	op     *Source[int64]
	events []string
	wm     int64 // the latest watermark sent
	late   []int64
}

func (r *sourceRun) Collect(v int64, ts int64) error {
	if ts <= r.wm {
		r.late = append(r.late, ts)
	}
	r.events = append(r.events, fmt.Sprintf("r%d", ts))
	return nil
}

func (r *sourceRun) EmitWatermark(wm int64) error {
	r.wm = wm
	r.events = append(r.events, fmt.Sprintf("w%d", wm))
	return nil
}

// newSourceRun makes the operator with the strategy: bounded
// out-of-orderness of 10 ms, timestamps from the records' values,
// checked every 100 ms, with idleness idle.
func newSourceRun(t *testing.T, idle time.Duration) *sourceRun {
	t.Helper()
	r := &sourceRun{t: t, clock: &fakeClock{now: 1}, reader: &stepReader{avail: make(chan struct{})}, wm: MinWatermark}
	osb, err := state.NewOperatorStateBackend(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	sc := &SourceContext{Op: &Context{Subtask: 0, Parallelism: 1, OperatorState: osb, ProcessingTime: r.clock},
		SetIdle: func(idle bool) error {
			r.events = append(r.events, map[bool]string{true: "idle", false: "active"}[idle])
			return nil
		}}
	ws := WatermarkStrategy[int64]{Periodic: true, OutOfOrderness: 10 * time.Millisecond, Idleness: idle, Interval: 100 * time.Millisecond,
		Timestamps: func(v int64, _ int64) int64 { return v }}
	if r.op, err = NewSource[int64](stepSource{r.reader}, ws, sc, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// poll runs one reader step.
func (r *sourceRun) poll(step func(out source.ReaderOutput[int64]) error) {
	r.t.Helper()
	r.reader.steps = append(r.reader.steps, step)
	if _, err := r.op.PollNext(); err != nil {
		r.t.Fatal(err)
	}
}

// tick moves processing time by one check interval.
func (r *sourceRun) tick() { r.clock.advance(r.t, r.clock.now+100) }

// since returns the events from i on.
func (r *sourceRun) since(i int) string { return fmt.Sprint(r.events[i:]) }

func collect(out source.Output[int64], ts ...int64) error {
	for _, v := range ts {
		// The source's own timestamp says something else: the strategy's
		// assigner wins.
		if err := out.Collect(v, 1_000_000+v); err != nil {
			return err
		}
	}
	return nil
}

// The strategy runs per split: the subtask's watermark is the smallest
// of its splits', so a record a split emits within its own bounded
// disorder is never late, whatever the other splits read meanwhile, and
// the assigner's timestamps, not the source's, make the watermarks.
func TestSourceWatermarksPerSplit(t *testing.T) {
	r := newSourceRun(t, 0)
	var a, b source.Output[int64]
	r.poll(func(out source.ReaderOutput[int64]) error {
		a, b = out.CreateOutputForSplit("a"), out.CreateOutputForSplit("b")
		if out.CreateOutputForSplit("a") != a {
			t.Error("a second CreateOutputForSplit of a split made another output")
		}
		return collect(a, 1000, 1010)
	})
	r.tick()
	// b has no record yet: it holds the watermark back.
	if len(r.events) != 2 || r.wm != MinWatermark {
		t.Fatalf("events %v; want the two records and no watermark while split b has no record", r.events)
	}
	r.poll(func(source.ReaderOutput[int64]) error { return collect(b, 100, 95) })
	r.tick()
	if r.wm != 100-10-1 {
		t.Fatalf("watermark %d, want b's 89 (events %v)", r.wm, r.events)
	}
	// a runs ahead, b is late within its own bound: not late.
	r.poll(func(source.ReaderOutput[int64]) error { return collect(a, 2000) })
	r.poll(func(source.ReaderOutput[int64]) error { return collect(b, 91, 150) })
	r.tick()
	if r.wm != 150-11 || len(r.late) > 0 {
		t.Fatalf("watermark %d, late %v; want 139 and nothing late (events %v)", r.wm, r.late, r.events)
	}
	// A record older than its split's own bound is late.
	r.poll(func(source.ReaderOutput[int64]) error { return collect(b, 120) })
	if !slices.Equal(r.late, []int64{120}) {
		t.Fatalf("late %v, want [120]", r.late)
	}
	// A released split no longer holds the watermark back.
	r.poll(func(out source.ReaderOutput[int64]) error { out.ReleaseOutputForSplit("b"); return nil })
	if r.wm != 2000-11 {
		t.Fatalf("watermark %d after b was released, want a's 1989", r.wm)
	}
}

// Idleness is per split: a quiet split stops holding the watermark back
// after the timeout; the subtask is idle when every split is, active
// again with the next record.
func TestSourceIdlenessPerSplit(t *testing.T) {
	r := newSourceRun(t, 250*time.Millisecond)
	var a, b source.Output[int64]
	r.poll(func(out source.ReaderOutput[int64]) error {
		a, b = out.CreateOutputForSplit("a"), out.CreateOutputForSplit("b")
		return collect(a, 1000)
	})
	for range 3 {
		r.tick()
		r.poll(func(source.ReaderOutput[int64]) error { return collect(a, 1000) })
	}
	if r.wm != MinWatermark {
		t.Fatalf("watermark %d before b's idleness timeout, want none (events %v)", r.wm, r.events)
	}
	r.tick()
	if r.wm != 1000-11 {
		t.Fatalf("watermark %d once b is idle, want a's 989 (events %v)", r.wm, r.events)
	}
	mark := len(r.events)
	for range 4 {
		r.tick()
	}
	if got := r.since(mark); got != "[idle]" {
		t.Fatalf("events once a is quiet too: %s, want [idle]", got)
	}
	// A record on b makes it and the subtask active; b's watermark holds
	// the subtask's back (it does not go back).
	mark = len(r.events)
	r.poll(func(source.ReaderOutput[int64]) error { return collect(b, 500) })
	r.tick()
	if got := r.since(mark); got != "[active r500]" {
		t.Fatalf("events after a record on the idle split b: %s, want [active r500]", got)
	}
	// Idle again; a split assigned now and its first record: the subtask
	// is active before the record goes out.
	for range 4 {
		r.tick()
	}
	mark = len(r.events)
	r.poll(func(out source.ReaderOutput[int64]) error { return collect(out.CreateOutputForSplit("c"), 600) })
	if got := r.since(mark); got != "[active r600]" {
		t.Fatalf("events of a new split's first record while the subtask was idle: %s, want [active r600]", got)
	}
	_ = a
}

// A reader without split outputs is one split: the strategy applies to
// all its records, and it is idle when it emits nothing for the timeout
// (even before its first record).
func TestSourceWithoutSplits(t *testing.T) {
	r := newSourceRun(t, 150*time.Millisecond)
	for range 3 {
		r.tick()
	}
	if got := r.since(0); got != "[idle]" {
		t.Fatalf("events of a reader that emitted nothing: %s, want [idle]", got)
	}
	r.poll(func(out source.ReaderOutput[int64]) error { return collect(out, 300, 200) })
	r.tick()
	if got := r.since(1); got != "[active r300 r200 w289]" {
		t.Fatalf("events: %s, want [active r300 r200 w289]", got)
	}
	// The reader's own watermark counts beside the strategy's.
	r.poll(func(out source.ReaderOutput[int64]) error { return out.EmitWatermark(source.MaxWatermark) })
	if r.wm != source.MaxWatermark {
		t.Fatalf("watermark %d after the reader emitted the maximum", r.wm)
	}
}
