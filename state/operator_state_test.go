package state_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/statetest"
)

var (
	splitDesc = state.ListStateDescriptor[string]{Name: "offsets"}
	unionDesc = state.ListStateDescriptor[string]{Name: "union"}
)

// opRun is one run of an operator at some parallelism: each subtask's
// split and union lists.
type opRun struct {
	split, union [][]string
}

// runOperator restores parallelism p subtasks from the previous run's
// snapshots, returns what each got, then sets each subtask's lists from
// next (when given) and snapshots.
func runOperator(t *testing.T, p int, prev [][]byte, next func(i int, got []string) (split, union []string)) (opRun, [][]byte) {
	t.Helper()
	var run opRun
	var snaps [][]byte
	for i := range p {
		b, err := state.NewOperatorStateBackend(i, p)
		if err != nil {
			t.Fatal(err)
		}
		var rs []io.Reader
		for _, s := range prev {
			rs = append(rs, bytes.NewReader(s))
		}
		if err := b.Restore(rs...); err != nil {
			t.Fatal(err)
		}
		split, err := state.GetOperatorListState(b, splitDesc)
		if err != nil {
			t.Fatal(err)
		}
		union, err := state.GetUnionListState(b, unionDesc)
		if err != nil {
			t.Fatal(err)
		}
		gs, _ := split.Get()
		gu, _ := union.Get()
		run.split = append(run.split, gs)
		run.union = append(run.union, gu)
		if next != nil {
			s, u := next(i, gs)
			if err := split.Update(s); err != nil {
				t.Fatal(err)
			}
			if err := union.Update(u); err != nil {
				t.Fatal(err)
			}
		}
		snap, err := b.Snapshot(1)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := snap.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, buf.Bytes())
	}
	return run, snaps
}

func TestOperatorStateRedistribution(t *testing.T) {
	// Parallelism 3: subtask i owns splits "s<i>-<j>" for j < i+2, and puts
	// "u<i>" in the union list.
	var all []string
	_, snaps := runOperator(t, 3, nil, func(i int, _ []string) ([]string, []string) {
		var s []string
		for j := range i + 2 {
			s = append(s, fmt.Sprintf("s%d-%d", i, j))
		}
		all = append(all, s...)
		return s, []string{fmt.Sprint("u", i)}
	})
	wantUnion := []string{"u0", "u1", "u2"}

	// Same parallelism: every subtask gets exactly its own lists back.
	same, _ := runOperator(t, 3, snaps, nil)
	for i := range 3 {
		want := all[:0:0]
		for _, s := range all {
			if strings.HasPrefix(s, fmt.Sprintf("s%d-", i)) {
				want = append(want, s)
			}
		}
		if !slices.Equal(same.split[i], want) {
			t.Fatalf("same parallelism, subtask %d: %v, want %v", i, same.split[i], want)
		}
		if !slices.Equal(same.union[i], wantUnion) {
			t.Fatalf("same parallelism, subtask %d union: %v", i, same.union[i])
		}
	}

	for _, p := range []int{2, 5, 1} {
		got, _ := runOperator(t, p, snaps, nil)
		var union []string
		var n []int
		for i := range p {
			union = append(union, got.split[i]...)
			n = append(n, len(got.split[i]))
			if !slices.Equal(got.union[i], wantUnion) {
				t.Fatalf("parallelism %d, subtask %d: union %v, want %v", p, i, got.union[i], wantUnion)
			}
		}
		sort.Strings(union)
		if !slices.Equal(union, all) {
			t.Fatalf("parallelism %d: splits %v, want each of %v exactly once", p, union, all)
		}
		// Round robin: shares differ by at most one.
		if slices.Max(n)-slices.Min(n) > 1 {
			t.Fatalf("parallelism %d: unbalanced shares %v", p, n)
		}
	}
}

