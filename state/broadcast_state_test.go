package state_test

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"testing"

	"github.com/sluicehq/sluice/state"
)

var rulesDesc = state.MapStateDescriptor[string, int64]{Name: "rules"}

// broadcastRun restores p subtasks from prev, returns each subtask's map,
// then lets change update subtask i's copy and snapshots every subtask.
func broadcastRun(t *testing.T, p int, prev [][]byte, change func(i int, s state.BroadcastState[string, int64])) ([]map[string]int64, [][]byte) {
	t.Helper()
	var got []map[string]int64
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
		s, err := state.GetBroadcastState(b, rulesDesc)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		if err := s.Iterate(func(k string, v int64) bool { m[k] = v; return true }); err != nil {
			t.Fatal(err)
		}
		if s.Len() != len(m) {
			t.Fatalf("Len %d for %d entries", s.Len(), len(m))
		}
		got = append(got, m)
		if change != nil {
			change(i, s)
		}
		snap, err := b.Snapshot(1)
		if err != nil {
			t.Fatal(err)
		}
		// A change after the synchronous part is not in the snapshot.
		if err := s.Put("after-snapshot", 1); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := snap.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, buf.Bytes())
	}
	return got, snaps
}

// TestBroadcastStateRescale: every subtask snapshots its copy; a restore
// gives new subtask i the copy of old subtask i mod the old parallelism
// (the copies differ here only so that the test sees which one came back).
func TestBroadcastStateRescale(t *testing.T) {
	copyOf := func(i int) map[string]int64 { return map[string]int64{"shared": 7, "from": int64(i)} }
	_, snaps := broadcastRun(t, 2, nil, func(i int, s state.BroadcastState[string, int64]) {
		for k, v := range copyOf(i) {
			if err := s.Put(k, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Put("removed", 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Remove("removed"); err != nil {
			t.Fatal(err)
		}
	})
	for _, p := range []int{1, 2, 3, 5} {
		got, _ := broadcastRun(t, p, snaps, nil)
		for i, m := range got {
			if want := copyOf(i % 2); !maps.Equal(m, want) {
				t.Errorf("parallelism 2 -> %d: subtask %d restored %v, want %v", p, i, m, want)
			}
		}
	}
	// A state restored but not registered again is carried by every
	// subtask's next snapshot.
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
	got, _ := broadcastRun(t, 2, carried, nil)
	for i, m := range got {
		if want := copyOf(i % 2); !maps.Equal(m, want) {
			t.Errorf("carried: subtask %d restored %v, want %v", i, m, want)
		}
	}
}

func TestBroadcastStateIncompatible(t *testing.T) {
	b, _ := state.NewOperatorStateBackend(0, 1)
	if _, err := state.GetBroadcastState(b, rulesDesc); err != nil {
		t.Fatal(err)
	}
	_, err := state.GetBroadcastState(b, state.MapStateDescriptor[string, string]{Name: "rules"})
	if !errors.Is(err, state.ErrIncompatibleState) {
		t.Fatalf("same name with another value type: %v", err)
	}
	if _, err := state.GetOperatorListState(b, state.ListStateDescriptor[int64]{Name: "rules"}); !errors.Is(err, state.ErrIncompatibleState) {
		t.Fatalf("a broadcast state as a list: %v", err)
	}
}
