package checkpoint_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
)

// A task with two input channels takes an aligned checkpoint: the handler
// says what to block, when to snapshot and when to resume.
func ExampleBarrierHandler() {
	h := checkpoint.NewBarrierHandler(checkpoint.ExactlyOnce, 2)
	b := checkpoint.Barrier{ID: 1, Timestamp: 1000}
	for _, ev := range []checkpoint.Event{
		checkpoint.BarrierReceived{Channel: 0, Barrier: b},
		checkpoint.BufferReceived{Channel: 1, Size: 512},
		checkpoint.BarrierReceived{Channel: 1, Barrier: b},
	} {
		for _, a := range h.Step(time.UnixMilli(1010), ev) {
			fmt.Println(a)
		}
	}
	// Output:
	// block ch=0
	// start-checkpoint id=1 checkpoint unaligned=false start-delay=10ms alignment=0s processed=512
	// forward-barrier id=1 aligned priority=false
	// unblock-all
}

// The job master triggers a checkpoint, collects the acknowledgements, has
// the metadata written, and notifies the tasks.
func ExampleCoordinator() {
	c, err := checkpoint.NewCoordinator("job", checkpoint.Config{Interval: time.Second, Directory: "/ck"}, []checkpoint.TaskInfo{
		{ID: 0, Vertex: "source", Operators: []string{"source"}},
		{ID: 1, Vertex: "sink", Operators: []string{"sink"}, Upstream: []checkpoint.TaskID{0}},
	})
	if err != nil {
		panic(err)
	}
	now := time.UnixMilli(0)
	c.Start(now)
	next, _ := c.NextWakeup()
	show := func(acts []checkpoint.CoordinatorAction) {
		for _, a := range acts {
			fmt.Println(a)
		}
	}
	show(c.Tick(next))
	show(c.Ack(next, 0, 1, []storage.SubtaskState{{OperatorUID: "source"}}, checkpoint.TaskFigures{}))
	show(c.Ack(next, 1, 1, []storage.SubtaskState{{OperatorUID: "sink", Committables: [][]byte{[]byte("txn")}}}, checkpoint.TaskFigures{}))
	show(c.MetadataWritten(next, 1, "/ck/job/chk-1/_metadata", nil))
	// Output:
	// trigger id=1 ts=1000 checkpoint/aligned tasks=[0] urgent=false
	// write-metadata id=1 checkpoint subtasks=2 shared=[]
	// notify-complete id=1 tasks=[0 1]
}
