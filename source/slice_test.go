package source

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestFromSliceSubtaskOrder(t *testing.T) {
	values := []string{"a", "b", "c", "d", "e", "f", "g"}
	for _, p := range []int{1, 2, 3, 7, 10} {
		src := FromSlice(values)
		if !src.Bounded() {
			t.Fatal("Bounded() = false")
		}
		var all []string
		for sub, out := range readAll[string](t, src, p) {
			checkEnd(t, out, sub)
			var want []string
			for i := sub; i < len(values); i += p {
				want = append(want, values[i])
			}
			if got := out.values(); !slices.Equal(got, want) {
				t.Fatalf("p %d subtask %d: %v, want %v", p, sub, got, want)
			}
			all = append(all, out.values()...)
		}
		slices.Sort(all)
		if !slices.Equal(all, values) {
			t.Fatalf("p %d: all records %v, want %v", p, all, values)
		}
	}
}

func TestFromSliceCopiesInput(t *testing.T) {
	values := []int{1, 2, 3}
	src := FromSlice(values)
	values[0] = 99
	if got := readAll[int](t, src, 1)[0].values(); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("got %v: the source sees changes to the caller's slice", got)
	}
}

func TestFromSliceTimestamps(t *testing.T) {
	out := readAll[int](t, FromSlice([]int{5, 6}), 1)[0]
	for _, e := range out.events {
		if e.kind == "record" && e.ts != NoTimestamp {
			t.Fatalf("record %d has timestamp %d without SliceTimestamps", e.value, e.ts)
		}
	}
	src := FromSlice([]int{5, 6, 7}, SliceTimestamps(func(v int) int64 { return int64(v) * 100 }))
	for _, out := range readAll[int](t, src, 2) {
		for _, e := range out.events {
			if e.kind == "record" && e.ts != int64(e.value)*100 {
				t.Fatalf("record %d has timestamp %d", e.value, e.ts)
			}
		}
	}
}

func TestFromSliceEmptyAndSticky(t *testing.T) {
	r, err := FromSlice[int](nil).NewReader(ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := &fakeOutput[int]{}
	for range 3 {
		if st, err := r.PollNext(out); st != EndOfInput || err != nil {
			t.Fatalf("PollNext = %v, %v", st, err)
		}
	}
	checkEnd(t, out, 0)
	if len(out.events) != 1 {
		t.Fatalf("%d events, want only the MaxWatermark", len(out.events))
	}
}

func TestFromSliceErrors(t *testing.T) {
	if _, err := FromSlice([]int{1}).NewReader(ReaderContext{Subtask: 1, Parallelism: 1}); !errors.Is(err, ErrInvalidReaderContext) {
		t.Fatalf("NewReader error %v, want ErrInvalidReaderContext", err)
	}
	r, err := FromSlice([]int{1, 2}).NewReader(ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := &fakeOutput[int]{failOn: 1}
	if _, err := r.PollNext(out); !errors.Is(err, errFakeOutput) || !strings.Contains(err.Error(), "element 0") {
		t.Fatalf("PollNext error %v, want the output's error naming element 0", err)
	}
	if _, err := r.PollNext(out); err != nil {
		t.Fatal(err)
	}
	if got := out.values(); !slices.Equal(got, []int{1}) {
		t.Fatalf("after a failed Collect the element is not retried: %v", got)
	}
}
