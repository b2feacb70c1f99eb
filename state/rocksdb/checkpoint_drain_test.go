package rocksdb

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// These tests pin the concurrency of an incremental checkpoint's
// background job (SnapshotIncremental freezes the write buffers; the job
// drains them into RocksDB and takes the RocksDB checkpoint while the
// task goes on).

// heldCheckpoints makes the background job of every checkpoint stop
// before its drain and before its RocksDB checkpoint, reporting each stop
// on reached and going on when the test sends on proceed, or when the
// test ends (so that a failed test's Close does not wait for a held job).
type heldCheckpoints struct {
	reached chan string
	proceed chan struct{}
}

// holdCheckpoints holds b's checkpoints; call it after closeLater(t, b).
func holdCheckpoints(t *testing.T, b *Backend) *heldCheckpoints {
	h := &heldCheckpoints{reached: make(chan string), proceed: make(chan struct{})}
	ended := make(chan struct{})
	t.Cleanup(func() { close(ended) }) // runs before closeLater's Close
	b.testHookCheckpoint = func(id int64, drained bool) {
		stage := "drain"
		if drained {
			stage = "checkpoint"
		}
		select {
		case h.reached <- fmt.Sprintf("%d %s", id, stage):
		case <-ended:
			return
		}
		select {
		case <-h.proceed:
		case <-ended:
		}
	}
	return h
}

// await waits until the job of checkpoint id stops before stage.
func (h *heldCheckpoints) await(t *testing.T, id int64, stage string) {
	t.Helper()
	if got, want := <-h.reached, fmt.Sprintf("%d %s", id, stage); got != want {
		t.Fatalf("checkpoint job stopped at %q, want %q", got, want)
	}
}

// release lets checkpoint id's held job run to its end.
func (h *heldCheckpoints) release(t *testing.T, id int64) {
	t.Helper()
	h.proceed <- struct{}{}
	h.await(t, id, "checkpoint")
	h.proceed <- struct{}{}
}

// keyValues is a value state's expected contents: key index -> value, absent
// keys deleted or never written.
type keyValues map[int]int64

func verifyValues(t *testing.T, b *Backend, v state.ValueState[int64], keys int, want keyValues, when string) {
	t.Helper()
	for k := range keys {
		setKey(b, keyName(k))
		got, ok, err := v.Value()
		w, wok := want[k]
		if err != nil || ok != wok || got != w {
			t.Fatalf("%s: key %d = %d %v %v, want %d %v", when, k, got, ok, err, w, wok)
		}
	}
}

// update writes round's values: every key k with k%mod == 0 gets
// k*1000+round, every key with k%del == 0 is deleted after that.
func update(t *testing.T, b *Backend, v state.ValueState[int64], keys, round, mod, del int, c keyValues) {
	t.Helper()
	for k := range keys {
		setKey(b, keyName(k))
		if k%mod == 0 {
			check(t, v.Update(int64(k*1000+round)))
			c[k] = int64(k*1000 + round)
		}
		if k%del == 0 {
			check(t, v.Clear())
			delete(c, k)
		}
	}
}

// restoreValues restores h into a new backend and checks its value state.
func restoreValues(t *testing.T, h *IncrementalHandle, stor *dirStorage, keys int, want keyValues, when string) *Backend {
	t.Helper()
	r := newTestBackend(t, Options{})
	closeLater(t, r)
	check(t, r.RestoreIncremental([]*IncrementalHandle{roundTrip(t, h)}, stor.download))
	v, err := state.GetValueState(r, state.ValueStateDescriptor[int64]{Name: "v"})
	check(t, err)
	verifyValues(t, r, v, keys, want, when)
	return r
}

// valueBackend is a new backend, closed when the test ends, with the
// value state "v" the tests check.
func valueBackend(t *testing.T) (*Backend, state.ValueState[int64]) {
	t.Helper()
	b := newTestBackend(t, Options{})
	closeLater(t, b)
	v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"})
	check(t, err)
	return b, v
}

