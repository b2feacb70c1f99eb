package rocksdb

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/state"
)

// These tests pin changelog checkpoints (changelog.go): what each handle
// is built on, and that every one restores to exactly the state at its
// barrier, which its materialization alone does not hold.

// changelogBackend is a new changelog backend (no background
// materialization unless o sets an interval), closed when the test ends,
// with the value state "v".
func changelogBackend(t *testing.T, o Options) (*Backend, state.ValueState[int64]) {
	t.Helper()
	o.Changelog = true
	if o.MaterializeInterval == 0 {
		o.MaterializeInterval = time.Hour
	}
	b := newTestBackend(t, o)
	closeLater(t, b)
	v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"})
	check(t, err)
	return b, v
}

// holdsValues reports whether b's value state is exactly want.
func holdsValues(t *testing.T, b *Backend, v state.ValueState[int64], keys int, want keyValues) bool {
	t.Helper()
	for k := range keys {
		setKey(b, keyName(k))
		got, ok, err := v.Value()
		check(t, err)
		if w, wok := want[k]; ok != wok || got != w {
			return false
		}
	}
	return true
}

// materializationDiffers checks that h's RocksDB files alone restore to
// a state other than want: the segments carry writes the checkpoint
// needs, which a restore that skipped them would lose.
func materializationDiffers(t *testing.T, h *IncrementalHandle, stor *dirStorage, keys int, want keyValues) {
	t.Helper()
	files := *roundTrip(t, h)
	files.Format, files.Changelog = handleFormat, nil
	r := newTestBackend(t, Options{})
	closeLater(t, r)
	check(t, r.RestoreIncremental([]*IncrementalHandle{&files}, stor.download))
	v, err := state.GetValueState(r, state.ValueStateDescriptor[int64]{Name: "v"})
	check(t, err)
	if holdsValues(t, r, v, keys, want) {
		t.Fatalf("checkpoint %d: its materialization %d alone holds the checkpoint's state: the test proves nothing about the segments", h.CheckpointID, h.MaterializedID)
	}
}

func segmentNames(h *IncrementalHandle) []string {
	var out []string
	for _, f := range h.Changelog {
		out = append(out, fmt.Sprintf("%s reused=%v", f.Name, f.Reused))
	}
	return out
}

// TestChangelogCheckpoints: the first checkpoint is a materialization;
// each later one references its files and the segments of the completed
// checkpoint before it and uploads one segment, takes no RocksDB
// checkpoint, and restores to exactly the state at its barrier (updates
// and deletions), which the materialization alone does not hold. Shared
// storage holds exactly what the retained checkpoint references. Only the
// materialization writes RocksDB (an SST file it ingests, not a write into
// the memtable); the changelog checkpoints leave it alone.
func TestChangelogCheckpoints(t *testing.T) {
	const keys = 400
	b, v := changelogBackend(t, Options{})
	var jobs []int64
	b.testHookCheckpoint = func(id int64, drained bool) {
		if drained {
			jobs = append(jobs, id)
		}
	}
	stor := newDirStorage(t)
	reg := newRegistry(stor)
	want := keyValues{}
	for id := int64(1); id <= 5; id++ {
		update(t, b, v, keys, int(id), 1+int(id)%3, 5+int(id), want)
		h := roundTrip(t, checkpoint(t, b, id, stor))
		reg.complete(t, []*IncrementalHandle{h})
		reg.checkFiles(t)
		b.NotifyCheckpointComplete(id)
		if id == 1 {
			if h.Format != handleFormat || h.MaterializedID != 1 || len(h.Changelog) != 0 {
				t.Fatalf("checkpoint 1: format %d, materialized at %d, %d segments; want a materialization", h.Format, h.MaterializedID, len(h.Changelog))
			}
		} else {
			var names []string
			for s := int64(2); s <= id; s++ {
				names = append(names, fmt.Sprintf("changelog-%d reused=%v", s, s < id))
			}
			if h.Format != changelogFormat || h.MaterializedID != 1 || h.BaseCheckpointID != id-1 || !slices.Equal(segmentNames(h), names) {
				t.Fatalf("checkpoint %d: format %d, materialized at %d, base %d, segments %v; want a changelog checkpoint on 1 with %v",
					id, h.Format, h.MaterializedID, h.BaseCheckpointID, segmentNames(h), names)
			}
			for _, f := range h.Files {
				if !f.Reused || !f.Shared {
					t.Fatalf("checkpoint %d: file %s reused=%v shared=%v, want every file of the materialization referenced", id, f.Name, f.Reused, f.Shared)
				}
			}
			materializationDiffers(t, h, stor, keys, want)
		}
		restoreValues(t, h, stor, keys, want, fmt.Sprintf("restore of checkpoint %d", id))
	}
	b.spills.Wait()
	if !slices.Equal(jobs, []int64{1}) {
		t.Fatalf("RocksDB checkpoints taken at %v, want at 1 only", jobs)
	}
	// The materialization's drain was an SST file RocksDB ingested; the
	// changelog checkpoints wrote nothing into RocksDB.
	if n := b.spillSeq.Load(); n != 1 {
		t.Errorf("five checkpoints of one state, one materialization, ingested %d SST files, want 1", n)
	}
	if n, _ := b.db.GetIntPropertyCF("rocksdb.num-entries-active-mem-table", b.states["v"].cf); n != 0 {
		t.Errorf("the value state's memtable holds %d entries after the checkpoints, want none", n)
	}
}

