package source

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// event is one call a reader made on a fakeOutput.
type event[T any] struct {
	kind  string // "record", "watermark" or "idle"
	value T
	ts    int64 // record timestamp or watermark
}

// fakeOutput records every call made on it, in order.
type fakeOutput[T any] struct {
	events  []event[T]
	failOn  int // if > 0, the failOn-th Collect (1-based) fails
	collect int
}

var errFakeOutput = errors.New("fake output failure")

func (o *fakeOutput[T]) Collect(v T, ts int64) error {
	o.collect++
	if o.failOn > 0 && o.collect == o.failOn {
		return errFakeOutput
	}
	o.events = append(o.events, event[T]{kind: "record", value: v, ts: ts})
	return nil
}

func (o *fakeOutput[T]) EmitWatermark(wm int64) error {
	o.events = append(o.events, event[T]{kind: "watermark", ts: wm})
	return nil
}

func (o *fakeOutput[T]) MarkIdle() error {
	o.events = append(o.events, event[T]{kind: "idle"})
	return nil
}

func (o *fakeOutput[T]) values() []T {
	var out []T
	for _, e := range o.events {
		if e.kind == "record" {
			out = append(out, e.value)
		}
	}
	return out
}

func (o *fakeOutput[T]) watermarks() []int64 {
	var out []int64
	for _, e := range o.events {
		if e.kind == "watermark" {
			out = append(out, e.ts)
		}
	}
	return out
}

// nopOutput drops everything; it is for allocation tests and benchmarks.
type nopOutput[T any] struct{}

func (nopOutput[T]) Collect(T, int64) error    { return nil }
func (nopOutput[T]) EmitWatermark(int64) error { return nil }
func (nopOutput[T]) MarkIdle() error           { return nil }

// drain polls r until EndOfInput, waiting on Available after
// NothingAvailable, and returns the output and how often it had to wait.
// It fails the test after maxPolls polls.
func drain[T any](t testing.TB, r Reader[T], maxPolls int) (out *fakeOutput[T], waits int) {
	t.Helper()
	out = &fakeOutput[T]{}
	for range maxPolls {
		n := len(out.events)
		st, err := r.PollNext(out)
		if err != nil {
			t.Fatalf("PollNext: %v", err)
		}
		switch st {
		case EndOfInput:
			return out, waits
		case NothingAvailable:
			if len(out.events) != n {
				t.Fatalf("PollNext returned %v after emitting %d events", st, len(out.events)-n)
			}
			waits++
			awaitAvailable(t, r)
		case MoreAvailable:
		default:
			t.Fatalf("PollNext returned unknown status %v", st)
		}
	}
	t.Fatalf("no EndOfInput after %d polls", maxPolls)
	return nil, 0
}

// readAll reads a source with the given parallelism, one reader after the
// other, and returns each subtask's output.
func readAll[T any](t testing.TB, src Source[T], parallelism int) []*fakeOutput[T] {
	t.Helper()
	outs := make([]*fakeOutput[T], parallelism)
	for i := range parallelism {
		r, err := src.NewReader(ReaderContext{Subtask: i, Parallelism: parallelism})
		if err != nil {
			t.Fatalf("NewReader(%d of %d): %v", i, parallelism, err)
		}
		outs[i], _ = drain(t, r, 1<<20)
		if err := r.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	return outs
}

// checkEnd asserts that out ends with exactly one MaxWatermark and that
// nothing follows it.
func checkEnd[T any](t testing.TB, out *fakeOutput[T], subtask int) {
	t.Helper()
	if wms := out.watermarks(); !slices.Equal(wms, []int64{MaxWatermark}) {
		t.Fatalf("subtask %d: watermarks %v, want exactly [MaxWatermark]", subtask, wms)
	}
	if last := out.events[len(out.events)-1]; last.kind != "watermark" {
		t.Fatalf("subtask %d: last event is %s, want the MaxWatermark", subtask, last.kind)
	}
}

func sortedCopy[T any](vs []T, cmp func(a, b T) int) []T {
	c := slices.Clone(vs)
	slices.SortFunc(c, cmp)
	return c
}

func describe[T any](vs []T) string {
	if len(vs) > 8 {
		return fmt.Sprintf("%v... (%d)", vs[:8], len(vs))
	}
	return fmt.Sprint(vs)
}
