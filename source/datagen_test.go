package source

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// awaitAvailable waits until r.Available() fires; the deadline only guards
// against a hang.
func awaitAvailable[T any](t testing.TB, r Reader[T]) {
	t.Helper()
	select {
	case <-r.Available():
	case <-time.After(30 * time.Second):
		t.Fatal("Available() did not fire within 30s")
	}
}

func TestDatagenBoundedCountExact(t *testing.T) {
	for _, tc := range []struct {
		count       int64
		parallelism int
	}{{0, 1}, {1, 1}, {10, 1}, {10, 3}, {2, 4}, {1000, 7}} {
		src := NewDatagen(func(i int64) int64 { return i }, DatagenCount(tc.count))
		if !src.Bounded() {
			t.Fatal("Bounded() = false with a count")
		}
		outs := readAll[int64](t, src, tc.parallelism)
		var all []int64
		for sub, out := range outs {
			checkEnd(t, out, sub)
			// Subtask sub emits sub, sub+p, ... in order.
			want := int64(sub)
			for _, v := range out.values() {
				if v != want {
					t.Fatalf("count %d p %d subtask %d: got index %d, want %d", tc.count, tc.parallelism, sub, v, want)
				}
				want += int64(tc.parallelism)
			}
			if want < tc.count {
				t.Fatalf("count %d p %d subtask %d: stopped before index %d", tc.count, tc.parallelism, sub, want)
			}
			all = append(all, out.values()...)
		}
		if int64(len(all)) != tc.count {
			t.Fatalf("count %d p %d: %d records in all", tc.count, tc.parallelism, len(all))
		}
		slices.Sort(all)
		for i, v := range all {
			if v != int64(i) {
				t.Fatalf("count %d p %d: sorted records[%d] = %d", tc.count, tc.parallelism, i, v)
			}
		}
	}
}

func TestDatagenEndOfInputIsSticky(t *testing.T) {
	r, err := NewDatagen(func(i int64) int64 { return i }, DatagenCount(2)).NewReader(ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := drain(t, r, 10)
	n := len(out.events)
	for range 3 {
		st, err := r.PollNext(out)
		if st != EndOfInput || err != nil {
			t.Fatalf("PollNext after end = %v, %v; want end-of-input, nil", st, err)
		}
	}
	if len(out.events) != n {
		t.Fatalf("PollNext after end emitted %d more events", len(out.events)-n)
	}
}

func TestDatagenParallelismIndependent(t *testing.T) {
	gen := RandomRecords(42, 16, 50)
	byIndex := func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) }
	var results [][]Record
	for _, p := range []int{1, 3} {
		var all []Record
		for _, out := range readAll[Record](t, NewDatagen(gen, DatagenCount(500)), p) {
			all = append(all, out.values()...)
		}
		results = append(results, sortedCopy(all, byIndex))
	}
	if !slices.Equal(results[0], results[1]) {
		t.Fatalf("parallelism 1 and 3 differ:\n%s\n%s", describe(results[0]), describe(results[1]))
	}
	if len(results[0]) != 500 {
		t.Fatalf("%d records, want 500", len(results[0]))
	}
}

func TestDatagenTimestamps(t *testing.T) {
	outs := readAll[int64](t, NewDatagen(func(i int64) int64 { return i }, DatagenCount(5)), 1)
	for _, e := range outs[0].events {
		if e.kind == "record" && e.ts != NoTimestamp {
			t.Fatalf("record %d has timestamp %d without DatagenTimestamps", e.value, e.ts)
		}
	}
	src := NewDatagen(func(i int64) int64 { return i }, DatagenCount(9), DatagenTimestamps(func(i int64) int64 { return 1000 + 10*i }))
	for _, out := range readAll[int64](t, src, 2) {
		for _, e := range out.events {
			if e.kind == "record" && e.ts != 1000+10*e.value {
				t.Fatalf("record %d has timestamp %d, want %d", e.value, e.ts, 1000+10*e.value)
			}
		}
	}
}