// TestChangelogUnconfirmedCheckpoint: a checkpoint taken before the one
// before it is confirmed, or after that one was aborted and its uploads
// discarded, uploads the segments since the last completed checkpoint
// again rather than reference uploads that may be deleted, and restores.
func TestChangelogUnconfirmedCheckpoint(t *testing.T) {
	const keys = 300
	b, v := changelogBackend(t, Options{})
	stor := newDirStorage(t)
	want := keyValues{}
	update(t, b, v, keys, 1, 1, 50, want)
	h1 := checkpoint(t, b, 1, stor)
	b.NotifyCheckpointComplete(1)

	update(t, b, v, keys, 2, 2, 7, want)
	h2 := checkpoint(t, b, 2, stor)
	// Checkpoint 2 is aborted: what it uploaded is deleted.
	for _, f := range h2.AllFiles() {
		if !f.Reused {
			check(t, os.Remove(filepath.Join(stor.root, string(f.Ref))))
		}
	}
	b.NotifyCheckpointAborted(2)

	update(t, b, v, keys, 3, 3, 11, want)
	h3 := roundTrip(t, checkpoint(t, b, 3, stor))
	update(t, b, v, keys, 4, 4, 13, want)
	h4 := roundTrip(t, checkpoint(t, b, 4, stor)) // before 3 is confirmed
	for _, c := range []struct {
		h    *IncrementalHandle
		want []string
	}{
		{h3, []string{"changelog-2 reused=false", "changelog-3 reused=false"}},
		{h4, []string{"changelog-2 reused=false", "changelog-3 reused=false", "changelog-4 reused=false"}},
	} {
		if c.h.MaterializedID != h1.CheckpointID || c.h.BaseCheckpointID != 1 || !slices.Equal(segmentNames(c.h), c.want) {
			t.Fatalf("checkpoint %d: materialized at %d, base %d, segments %v; want on 1 with %v",
				c.h.CheckpointID, c.h.MaterializedID, c.h.BaseCheckpointID, segmentNames(c.h), c.want)
		}
	}
	restoreValues(t, h4, stor, keys, want, "restore of checkpoint 4")
	materializationDiffers(t, h4, stor, keys, want)
}

// TestChangelogDirectWriteMaterializes: a write into RocksDB that no
// segment carries (a list state's) makes the next checkpoint a
// materialization, which restores it; the one after builds on that.
func TestChangelogDirectWriteMaterializes(t *testing.T) {
	const keys = 200
	b, v := changelogBackend(t, Options{})
	l, err := state.GetListState(b, state.ListStateDescriptor[int64]{Name: "l"})
	check(t, err)
	stor := newDirStorage(t)
	want := keyValues{}
	for id := int64(1); id <= 2; id++ {
		update(t, b, v, keys, int(id), 1, 40, want)
		checkpoint(t, b, id, stor)
		b.NotifyCheckpointComplete(id)
	}
	update(t, b, v, keys, 3, 2, 30, want)
	setKey(b, keyName(7))
	check(t, l.Add(42))
	h3 := roundTrip(t, checkpoint(t, b, 3, stor))
	want3 := maps.Clone(want)
	b.NotifyCheckpointComplete(3)
	if h3.Format != handleFormat || h3.MaterializedID != 3 || len(h3.Changelog) != 0 {
		t.Fatalf("checkpoint 3 after a list write: format %d, materialized at %d, segments %v; want a materialization", h3.Format, h3.MaterializedID, segmentNames(h3))
	}
	update(t, b, v, keys, 4, 3, 9, want)
	h4 := roundTrip(t, checkpoint(t, b, 4, stor))
	if h4.MaterializedID != 3 || !slices.Equal(segmentNames(h4), []string{"changelog-4 reused=false"}) {
		t.Fatalf("checkpoint 4: materialized at %d, segments %v; want on 3 with changelog-4", h4.MaterializedID, segmentNames(h4))
	}
	for _, c := range []struct {
		h    *IncrementalHandle
		want keyValues
	}{{h3, want3}, {h4, want}} {
		h := c.h
		r := restoreValues(t, h, stor, keys, c.want, fmt.Sprintf("restore of checkpoint %d", h.CheckpointID))
		rl, err := state.GetListState(r, state.ListStateDescriptor[int64]{Name: "l"})
		check(t, err)
		setKey(r, keyName(7))
		if got, err := rl.Get(); err != nil || !slices.Equal(got, []int64{42}) {
			t.Fatalf("restore of checkpoint %d: list = %v %v, want [42]", h.CheckpointID, got, err)
		}
	}
	materializationDiffers(t, h4, stor, keys, want)
}