// TestCheckpointReadsWhileDraining: after the barrier, while the
// checkpoint's job has not drained the frozen write buffer yet and again
// once it has but before the RocksDB checkpoint, reads see the latest
// value of every key (written before the barrier, overwritten or deleted
// after it); a list write, which goes into RocksDB directly, waits for
// the job; and the checkpoint holds exactly the state at the barrier.
func TestCheckpointReadsWhileDraining(t *testing.T) {
	b, v := valueBackend(t)
	held := holdCheckpoints(t, b)
	settling := make(chan struct{}, 1)
	b.testHookSettle = func() { settling <- struct{}{} }
	l, err := state.GetListState(b, state.ListStateDescriptor[string]{Name: "l"})
	check(t, err)
	const keys = 3000
	live := keyValues{}
	update(t, b, v, keys, 1, 1, 7, live)
	setKey(b, "list")
	check(t, l.Add("before"))
	atBarrier := maps.Clone(live)

	snap, err := b.SnapshotIncremental(1)
	check(t, err)
	held.await(t, 1, "drain")
	verifyValues(t, b, v, keys, live, "after the barrier, before the drain")
	update(t, b, v, keys, 2, 2, 5, live)
	verifyValues(t, b, v, keys, live, "written after the barrier, before the drain")
	held.proceed <- struct{}{}
	held.await(t, 1, "checkpoint")
	verifyValues(t, b, v, keys, live, "drained, before the RocksDB checkpoint")
	update(t, b, v, keys, 3, 3, 11, live)
	verifyValues(t, b, v, keys, live, "written after the drain, before the RocksDB checkpoint")

	added := make(chan error, 1)
	go func() {
		setKey(b, "list")
		added <- l.Add("after")
	}()
	select {
	case err := <-added:
		t.Fatalf("a list write finished (%v) while the checkpoint's job was held: it would reach the checkpoint", err)
	case <-settling:
	}
	held.proceed <- struct{}{}
	check(t, <-added)

	stor := newDirStorage(t)
	h, err := snap.Upload(stor)
	check(t, err)
	snap.Release() // not deferred: it waits for the held job
	verifyValues(t, b, v, keys, live, "after the checkpoint")
	setKey(b, "list")
	if got, err := l.Get(); err != nil || !slices.Equal(got, []string{"before", "after"}) {
		t.Fatalf("list = %q %v, want [before after]", got, err)
	}
	r := restoreValues(t, h, stor, keys, atBarrier, "restored checkpoint 1")
	rl, err := state.GetListState(r, state.ListStateDescriptor[string]{Name: "l"})
	check(t, err)
	setKey(r, "list")
	if got, err := rl.Get(); err != nil || !slices.Equal(got, []string{"before"}) {
		t.Fatalf("restored list = %q %v, want [before]: the write after the barrier reached the checkpoint", got, err)
	}
}

// TestCheckpointWhileDraining: a checkpoint taken while the previous
// one's job still waits to drain freezes its own buffer, its job runs
// after the first one, and each checkpoint restores to the state at its
// own barrier; reads in between see the latest values.
func TestCheckpointWhileDraining(t *testing.T) {
	b, v := valueBackend(t)
	held := holdCheckpoints(t, b)
	const keys = 2000
	live := keyValues{}
	update(t, b, v, keys, 1, 1, 9, live)
	at1 := maps.Clone(live)
	snap1, err := b.SnapshotIncremental(1)
	check(t, err)
	held.await(t, 1, "drain")
	update(t, b, v, keys, 2, 2, 4, live)
	at2 := maps.Clone(live)
	snap2, err := b.SnapshotIncremental(2)
	check(t, err)
	update(t, b, v, keys, 3, 3, 13, live)
	verifyValues(t, b, v, keys, live, "two checkpoints' buffers frozen")
	held.release(t, 1)
	held.await(t, 2, "drain")
	verifyValues(t, b, v, keys, live, "checkpoint 1 drained, 2 held")
	held.release(t, 2)

	stor := newDirStorage(t)
	h1, err := snap1.Upload(stor)
	check(t, err)
	h2, err := snap2.Upload(stor)
	check(t, err)
	snap1.Release()
	snap2.Release()
	verifyValues(t, b, v, keys, live, "after both checkpoints")
	restoreValues(t, h1, stor, keys, at1, "restored checkpoint 1")
	restoreValues(t, h2, stor, keys, at2, "restored checkpoint 2")
}