func TestDatagenUnbounded(t *testing.T) {
	src := NewDatagen(func(i int64) int64 { return i })
	if src.Bounded() {
		t.Fatal("Bounded() = true without a count")
	}
	if NewDatagen(func(i int64) int64 { return i }, DatagenCount(-1)).Bounded() {
		t.Fatal("Bounded() = true with a negative count")
	}
	r, err := src.NewReader(ReaderContext{Subtask: 1, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	out := &fakeOutput[int64]{}
	for range 10_000 {
		if st, err := r.PollNext(out); st != MoreAvailable || err != nil {
			t.Fatalf("PollNext = %v, %v; want more-available", st, err)
		}
	}
	if got := out.values(); len(got) != 10_000 || got[9_999] != 19_999 || len(out.watermarks()) != 0 {
		t.Fatalf("unbounded reader emitted %d records (last %d) and %d watermarks", len(got), got[len(got)-1], len(out.watermarks()))
	}
}

func TestDatagenIndexSpaceExhausted(t *testing.T) {
	r, err := NewDatagen(func(i int64) int64 { return i }).NewReader(ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	dr := r.(*datagenReader[int64])
	dr.next = math.MaxInt64 - 1
	out, _ := drain(t, r, 10)
	if got := out.values(); !slices.Equal(got, []int64{math.MaxInt64 - 1, math.MaxInt64}) {
		t.Fatalf("last records %v, want MaxInt64-1, MaxInt64", got)
	}
	checkEnd(t, out, 0)
}

func TestDatagenRateLimitWaits(t *testing.T) {
	// 200 records/s over 2 subtasks: each subtask emits one record every
	// 10ms, so reading 5 of them in a tight loop has to wait.
	src := NewDatagen(func(i int64) int64 { return i }, DatagenCount(10), DatagenRate(200))
	for sub := range 2 {
		r, err := src.NewReader(ReaderContext{Subtask: sub, Parallelism: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := r.(*datagenReader[int64]).interval, float64(10*time.Millisecond); got != want {
			t.Fatalf("subtask interval %vns, want %vns", got, want)
		}
		out, waits := drain(t, r, 1000)
		if waits == 0 {
			t.Fatalf("subtask %d: rate-limited reader never returned NothingAvailable", sub)
		}
		if got := out.values(); len(got) != 5 {
			t.Fatalf("subtask %d: %d records, want 5", sub, len(got))
		}
		checkEnd(t, out, sub)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDatagenAvailableWhenNotWaiting(t *testing.T) {
	r, err := NewDatagen(func(i int64) int64 { return i }, DatagenRate(1)).NewReader(ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	select {
	case <-r.Available():
	default:
		t.Fatal("Available() blocks before any NothingAvailable")
	}
	out := &fakeOutput[int64]{}
	if st, _ := r.PollNext(out); st != MoreAvailable {
		t.Fatalf("first poll = %v, want more-available", st)
	}
	// At 1 record/s the second record is not due yet.
	if st, _ := r.PollNext(out); st != NothingAvailable {
		t.Fatalf("second poll = %v, want nothing-available", st)
	}
	select {
	case <-r.Available():
		t.Fatal("Available() fired long before the next record is due")
	default:
	}
}

func TestDatagenRateCatchUpIsBounded(t *testing.T) {
	r, err := NewDatagen(func(i int64) int64 { return i }, DatagenRate(1000)).NewReader(ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dr := r.(*datagenReader[int64])
	out := &fakeOutput[int64]{}
	if st, _ := r.PollNext(out); st != MoreAvailable {
		t.Fatalf("first poll = %v", st)
	}
	// Pretend the reader was not polled for an hour (backpressure): it must
	// not burst 3.6 million records to catch up.
	dr.start = dr.start.Add(-time.Hour)
	if st, _ := r.PollNext(out); st != MoreAvailable {
		t.Fatalf("poll after a long pause = %v", st)
	}
	if dr.emitted != 1 || time.Since(dr.start) > time.Minute {
		t.Fatalf("schedule not restarted: emitted %d since %v ago", dr.emitted, time.Since(dr.start))
	}
}

func TestDatagenInvalid(t *testing.T) {
	gen := func(i int64) int64 { return i }
	ok := ReaderContext{Subtask: 0, Parallelism: 1}
	for name, tc := range map[string]struct {
		src  *Datagen[int64]
		ctx  ReaderContext
		want error
	}{
		"nil gen":          {NewDatagen[int64](nil), ok, ErrInvalidConfig},
		"negative rate":    {NewDatagen(gen, DatagenRate(-1)), ok, ErrInvalidConfig},
		"NaN rate":         {NewDatagen(gen, DatagenRate(math.NaN())), ok, ErrInvalidConfig},
		"infinite rate":    {NewDatagen(gen, DatagenRate(math.Inf(1))), ok, ErrInvalidConfig},
		"zero parallelism": {NewDatagen(gen), ReaderContext{Subtask: 0, Parallelism: 0}, ErrInvalidReaderContext},
		"subtask too big":  {NewDatagen(gen), ReaderContext{Subtask: 2, Parallelism: 2}, ErrInvalidReaderContext},
		"negative subtask": {NewDatagen(gen), ReaderContext{Subtask: -1, Parallelism: 2}, ErrInvalidReaderContext},
	} {
		if _, err := tc.src.NewReader(tc.ctx); !errors.Is(err, tc.want) {
			t.Errorf("%s: NewReader error %v, want %v", name, err, tc.want)
		}
	}
}

func TestDatagenOutputError(t *testing.T) {
	r, err := NewDatagen(func(i int64) int64 { return i }, DatagenCount(3)).NewReader(ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := &fakeOutput[int64]{failOn: 2}
	if _, err := r.PollNext(out); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PollNext(out); !errors.Is(err, errFakeOutput) {
		t.Fatalf("PollNext error %v, want the output's error", err)
	}
	// The failed record is emitted again by the next poll.
	if _, err := r.PollNext(out); err != nil {
		t.Fatal(err)
	}
	if got := out.values(); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("records %v, want [0 1]", got)
	}
}

func TestDatagenPollNextAllocs(t *testing.T) {
	for name, opts := range map[string][]DatagenOption{
		"unlimited":       nil,
		"rate-limited":    {DatagenRate(1e15)},
		"with-timestamps": {DatagenTimestamps(func(i int64) int64 { return i })},
	} {
		r, err := NewDatagen(RandomRecords(1, 100, 1000), opts...).NewReader(ReaderContext{Subtask: 0, Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		var out Output[Record] = nopOutput[Record]{}
		r.PollNext(out) // starts the rate limiter's schedule
		if allocs := testing.AllocsPerRun(1000, func() {
			if st, err := r.PollNext(out); err != nil || st == EndOfInput {
				t.Fatalf("PollNext = %v, %v", st, err)
			}
		}); allocs != 0 {
			t.Errorf("%s: PollNext allocates %v times per call", name, allocs)
		}
		r.Close()
	}
}

func BenchmarkDatagenPollNext(b *testing.B) {
	r, err := NewDatagen(RandomRecords(1, 100, 1000)).NewReader(ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		b.Fatal(err)
	}
	var out Output[Record] = nopOutput[Record]{}
	b.ReportAllocs()
	for b.Loop() {
		r.PollNext(out)
	}
}
