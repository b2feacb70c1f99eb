package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// The windows alone, in a harness, their state in RocksDB as in the job:
// nothing fires before the watermark passes a window's end; a snapshot
// taken mid-window restores at another parallelism (key groups moved
// between RocksDB instances), and the restored windows give what the
// plain computation gives.
func TestSumPerWindow(t *testing.T) {
	const n, cut = 1200, 700 // 6 s of readings; the cut is inside a window
	opts := func(more ...sluicetest.Option) []sluicetest.Option {
		return append(more, sluicetest.WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{})))
	}
	h := sluicetest.New(t, sumPerWindow, opts(sluicetest.WithParallelism(2))...)
	for i := range int64(cut) {
		r := reading(i)
		h.ProcessElement(r, r.At)
	}
	h.ProcessWatermark(reading(cut - 1).At)
	fired := h.Values()
	if len(fired) != 3*sensors {
		t.Fatalf("%d windows fired at watermark %d, want the 3 whole seconds of %d sensors", len(fired), reading(cut-1).At, sensors)
	}
	if got := sluicetest.Timers[string](h); len(got) != sensors {
		t.Fatalf("timers of the open windows: %v", got)
	}
	r := sluicetest.New(t, sumPerWindow, opts(sluicetest.RestoreFrom(h.Snapshot().Path), sluicetest.WithParallelism(3))...)
	for i := int64(cut); i < n; i++ {
		rd := reading(i)
		r.ProcessElement(rd, rd.At)
	}
	r.ProcessWatermark(sluicetest.MaxWatermark)
	if got, want := sorted(append(fired, r.Values()...)), expected(n); !slices.Equal(got, want) {
		t.Fatalf("windows\n%v\nwant\n%v", got, want)
	}
}

// The program runs both runs, resumes from a checkpoint of the first,
// and its own check of the committed output passes; the check itself
// refuses a duplicate and a missing window.
func TestWindowResume(t *testing.T) {
	var out strings.Builder
	if err := run(8, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"run 1 suspended after checkpoint", "run 2 resumed from checkpoint", "output exact: 120 windows"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	want := expected(readings)
	p := &printer{out: &strings.Builder{}}
	if err := check(append(want[:len(want):len(want)], want[0]), p); err == nil || !strings.Contains(err.Error(), "2 times") {
		t.Errorf("a duplicate window: %v", err)
	}
	if err := check(want[1:], p); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing window: %v", err)
	}
}
