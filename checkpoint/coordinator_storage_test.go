package checkpoint_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/checkpoint/storage/faultfs"
)

// TestCoordinatorOnStorage drives the coordinator against the real
// checkpoint storage, the way the runtime will: three tasks write their
// state through state streams (the sink incrementally, reusing shared files
// of its last completed checkpoint), the metadata is written atomically,
// discards delete files. The disk fills up twice: two failed checkpoints in
// a row are tolerated (the job keeps running and the next completion resets
// the count), the third one fails the job, naming the cause. After every
// discard, every retained checkpoint must still restore (invariant 3), and
// the restore at the end reads back the state of the last completed
// checkpoint.
func TestCoordinatorOnStorage(t *testing.T) {
	ffs := faultfs.New(storage.OSFS{})
	dir := t.TempDir()
	st, err := storage.New(ffs, dir, "job", storage.Options{InlineThreshold: 8, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cfg := checkpoint.Config{Interval: time.Second, Timeout: 5 * time.Second, TolerableFailed: 2, RetainedCheckpoints: 2, Directory: dir}
	tasks := []checkpoint.TaskInfo{
		{ID: 0, Vertex: "src", Subtask: 0, Parallelism: 2, Operators: []string{"src"}},
		{ID: 1, Vertex: "src", Subtask: 1, Parallelism: 2, Operators: []string{"src"}},
		{ID: 2, Vertex: "sink", Subtask: 0, Parallelism: 1, Operators: []string{"sink"}, Upstream: []checkpoint.TaskID{0, 1}},
	}
	coord, err := checkpoint.NewCoordinator("job", cfg, tasks)
	if err != nil {
		t.Fatal(err)
	}

	type ackDue struct {
		at    time.Time
		task  checkpoint.TaskID
		id    int64
		value int
	}
	var (
		now          = time.UnixMilli(0)
		counters     = make([]int, 3)
		dues         []ackDue
		snapshots    = map[int64][]int{}   // the counters each checkpoint captured
		sinkShared   []storage.NamedHandle // the sink's files in its last completed checkpoint
		sinkPending  = map[int64][]storage.NamedHandle{}
		completed    []int64
		failedJob    error
		metadataSeen = map[int64]*storage.Metadata{}
	)
	coord.Start(now)

	var run func(acts []checkpoint.CoordinatorAction)
	run = func(acts []checkpoint.CoordinatorAction) {
		for _, a := range acts {
			switch a := a.(type) {
			case checkpoint.Trigger:
				// No network here: every task takes its snapshot at once and
				// acknowledges after its asynchronous part.
				snapshots[a.Barrier.ID] = slices.Clone(counters)
				for task := range counters {
					dues = append(dues, ackDue{at: now.Add(150 * time.Millisecond), task: checkpoint.TaskID(task), id: a.Barrier.ID, value: counters[task]})
				}
			case checkpoint.WriteMetadata:
				metadataSeen[a.Metadata.CheckpointID] = a.Metadata
				loc, err := st.Checkpoint(a.Metadata.CheckpointID)
				var path string
				if err == nil {
					path, err = loc.WriteMetadata(a.Metadata)
				}
				run(coord.MetadataWritten(now, a.Metadata.CheckpointID, path, err))
			case checkpoint.NotifyComplete:
				completed = append(completed, a.ID)
				sinkShared = sinkPending[a.ID]
			case checkpoint.Discard:
				if err := st.DiscardCheckpoint(a.ID, a.Shared); err != nil {
					t.Fatalf("discard %d: %v", a.ID, err)
				}
				// Invariant 3: every retained checkpoint still restores.
				rec, err := st.Recover()
				if err != nil && !errors.Is(err, storage.ErrNoCheckpoint) {
					t.Fatalf("after discarding %d: %v", a.ID, err)
				}
				var usable []int64
				for _, s := range rec.Retained {
					usable = append(usable, s.Metadata.CheckpointID)
				}
				for _, id := range coord.Retained() {
					if !slices.Contains(usable, id) {
						t.Fatalf("after discarding %d: retained checkpoint %d is not usable (usable %v, unusable %v)", a.ID, id, usable, rec.Unusable)
					}
				}
			case checkpoint.FailJob:
				failedJob = a.Err
			case checkpoint.NotifyAborted:
			default:
				t.Fatalf("unexpected action %v", a)
			}
		}
	}

	ack := func(d ackDue) []checkpoint.CoordinatorAction {
		loc, err := st.Checkpoint(d.id)
		if err != nil {
			return coord.Decline(now, d.task, d.id, checkpoint.ReasonAsyncFailure, err)
		}
		w := loc.CreateStateStream(fmt.Sprintf("task-%d", d.task))
		fmt.Fprintf(w, "counter=%d;", d.value)
		h, err := w.Close()
		if err != nil {
			return coord.Decline(now, d.task, d.id, checkpoint.ReasonAsyncFailure, err)
		}
		state := storage.SubtaskState{OperatorUID: tasks[d.task].Operators[0], Subtask: tasks[d.task].Subtask, Parallelism: tasks[d.task].Parallelism,
			OperatorState: []storage.OperatorStateHandle{{Name: "counter", Distribution: storage.DistributeSplit, Handle: h}}}
		if d.task == 2 {
			// An incremental backend: one new shared file per checkpoint,
			// plus the newest file of its last completed checkpoint.
			sw, err := loc.CreateSharedStream("sink-sst")
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(sw, "sst of checkpoint %d", d.id)
			sh, err := sw.Close()
			if err != nil {
				return coord.Decline(now, d.task, d.id, checkpoint.ReasonAsyncFailure, err)
			}
			files := []storage.NamedHandle{{Name: strconv.FormatInt(d.id, 10) + ".sst", Handle: sh}}
			if len(sinkShared) > 0 {
				files = append(files, sinkShared[0])
			}
			sinkPending[d.id] = files
			state.KeyedState = []storage.KeyedStateHandle{{KeyGroups: storage.KeyGroupRange{Start: 0, End: 127}, Backend: "test", Files: files}}
		}
		return coord.Ack(now, d.task, d.id, []storage.SubtaskState{state}, checkpoint.TaskFigures{StateSize: h.Size})
	}

	for step := 0; step < 200 && failedJob == nil; step++ {
		now = now.Add(100 * time.Millisecond)
		switch now.UnixMilli() {
		case 5500, 10500: // the disk fills up
			ffs.DiskFull(0)
		case 7500: // and is freed again
			ffs.DiskFull(-1)
		}
		for i := range counters {
			counters[i]++
		}
		run(coord.Tick(now))
		for len(dues) > 0 && !dues[0].at.After(now) {
			d := dues[0]
			dues = dues[1:]
			run(ack(d))
		}
	}

	if failedJob == nil || !errors.Is(failedJob, checkpoint.ErrTolerableFailuresExceeded) || !errors.Is(failedJob, syscall.ENOSPC) {
		t.Fatalf("job failure %v: want the tolerable failures exceeded, caused by a full disk", failedJob)
	}
	s := coord.Stats()
	// Checkpoints 6 and 7 failed, 8 to 10 completed, 11 to 13 failed.
	if s.Failed != 5 || !slices.Equal(completed, []int64{1, 2, 3, 4, 5, 8, 9, 10}) {
		t.Fatalf("completed %v, %d failed:\n%+v", completed, s.Failed, s)
	}

	ffs.DiskFull(-1)
	rec, err := st.Recover()
	if err != nil {
		t.Fatal(err)
	}
	latest := rec.Latest()
	if latest.Metadata.CheckpointID != 10 || len(rec.Retained) != 2 {
		t.Fatalf("recovered %d, retained %d", latest.Metadata.CheckpointID, len(rec.Retained))
	}
	for _, sub := range latest.Metadata.Subtasks {
		data, err := latest.ReadAll(sub.OperatorState[0].Handle)
		if err != nil {
			t.Fatal(err)
		}
		task := sub.Subtask
		if sub.OperatorUID == "sink" {
			task = 2
		}
		if want := fmt.Sprintf("counter=%d;", snapshots[10][task]); string(data) != want {
			t.Fatalf("%s#%d restored %q, want %q", sub.OperatorUID, sub.Subtask, data, want)
		}
		for _, f := range sub.KeyedState {
			for _, file := range f.Files {
				if _, err := latest.ReadAll(file.Handle); err != nil {
					t.Fatalf("shared file %s: %v", file.Name, err)
				}
			}
		}
	}
	if got := metadataSeen[10].Subtasks[0].Figures; got == nil {
		t.Fatal("no figures in the metadata")
	}

	// A new coordinator continues above every id on disk.
	var retained []*storage.Metadata
	for _, s := range rec.Retained {
		retained = append(retained, s.Metadata)
	}
	next, err := checkpoint.NewCoordinator("job", cfg, tasks)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.Restore(now, retained, latest.Metadata, rec.MaxID); err != nil {
		t.Fatal(err)
	}
	next.Start(now)
	acts, err := next.RequestCheckpoint(now, checkpoint.KindCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	if id := acts[0].(checkpoint.Trigger).Barrier.ID; id <= 13 || id <= rec.MaxID {
		t.Fatalf("new checkpoint id %d reuses an old one (max on disk %d)", id, rec.MaxID)
	}
}