// TestChangelogSpillBetweenBarriers: write buffers spilled into RocksDB
// between two barriers, before any segment held their entries, need no
// materialization: the next segment carries the spilled entries, then
// the ones written after the spill over them (a key written before a
// spill and again after it restores to its later value), and the
// checkpoint restores exactly, which its materialization alone does not.
func TestChangelogSpillBetweenBarriers(t *testing.T) {
	const keys = 5000
	b, v := changelogBackend(t, Options{WriteBufferSize: minWriteBufferSize})
	stor := newDirStorage(t)
	want := keyValues{}
	update(t, b, v, 100, 1, 1, 1000, want)
	checkpoint(t, b, 1, stor)
	b.NotifyCheckpointComplete(1)
	for id := int64(2); id <= 3; id++ {
		spills := b.spillSeq.Load()
		update(t, b, v, keys, int(id)*10, 1, 1000, want) // more than a buffer holds
		b.spills.Wait()
		if b.spillSeq.Load() == spills {
			t.Fatalf("before checkpoint %d: no spill: the test proves nothing", id)
		}
		// These keys went into the first buffer spilled since the
		// barrier: the segment holds them twice, the later value last.
		update(t, b, v, 50, int(id)*10+1, 1, 7, want)
		h := roundTrip(t, checkpoint(t, b, id, stor))
		b.NotifyCheckpointComplete(id)
		if h.Format != changelogFormat || h.MaterializedID != 1 || len(h.Changelog) != int(id)-1 {
			t.Fatalf("checkpoint %d after spills: format %d, materialized at %d, segments %v; want a changelog checkpoint on 1", id, h.Format, h.MaterializedID, segmentNames(h))
		}
		verifyValues(t, b, v, keys, want, fmt.Sprintf("reads after checkpoint %d", id))
		restoreValues(t, h, stor, keys, want, fmt.Sprintf("restore of checkpoint %d", id))
		materializationDiffers(t, h, stor, keys, want)
	}
}

// TestChangelogManyBarriersNoDrain: over many changelog checkpoints the
// write buffer is never written into RocksDB (one SST file in all, the
// first checkpoint's, a materialization), keys are updated in place and
// deleted again and again, and every checkpoint, including one taken
// after an aborted one, restores to exactly the state at its barrier.
func TestChangelogManyBarriersNoDrain(t *testing.T) {
	const keys = 300
	b, v := changelogBackend(t, Options{})
	stor := newDirStorage(t)
	want := keyValues{}
	for id := int64(1); id <= 30; id++ {
		update(t, b, v, keys, int(id), 1+int(id)%4, 3+int(id)%5, want)
		if id%3 == 0 { // a key written since the last barrier, and back
			setKey(b, keyName(1))
			check(t, v.Update(-1))
			check(t, v.Update(want[1]))
			if _, ok := want[1]; !ok {
				check(t, v.Clear())
			}
		}
		h := roundTrip(t, checkpoint(t, b, id, stor))
		if id%7 == 0 {
			for _, f := range h.AllFiles() {
				if !f.Reused {
					check(t, os.Remove(filepath.Join(stor.root, string(f.Ref))))
				}
			}
			b.NotifyCheckpointAborted(id)
			continue
		}
		b.NotifyCheckpointComplete(id)
		if id > 1 && (h.Format != changelogFormat || h.MaterializedID != 1) {
			t.Fatalf("checkpoint %d: format %d, materialized at %d; want a changelog checkpoint on 1", id, h.Format, h.MaterializedID)
		}
		restoreValues(t, h, stor, keys, want, fmt.Sprintf("restore of checkpoint %d", id))
	}
	b.spills.Wait()
	if n := b.spillSeq.Load(); n != 1 {
		t.Errorf("30 checkpoints, one materialization: %d SST files ingested, want 1", n)
	}
}

