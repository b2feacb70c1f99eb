package operators

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/state"
)

// asyncHarness runs an async operator as its task would: mails are run
// by the test goroutine (the task goroutine), calls complete on others.
type asyncHarness struct {
	mails chan func() error
	ctx   *Context
}

func newAsyncHarness(t *testing.T) *asyncHarness {
	h := &asyncHarness{mails: make(chan func() error, 1024)}
	osb, err := state.NewOperatorStateBackend(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.ctx = &Context{OperatorName: "async", Parallelism: 1, MaxParallelism: testMaxPar, Logger: slog.Default(), Ctx: tctx,
		OperatorState: osb, PostMail: func(fn func() error) error { h.mails <- fn; return nil }}
	return h
}

// runMailsUntil runs mails until cond holds.
func (h *asyncHarness) runMailsUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(testutil.SafetyNet)
	for !cond() {
		select {
		case m := <-h.mails:
			if err := m(); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatalf("%s: not within the safety net", what)
		}
	}
}

// manualCalls are async calls the test completes by hand.
type manualCalls struct {
	mu    sync.Mutex
	calls map[int64][]ResultFuture[int64]
}

func (m *manualCalls) AsyncInvoke(_ context.Context, v int64, rf ResultFuture[int64]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls == nil {
		m.calls = map[int64][]ResultFuture[int64]{}
	}
	m.calls[v] = append(m.calls[v], rf)
}

func (m *manualCalls) last(v int64) ResultFuture[int64] {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.calls[v]
	return c[len(c)-1]
}

func (m *manualCalls) count(v int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.calls[v])
}

