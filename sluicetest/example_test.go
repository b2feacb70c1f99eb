package sluicetest_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/sluicetest"
)

// A job's committed output checked against what each input should have
// produced once: here the replay after a crash wrote "b" twice and lost "c".
// In a test, sluicetest.AssertExactlyOnce(t, got, want) fails t with the
// same message; RunJob gives got from a job it crashed.
func ExampleCheckExactlyOnce() {
	want := []string{"a", "b", "c"}
	got := []string{"a", "b", "b"}
	err := sluicetest.CheckExactlyOnce(got, want)
	fmt.Println(errors.Is(err, sluicetest.ErrNotExactlyOnce))
	fmt.Println(err)
	// Output:
	// true
	// output is not exactly once: 3 records, want 3
	//   1 written more than once: b (2 times, want 1)
	//   1 missing: c (0 times, want 1)
}

// A keyed running count promises its order per key only: the records of
// different keys may interleave, those of one key may not be reordered.
func ExampleCheckOrderPerKey() {
	type count struct {
		Key string
		N   int
	}
	want := []count{{"x", 1}, {"x", 2}, {"y", 1}, {"y", 2}}
	interleaved := []count{{"y", 1}, {"x", 1}, {"y", 2}, {"x", 2}}
	reordered := []count{{"x", 2}, {"x", 1}, {"y", 1}, {"y", 2}}
	key := func(c count) string { return c.Key }
	fmt.Println(sluicetest.CheckOrderPerKey(interleaved, want, key))
	fmt.Println(sluicetest.CheckOrderPerKey(reordered, want, key))
	// Output:
	// <nil>
	// output is not exactly once: 1 keys out of order or count:
	//   key x: [{x 2} {x 1}], want [{x 1} {x 2}]
}
