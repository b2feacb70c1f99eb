package checkpoint

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint/snapshot"
)

// BenchmarkBarrierHandlerBuffer measures the per-buffer cost of the barrier
// handler on the task's hot path: no checkpoint in flight, an aligned one
// aligning, an unaligned one persisting.
func BenchmarkBarrierHandlerBuffer(b *testing.B) {
	now := time.UnixMilli(0)
	for _, tc := range []struct {
		name  string
		setup func(h BarrierHandler)
	}{
		{"idle", func(BarrierHandler) {}},
		{"aligning", func(h BarrierHandler) {
			h.Step(now, BarrierReceived{Channel: 0, Barrier: Barrier{ID: 1}})
		}},
		{"unaligned-persisting", func(h BarrierHandler) {
			h.Step(now, BarrierReceived{Channel: 0, Barrier: Barrier{ID: 1, Options: Options{Alignment: Unaligned}}, Priority: true})
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := NewBarrierHandler(ExactlyOnce, 8)
			tc.setup(h)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				h.OnBuffer(1+i%7, 32<<10)
			}
		})
	}
}

// BenchmarkBarrierHandlerCheckpoint is one aligned checkpoint through a
// handler with 8 channels: 8 barriers, blocks, snapshot, unblock.
func BenchmarkBarrierHandlerCheckpoint(b *testing.B) {
	h := NewBarrierHandler(ExactlyOnce, 8)
	now := time.UnixMilli(0)
	b.ReportAllocs()
	for id := int64(1); b.Loop(); id++ {
		for ch := 0; ch < 8; ch++ {
			h.Step(now, BarrierReceived{Channel: ch, Barrier: Barrier{ID: id}})
		}
	}
}

// BenchmarkCoordinatorCheckpoint is one checkpoint of a job of 64 tasks
// through the coordinator: trigger, 64 acknowledgements, completion.
func BenchmarkCoordinatorCheckpoint(b *testing.B) {
	const n = 64
	var tasks []TaskInfo
	for i := 0; i < n; i++ {
		ti := TaskInfo{ID: TaskID(i), Vertex: "v", Subtask: i, Operators: []string{fmt.Sprint("op", i%4)}}
		if i >= 8 {
			ti.Upstream = []TaskID{TaskID(i % 8)}
		}
		tasks = append(tasks, ti)
	}
	c, err := NewCoordinator("job", Config{Interval: time.Second, Directory: "/ck", RetainedCheckpoints: 2}, tasks)
	if err != nil {
		b.Fatal(err)
	}
	now := time.UnixMilli(0)
	c.Start(now)
	state := []snapshot.SubtaskState{{OperatorUID: "op", OperatorState: []snapshot.OperatorStateHandle{{Name: "s", Handle: snapshot.StateHandle{Path: "f", Size: 10}}}}}
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		acts := c.Tick(now)
		id := acts[len(acts)-1].(Trigger).Barrier.ID
		for i := 0; i < n; i++ {
			c.Ack(now, TaskID(i), id, state, TaskFigures{})
		}
		c.MetadataWritten(now, id, "p", nil)
	}
}