// TestChangelogMaterializationAfterSegments: a background materialization
// after several changelog checkpoints, none of which wrote RocksDB,
// drains every buffered entry, those of earlier barriers too: the next
// checkpoint, on it, holds its own segment alone and restores exactly.
func TestChangelogMaterializationAfterSegments(t *testing.T) {
	const keys = 300
	b, v := changelogBackend(t, Options{})
	stor := newDirStorage(t)
	want := keyValues{}
	for id := int64(1); id <= 6; id++ {
		update(t, b, v, keys, int(id), 1+int(id)%3, 5+int(id), want)
		checkpoint(t, b, id, stor)
		b.NotifyCheckpointComplete(id)
	}
	b.opts.MaterializeInterval = time.Nanosecond
	update(t, b, v, keys, 7, 2, 9, want)
	h7 := roundTrip(t, checkpoint(t, b, 7, stor))
	b.NotifyCheckpointComplete(7)
	if h7.MaterializedID != 1 || b.cl.mat == nil || b.cl.mat.id != 7 {
		t.Fatalf("checkpoint 7: materialized at %d, background materialization %+v; want on 1 and one started at 7", h7.MaterializedID, b.cl.mat)
	}
	<-b.cl.mat.ready
	b.opts.MaterializeInterval = time.Hour
	update(t, b, v, keys, 8, 5, 11, want)
	h8 := roundTrip(t, checkpoint(t, b, 8, stor))
	if h8.MaterializedID != 7 || !slices.Equal(segmentNames(h8), []string{"changelog-8 reused=false"}) {
		t.Fatalf("checkpoint 8: materialized at %d, segments %v; want on 7 with changelog-8", h8.MaterializedID, segmentNames(h8))
	}
	restoreValues(t, h8, stor, keys, want, "restore of checkpoint 8")
	materializationDiffers(t, h8, stor, keys, want)
}

// TestChangelogBackgroundMaterialization: a materialization taken in the
// background after a barrier's drain is uploaded by the next checkpoint,
// which holds the segments after it alone; once that checkpoint completes
// later ones build on it. Each restores.
func TestChangelogBackgroundMaterialization(t *testing.T) {
	const keys = 300
	b, v := changelogBackend(t, Options{MaterializeInterval: time.Nanosecond})
	stor := newDirStorage(t)
	reg := newRegistry(stor)
	want := keyValues{}
	step := func(id int64, complete bool) *IncrementalHandle {
		t.Helper()
		update(t, b, v, keys, int(id), 1+int(id)%2, 7+int(id), want)
		h := roundTrip(t, checkpoint(t, b, id, stor))
		restoreValues(t, h, stor, keys, want, fmt.Sprintf("restore of checkpoint %d", id))
		if complete {
			reg.complete(t, []*IncrementalHandle{h})
			reg.checkFiles(t)
			b.NotifyCheckpointComplete(id)
		} else { // aborted: what it uploaded is deleted
			for _, f := range h.AllFiles() {
				if !f.Reused {
					check(t, os.Remove(filepath.Join(stor.root, string(f.Ref))))
				}
			}
			b.NotifyCheckpointAborted(id)
		}
		return h
	}
	step(1, true) // a materialization
	h2 := step(2, true)
	if h2.MaterializedID != 1 || b.cl.mat == nil || b.cl.mat.id != 2 {
		t.Fatalf("checkpoint 2: materialized at %d, background materialization %+v; want on 1 and one started at 2", h2.MaterializedID, b.cl.mat)
	}
	<-b.cl.mat.ready
	h3 := step(3, false) // built on the materialization at 2, not completed
	h4 := step(4, true)
	for _, h := range []*IncrementalHandle{h3, h4} {
		want := []string{"changelog-3 reused=false"}
		if h.CheckpointID == 4 {
			want = append(want, "changelog-4 reused=false")
		}
		if h.MaterializedID != 2 || !slices.Equal(segmentNames(h), want) {
			t.Fatalf("checkpoint %d: materialized at %d, segments %v; want on 2 with %v", h.CheckpointID, h.MaterializedID, segmentNames(h), want)
		}
	}
	materializationDiffers(t, h4, stor, keys, want)
	if b.cl.mat != nil && b.cl.mat.id == 2 {
		t.Fatal("the materialization at 2 is still pending after checkpoint 4, built on it, completed")
	}
	h5 := step(5, true)
	if h5.MaterializedID != 2 || h5.BaseCheckpointID != 4 || !slices.Equal(segmentNames(h5), []string{"changelog-3 reused=true", "changelog-4 reused=true", "changelog-5 reused=false"}) {
		t.Fatalf("checkpoint 5: materialized at %d, base %d, segments %v; want on 4's", h5.MaterializedID, h5.BaseCheckpointID, segmentNames(h5))
	}
}

