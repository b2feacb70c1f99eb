package testutil

import (
	"slices"
	"testing"
)

// MergeSessions merges the pieces of a session (intersecting, bounds
// included, transitively) and sums their counts, keeps sessions apart
// that do not intersect, and never merges two users.
func TestMergeSessions(t *testing.T) {
	got := MergeSessions([]Window{
		{User: "a", Start: 1936, End: 2436, N: 1},
		{User: "a", Start: 1323, End: 1936, N: 3},
		{User: "a", Start: 2400, End: 3232, N: 5},
		{User: "a", Start: 4000, End: 4500, N: 2},
		{User: "b", Start: 1323, End: 1936, N: 7},
	})
	want := []Window{
		{User: "a", Start: 1323, End: 3232, N: 9},
		{User: "a", Start: 4000, End: 4500, N: 2},
		{User: "b", Start: 1323, End: 1936, N: 7},
	}
	slices.SortFunc(got, func(x, y Window) int {
		if x.User != y.User {
			if x.User < y.User {
				return -1
			}
			return 1
		}
		return int(x.Start - y.Start)
	})
	if !slices.Equal(got, want) {
		t.Fatalf("merged %+v, want %+v", got, want)
	}
}