// TestAsyncWaitOrderAndWatermarks completes calls out of order: ordered
// waits emit in input order, unordered ones in completion order, and
// neither lets a result cross a watermark.
func TestAsyncWaitOrderAndWatermarks(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		h := newAsyncHarness(t)
		calls := &manualCalls{}
		out := &recOut[int64]{}
		op := NewAsyncWait(AsyncConfig[int64, int64]{Ordered: ordered, Capacity: 10}, AsyncFunction[int64, int64](calls), out)
		if err := op.Open(h.ctx); err != nil {
			t.Fatal(err)
		}
		for _, v := range []int64{1, 2, 3} {
			if err := op.ProcessElement(v, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := op.ProcessWatermark(3); err != nil {
			t.Fatal(err)
		}
		if err := op.ProcessElement(4, 4); err != nil {
			t.Fatal(err)
		}
		// The record after the watermark completes first, then 3, 1, 2.
		calls.last(4).Complete(40)
		calls.last(3).Complete(30)
		h.runMailsUntil(t, "3 and 4 handled", func() bool { return len(h.mails) == 0 && op.queue[len(op.queue)-1].done })
		if ordered && len(out.vals) != 0 {
			t.Fatalf("ordered: emitted %v before record 1 completed", out.vals)
		}
		if !ordered && !slices.Equal(out.vals, []int64{30}) {
			t.Fatalf("unordered: emitted %v, want only 30 (40 is behind the watermark)", out.vals)
		}
		calls.last(1).Complete(10)
		calls.last(2).Complete(20, 21)
		h.runMailsUntil(t, "all emitted", func() bool { return op.InFlight() == 0 })
		want := []int64{10, 20, 21, 30, 40}
		if !ordered {
			want = []int64{30, 10, 20, 21, 40}
		}
		if !slices.Equal(out.vals, want) || !slices.Equal(out.ts, []int64{1, 2, 2, 3, 4}) && ordered {
			t.Fatalf("ordered %v: emitted %v at %v, want %v", ordered, out.vals, out.ts, want)
		}
		if !slices.Equal(out.wms, []int64{3}) {
			t.Fatalf("watermarks %v", out.wms)
		}
		if err := op.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAsyncWaitCapacityAndSnapshot fills the capacity, snapshots the
// inputs in flight, and restores them into a new operator that calls
// them again in their order.
func TestAsyncWaitCapacityAndSnapshot(t *testing.T) {
	h := newAsyncHarness(t)
	calls := &manualCalls{}
	out := &recOut[int64]{}
	op := NewAsyncWait(AsyncConfig[int64, int64]{Ordered: true, Capacity: 3}, AsyncFunction[int64, int64](calls), out)
	if err := op.Open(h.ctx); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 3; v++ {
		if !op.InputAvailable() {
			t.Fatalf("input refused with %d in flight", op.InFlight())
		}
		if err := op.ProcessElement(v, v); err != nil {
			t.Fatal(err)
		}
	}
	if op.InputAvailable() {
		t.Fatal("input accepted at capacity")
	}
	calls.last(2).Complete(20) // behind 1: not emitted, still in the snapshot
	h.runMailsUntil(t, "2 completed", func() bool { return op.queue[1].done })
	if _, err := op.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	snap, err := h.ctx.OperatorState.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}

	h2 := newAsyncHarness(t)
	if err := h2.ctx.OperatorState.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	calls2 := &manualCalls{}
	out2 := &recOut[int64]{}
	op2 := NewAsyncWait(AsyncConfig[int64, int64]{Ordered: true, Capacity: 3}, AsyncFunction[int64, int64](calls2), out2)
	if err := op2.Open(h2.ctx); err != nil {
		t.Fatal(err)
	}
	if op2.InFlight() != 3 {
		t.Fatalf("%d calls restored, want 3", op2.InFlight())
	}
	for v := int64(3); v >= 1; v-- {
		calls2.last(v).Complete(v * 10)
	}
	h2.runMailsUntil(t, "restored calls emitted", func() bool { return op2.InFlight() == 0 })
	if !slices.Equal(out2.vals, []int64{10, 20, 30}) || !slices.Equal(out2.ts, []int64{1, 2, 3}) {
		t.Fatalf("restored: emitted %v at %v", out2.vals, out2.ts)
	}
}

// timeoutCalls never complete on their own; Timeout yields -v.
type timeoutCalls struct{ manualCalls }

func (c *timeoutCalls) Timeout(v int64, rf ResultFuture[int64]) { rf.Complete(-v) }

// TestAsyncWaitRetryAndTimeout retries empty results and errors with
// exponential backoff until a result comes or the attempts are used up,
// and a timed-out call goes to the timeout handler (or fails the task
// without one).
func TestAsyncWaitRetryAndTimeout(t *testing.T) {
	errBusy := errors.New("busy")
	h := newAsyncHarness(t)
	calls := &manualCalls{}
	out := &recOut[int64]{}
	retry := &AsyncRetryStrategy[int64]{MaxAttempts: 3, Delay: time.Millisecond, Multiplier: 2, MaxDelay: 3 * time.Millisecond,
		RetryOnResult: func(r []int64) bool { return len(r) == 0 }, RetryOnError: func(err error) bool { return errors.Is(err, errBusy) }}
	op := NewAsyncWait(AsyncConfig[int64, int64]{Ordered: true, Capacity: 5, Retry: retry}, AsyncFunction[int64, int64](calls), out)
	if err := op.Open(h.ctx); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 2; v++ {
		if err := op.ProcessElement(v, v); err != nil {
			t.Fatal(err)
		}
	}
	// Record 1: empty, busy, then 10 on the third call.
	calls.last(1).Complete()
	h.runMailsUntil(t, "retry 1", func() bool { return calls.count(1) == 2 })
	calls.last(1).CompleteExceptionally(errBusy)
	h.runMailsUntil(t, "retry 2", func() bool { return calls.count(1) == 3 })
	calls.last(1).Complete(10)
	// Record 2: empty four times: after 3 retries the empty result stays.
	for i := 1; i <= 4; i++ {
		calls.last(2).Complete()
		if i < 4 {
			h.runMailsUntil(t, "retry of 2", func() bool { return calls.count(2) == i+1 })
		}
	}
	h.runMailsUntil(t, "both emitted", func() bool { return op.InFlight() == 0 })
	if !slices.Equal(out.vals, []int64{10}) || calls.count(2) != 4 {
		t.Fatalf("emitted %v, record 2 called %d times", out.vals, calls.count(2))
	}
	if got := []time.Duration{retry.backoff(1), retry.backoff(2), retry.backoff(3)}; !slices.Equal(got, []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}) {
		t.Fatalf("backoffs %v", got)
	}
	_ = op.Close()

	// Timeouts: with a handler its result is emitted; without one the task fails.
	h = newAsyncHarness(t)
	tc := &timeoutCalls{}
	out = &recOut[int64]{}
	op = NewAsyncWait(AsyncConfig[int64, int64]{Ordered: false, Capacity: 5, Timeout: time.Millisecond}, AsyncFunction[int64, int64](tc), out)
	if err := op.Open(h.ctx); err != nil {
		t.Fatal(err)
	}
	if err := op.ProcessElement(7, 7); err != nil {
		t.Fatal(err)
	}
	h.runMailsUntil(t, "timeout handled", func() bool { return op.InFlight() == 0 })
	tc.last(7).Complete(70) // too late: ignored
	if !slices.Equal(out.vals, []int64{-7}) {
		t.Fatalf("timeout handler: emitted %v", out.vals)
	}
	_ = op.Close()

	h = newAsyncHarness(t)
	op = NewAsyncWait(AsyncConfig[int64, int64]{Ordered: true, Capacity: 5, Timeout: time.Millisecond}, AsyncFunction[int64, int64](&manualCalls{}), &recOut[int64]{})
	if err := op.Open(h.ctx); err != nil {
		t.Fatal(err)
	}
	if err := op.ProcessElement(7, 7); err != nil {
		t.Fatal(err)
	}
	if err := op.Finish(); !errors.Is(err, ErrAsyncTimeout) {
		t.Fatalf("finish with a call timed out: %v, want ErrAsyncTimeout", err)
	}
	_ = op.Close()
}