// TestChangelogRescale: changelog checkpoints of two subtasks restore
// into one, and into three, each with exactly its key groups' values.
func TestChangelogRescale(t *testing.T) {
	const maxPar, n = 32, 1500
	stor := newDirStorage(t)
	vals := make([]string, n)
	all := make([]int, n)
	var handles []*IncrementalHandle
	for idx := range 2 {
		r := state.RangeFor(maxPar, 2, idx)
		b := newTestBackend(t, Options{MaxParallelism: maxPar, KeyGroups: &r, Changelog: true, MaterializeInterval: time.Hour})
		var h *IncrementalHandle
		for id := int64(1); id <= 3; id++ {
			for i := range n {
				vals[i], all[i] = fmt.Sprint("v", id, "-", i), i
			}
			putAll(t, b, vals, all[:n-int(id-1)*100])
			h = checkpoint(t, b, id, stor)
			b.NotifyCheckpointComplete(id)
		}
		if len(h.Changelog) != 2 {
			t.Fatalf("subtask %d: checkpoint 3 has segments %v, want 2", idx, segmentNames(h))
		}
		handles = append(handles, roundTrip(t, h))
		check(t, b.Close())
	}
	for i := range n {
		vals[i] = fmt.Sprint("v", 3-max(0, i-(n-300))/100, "-", i) // the last round that wrote it
	}
	for _, p := range []int{1, 3} {
		for idx := range p {
			r := state.RangeFor(maxPar, p, idx)
			b := newTestBackend(t, Options{MaxParallelism: maxPar, KeyGroups: &r})
			check(t, b.RestoreIncremental(handles, stor.download))
			verifyAll(t, b, vals)
			check(t, b.Close())
		}
	}
}

// TestChangelogCorruptSegment: a segment that is not what was uploaded
// fails the restore as corrupt, naming it.
func TestChangelogCorruptSegment(t *testing.T) {
	b, v := changelogBackend(t, Options{})
	stor := newDirStorage(t)
	want := keyValues{}
	for id := int64(1); id <= 2; id++ {
		update(t, b, v, 50, int(id), 1, 100, want)
		checkpoint(t, b, id, stor)
		b.NotifyCheckpointComplete(id)
	}
	update(t, b, v, 50, 3, 1, 100, want)
	h := roundTrip(t, checkpoint(t, b, 3, stor))
	seg := h.Changelog[len(h.Changelog)-1]
	check(t, os.WriteFile(filepath.Join(stor.root, string(seg.Ref)), make([]byte, seg.Size), 0o644))
	r := newTestBackend(t, Options{})
	closeLater(t, r)
	err := r.RestoreIncremental([]*IncrementalHandle{h}, stor.download)
	if err == nil || !errors.Is(err, state.ErrCorruptSnapshot) || !strings.Contains(err.Error(), seg.Name) {
		t.Fatalf("restore with a corrupt segment: %v, want state.ErrCorruptSnapshot naming %s", err, seg.Name)
	}
}

// TestChangelogDeltasBounded: while no checkpoint completes, the deltas
// kept for the next one stay within maxDeltaBuffers write buffers: past
// that they are dropped and the next checkpoint is a materialization,
// which restores.
func TestChangelogDeltasBounded(t *testing.T) {
	const keys = 1000
	b, v := changelogBackend(t, Options{WriteBufferSize: minWriteBufferSize})
	stor := newDirStorage(t)
	want := keyValues{}
	update(t, b, v, keys, 1, 1, 1000, want)
	checkpoint(t, b, 1, stor)
	b.NotifyCheckpointComplete(1)
	materialized := false
	for id := int64(2); id <= 12; id++ { // none completes
		update(t, b, v, keys, int(id), 1, 1000, want)
		h := checkpoint(t, b, id, stor)
		var size int64
		for _, d := range b.cl.deltas {
			size += int64(len(d.data))
		}
		if size > maxDeltaBuffers*minWriteBufferSize {
			t.Fatalf("checkpoint %d: %d bytes of deltas kept, want at most %d", id, size, maxDeltaBuffers*minWriteBufferSize)
		}
		if h.MaterializedID == id {
			materialized = true
			restoreValues(t, h, stor, keys, want, fmt.Sprintf("restore of checkpoint %d", id))
		}
	}
	if !materialized {
		t.Fatal("no checkpoint was a materialization although the deltas outgrew their bound")
	}
}