// TestCheckpointJobFailure: when the RocksDB checkpoint of the background
// job fails (with local recovery its directory cannot be made: a file is
// in the way; without, the database's OPTIONS file is gone while it lists
// the live files), the upload fails naming the checkpoint, but the state
// is intact: it reads and writes on, and the next checkpoint restores to
// the state at its barrier.
func TestCheckpointJobFailure(t *testing.T) {
	for _, local := range []bool{true, false} {
		b := newTestBackend(t, Options{LocalRecovery: local})
		closeLater(t, b)
		v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"})
		check(t, err)
		const keys = 1000
		live := keyValues{}
		update(t, b, v, keys, 1, 1, 6, live)
		var hidden []string
		if local {
			check(t, os.WriteFile(b.chkDir, []byte("in the way"), 0o644))
		} else {
			b.testHookCheckpoint = func(id int64, drained bool) {
				if id != 1 || !drained {
					return
				}
				opts, _ := filepath.Glob(filepath.Join(b.dbDir, "OPTIONS-*"))
				for _, o := range opts {
					check(t, os.Rename(o, o+".hidden"))
					hidden = append(hidden, o)
				}
			}
		}
		snap, err := b.SnapshotIncremental(1)
		check(t, err)
		update(t, b, v, keys, 2, 2, 10, live)
		stor := newDirStorage(t)
		if _, err := snap.Upload(stor); err == nil || !strings.Contains(err.Error(), "checkpoint 1") {
			t.Fatalf("local recovery %v: upload of a checkpoint whose RocksDB checkpoint failed: %v, want an error naming checkpoint 1", local, err)
		}
		snap.Release()
		b.NotifyCheckpointAborted(1)
		verifyValues(t, b, v, keys, live, "after the failed checkpoint")
		update(t, b, v, keys, 3, 3, 7, live)
		if local {
			check(t, os.Remove(b.chkDir))
		}
		for _, o := range hidden {
			check(t, os.Rename(o+".hidden", o))
		}
		h := checkpoint(t, b, 2, stor)
		verifyValues(t, b, v, keys, live, "after the next checkpoint")
		restoreValues(t, h, stor, keys, live, "restored checkpoint 2")
	}
}

// TestCheckpointRefusedFreezesNothing: a checkpoint refused because one
// state's buffer failed (a spill that could not be written) freezes no
// other state's buffer either, since no job would ever write it: the
// other state still reads, and drains for a full snapshot.
func TestCheckpointRefusedFreezesNothing(t *testing.T) {
	b := newTestBackend(t, Options{WriteBufferSize: minWriteBufferSize})
	closeLater(t, b)
	check(t, os.WriteFile(filepath.Join(b.opts.Dir, spillDirName), nil, 0o644))
	good, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"})
	check(t, err)
	bad, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "bad"})
	check(t, err)
	setKey(b, keyName(1))
	check(t, good.Update(7))
	var werr error
	for k := 0; k < 100000 && werr == nil; k++ {
		setKey(b, keyName(k))
		werr = bad.Update(int64(k))
	}
	if werr == nil {
		t.Fatal("no write failed with the spill directory unwritable")
	}
	if _, err := b.SnapshotIncremental(1); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("checkpoint after a failed spill: %v, want an error naming the state", err)
	}
	if n := len(b.states["v"].buf.frozen); n != 0 {
		t.Fatalf("the refused checkpoint left %d frozen buffers of state v, which no job writes", n)
	}
	setKey(b, keyName(1))
	if got, ok, err := good.Value(); err != nil || !ok || got != 7 {
		t.Fatalf("state v after the refused checkpoint = %d %v %v, want 7", got, ok, err)
	}
}