func TestOperatorStateUnregisteredUnionNotDuplicated(t *testing.T) {
	_, snaps := runOperator(t, 2, nil, func(i int, _ []string) ([]string, []string) {
		return []string{fmt.Sprint("s", i)}, []string{fmt.Sprint("u", i)}
	})
	// A run that registers neither state carries both along.
	var carried [][]byte
	for i := range 3 {
		b, _ := state.NewOperatorStateBackend(i, 3)
		var rs []io.Reader
		for _, s := range snaps {
			rs = append(rs, bytes.NewReader(s))
		}
		if err := b.Restore(rs...); err != nil {
			t.Fatal(err)
		}
		snap, _ := b.Snapshot(2)
		var buf bytes.Buffer
		if _, err := snap.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		carried = append(carried, buf.Bytes())
	}
	got, _ := runOperator(t, 2, carried, nil)
	for i := range 2 {
		if !slices.Equal(got.union[i], []string{"u0", "u1"}) {
			t.Fatalf("subtask %d union after a run that did not register it: %v", i, got.union[i])
		}
	}
	if all := slices.Concat(got.split...); len(all) != 2 {
		t.Fatalf("splits after a run that did not register them: %v", all)
	}
}

func TestOperatorStateErrors(t *testing.T) {
	b, _ := state.NewOperatorStateBackend(0, 1)
	if _, err := state.GetOperatorListState(b, state.ListStateDescriptor[int64]{Name: "x", Codec: codec.Int[int64]{}}); err != nil {
		t.Fatal(err)
	}
	_, err := state.GetUnionListState(b, state.ListStateDescriptor[int64]{Name: "x", Codec: codec.Int[int64]{}})
	if !errors.Is(err, state.ErrIncompatibleState) || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("union over split: %v", err)
	}
	_, err = state.GetOperatorListState(b, state.ListStateDescriptor[int64]{Name: "x", Codec: codec.JSON[int64]{}})
	if !errors.Is(err, state.ErrIncompatibleState) || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("other codec: %v", err)
	}
	l, _ := state.GetOperatorListState(b, state.ListStateDescriptor[int64]{Name: "x", Codec: codec.Int[int64]{}})
	_ = l.Add(1)
	snap, _ := b.Snapshot(1)
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	// Restored with a codec that cannot read it.
	b2, _ := state.NewOperatorStateBackend(0, 1)
	if err := b2.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	_, err = state.GetOperatorListState(b2, state.ListStateDescriptor[int64]{Name: "x", Codec: statetest.FlakyCodec{}})
	if !errors.Is(err, state.ErrIncompatibleState) || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("restored with another codec: %v", err)
	}
	// Missing an old subtask's snapshot.
	_, snaps := runOperator(t, 2, nil, nil)
	b3, _ := state.NewOperatorStateBackend(0, 1)
	if err := b3.Restore(bytes.NewReader(snaps[1])); !errors.Is(err, state.ErrRestore) {
		t.Fatalf("restore from one of two snapshots: %v", err)
	}
	corrupted := slices.Clone(snaps[0])
	corrupted[len(corrupted)-6] ^= 1
	b4, _ := state.NewOperatorStateBackend(0, 1)
	if err := b4.Restore(bytes.NewReader(corrupted), bytes.NewReader(snaps[1])); !errors.Is(err, state.ErrCorruptSnapshot) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
	if _, err := state.GetOperatorListState(b, state.ListStateDescriptor[int64]{Name: "t", TTL: state.TTLConfig{TTL: 1e9}}); !errors.Is(err, state.ErrInvalidDescriptor) {
		t.Fatalf("operator state with TTL: %v", err)
	}
}

func TestOperatorSnapshotWhileMutating(t *testing.T) {
	b, _ := state.NewOperatorStateBackend(0, 1)
	l, _ := state.GetOperatorListState(b, state.ListStateDescriptor[int]{Name: "l"})
	for i := range 1000 {
		_ = l.Add(i)
	}
	snap, _ := b.Snapshot(1)
	var buf bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := snap.WriteTo(&buf); err != nil {
			t.Error(err)
		}
	}()
	for i := range 1000 {
		_ = l.Add(-i)
	}
	_ = l.Update([]int{1})
	wg.Wait()
	b2, _ := state.NewOperatorStateBackend(0, 1)
	if err := b2.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	l2, _ := state.GetOperatorListState(b2, state.ListStateDescriptor[int]{Name: "l"})
	got, _ := l2.Get()
	if len(got) != 1000 || got[0] != 0 || got[999] != 999 {
		t.Fatalf("restored %d elements (%v...), want 0..999", len(got), got[:min(3, len(got))])
	}
}
