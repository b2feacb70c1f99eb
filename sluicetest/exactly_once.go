package sluicetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ErrNotExactlyOnce is the error of CheckExactlyOnce and CheckOrderPerKey.
var ErrNotExactlyOnce = errors.New("output is not exactly once")

// CheckExactlyOnce compares a job's committed output with the output
// every input should have had once, as multisets: nil when got holds each
// record of want exactly as many times as want does and nothing else.
// Otherwise the error (ErrNotExactlyOnce) lists the records written too
// many times (an input's effect repeated: a replay after a crash reached
// the output twice), those missing (lost) and those nobody expected,
// each with its counts, the first 10 of each kind.
func CheckExactlyOnce[T comparable](got, want []T) error {
	wantN := map[T]int{}
	for _, v := range want {
		wantN[v]++
	}
	gotN := map[T]int{}
	var order []T // got's records in their first order, then want's
	seen := map[T]bool{}
	for _, v := range append(slices.Clip(got), want...) {
		if !seen[v] {
			seen[v] = true
			order = append(order, v)
		}
	}
	for _, v := range got {
		gotN[v]++
	}
	var dup, missing, extra []string
	for _, v := range order {
		g, w := gotN[v], wantN[v]
		switch {
		case w == 0:
			extra = append(extra, fmt.Sprintf("%v (%d times)", v, g))
		case g > w:
			dup = append(dup, fmt.Sprintf("%v (%d times, want %d)", v, g, w))
		case g < w:
			missing = append(missing, fmt.Sprintf("%v (%d times, want %d)", v, g, w))
		}
	}
	if len(dup)+len(missing)+len(extra) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d records, want %d", len(got), len(want))
	for _, part := range []struct {
		what string
		recs []string
	}{{"written more than once", dup}, {"missing", missing}, {"not expected", extra}} {
		if len(part.recs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n  %d %s: %s", len(part.recs), part.what, strings.Join(part.recs[:min(10, len(part.recs))], ", "))
		if len(part.recs) > 10 {
			b.WriteString(", ...")
		}
	}
	return fmt.Errorf("%w: %s", ErrNotExactlyOnce, b.String())
}

// CheckOrderPerKey checks the order of the output where the pipeline
// promises one: for every key (key of a record), the records of that key
// in got are those of want, in want's order (a keyed running count's
// 1, 2, ..., n). Records of different keys may interleave in any way.
func CheckOrderPerKey[T comparable, K comparable](got, want []T, key func(T) K) error {
	per := func(rs []T) (map[K][]T, []K) {
		m := map[K][]T{}
		var keys []K
		for _, r := range rs {
			k := key(r)
			if _, ok := m[k]; !ok {
				keys = append(keys, k)
			}
			m[k] = append(m[k], r)
		}
		return m, keys
	}
	g, _ := per(got)
	w, keys := per(want)
	for k := range g {
		if _, ok := w[k]; !ok {
			keys = append(keys, k)
		}
	}
	var bad []string
	for _, k := range keys {
		if !slices.Equal(g[k], w[k]) {
			bad = append(bad, fmt.Sprintf("key %v: %v, want %v", k, g[k], w[k]))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d keys out of order or count:\n  %s", ErrNotExactlyOnce, len(bad), strings.Join(bad[:min(10, len(bad))], "\n  "))
}

// AssertExactlyOnce fails tb with CheckExactlyOnce's error.
func AssertExactlyOnce[T comparable](tb testing.TB, got, want []T) {
	tb.Helper()
	if err := CheckExactlyOnce(got, want); err != nil {
		tb.Fatal(err)
	}
}
