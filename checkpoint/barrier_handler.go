package checkpoint

import (
	"fmt"
	"time"
)

// BarrierHandler is the state machine that handles checkpoint barriers for
// one task's input gate (all its input channels, numbered from 0). It is
// pure: the task feeds it what it polls and carries out the actions it
// returns, in order, before it polls again. It never blocks, never reads a
// clock and is not safe for concurrent use — it lives on the task goroutine.
//
// Build one with NewBarrierHandler. A task without input channels (a
// source) uses one too, with zero channels, and feeds it TriggerReceived.
type BarrierHandler interface {
	// Step feeds one event and returns the actions to carry out, in order
	// (nil when there is nothing to do).
	Step(now time.Time, ev Event) []Action
	// OnBuffer is Step(now, BufferReceived{channel, size}) without the
	// allocation of the event: call it for every data buffer polled from
	// channel. It returns nil, or a PersistInput for that buffer.
	OnBuffer(channel, size int) []Action
	// Pending returns the checkpoint the handler is working on: aligning,
	// or collecting the in-flight data of an unaligned checkpoint.
	Pending() (id int64, ok bool)
	// String describes the handler's state, for logs and tests.
	String() string
}

// UnalignedInputAwaiter is implemented by the exactly-once handler: the
// channels whose barrier an unaligned checkpoint still waits for
// (AwaitedChannels in barrier_handler_unaligned.go).
type UnalignedInputAwaiter interface {
	AwaitedChannels(id int64, dst []int) []int
}

// NewBarrierHandler returns the handler for a task with numChannels input
// channels: the barrier tracker in at-least-once mode, the exactly-once
// handler otherwise. The exactly-once handler takes each checkpoint the way
// its barrier says: aligned, unaligned, or aligned with a timeout that
// switches it to unaligned (savepoints are always aligned).
func NewBarrierHandler(mode Mode, numChannels int) BarrierHandler {
	if numChannels < 0 {
		panic(fmt.Sprintf("checkpoint: NewBarrierHandler with %d channels", numChannels))
	}
	if mode == AtLeastOnce {
		return newTracker(numChannels)
	}
	return newExactlyOnce(numChannels)
}

// Event is something a task tells its barrier handler.
type Event interface{ isEvent() }

// BarrierReceived: a barrier was polled from Channel.
type BarrierReceived struct {
	Channel int
	Barrier Barrier
	// Priority is set when the barrier arrived as a priority event (an
	// unaligned barrier, or one promoted upstream): it then counts as
	// unaligned whatever its options say.
	Priority bool
	// Overtaken is the number of buffer copies the priority barrier brought
	// (the buffers it overtook in the input channel, still queued behind
	// it). The handler answers PersistOvertakenInput when they belong to the
	// checkpoint's channel state.
	Overtaken int
}

// CancelReceived: an event.CancelCheckpointMarker (runtime/network/event) was polled from Channel.
type CancelReceived struct {
	Channel int
	ID      int64
}

// ChannelEnded: Channel delivered its last item. A channel that ended
// counts as having delivered every barrier still to come.
type ChannelEnded struct{ Channel int }

// BufferReceived: a data buffer of Size bytes was polled from Channel. See
// BarrierHandler.OnBuffer.
type BufferReceived struct {
	Channel int
	Size    int
}

// TriggerReceived: the coordinator triggered checkpoint Barrier.ID on this
// task directly. Only for tasks without open input channels: sources, and
// tasks whose inputs have all ended.
type TriggerReceived struct{ Barrier Barrier }

// TimerFired: a timer asked for by RegisterTimer fired. Spurious calls are
// harmless.
type TimerFired struct{}

// InputBarrierPromoted: carrying out PromoteInputBarrier, the task found the
// barrier still queued in Channel, moved it to the head, and persisted the
// buffers it overtook. When that barrier is then polled, any overtaken
// copies it brings are not persisted a second time.
type InputBarrierPromoted struct {
	Channel int
	ID      int64
}

// CheckpointAborted: the coordinator aborted checkpoint ID (notify-aborted).
type CheckpointAborted struct{ ID int64 }

// CheckpointCompleted: the coordinator completed checkpoint ID
// (notify-complete); barriers of older checkpoints are ignored from now on.
type CheckpointCompleted struct{ ID int64 }

func (BarrierReceived) isEvent()      {}
func (CancelReceived) isEvent()       {}
func (ChannelEnded) isEvent()         {}
func (BufferReceived) isEvent()       {}
func (TriggerReceived) isEvent()      {}
func (TimerFired) isEvent()           {}
func (InputBarrierPromoted) isEvent() {}
func (CheckpointAborted) isEvent()    {}
func (CheckpointCompleted) isEvent()  {}

// Action is something the barrier handler asks its task to do.
type Action interface {
	isAction()
	String() string
}

// BlockChannel: stop polling Channel until UnblockAll (it delivered the
// barrier of the checkpoint being aligned).
type BlockChannel struct{ Channel int }

// UnblockAll: poll every channel again.
type UnblockAll struct{}

// StartCheckpoint: take the snapshot of checkpoint Barrier.ID now — call the
// operators' pre-barrier hooks, then take the synchronous part, then hand
// the asynchronous part to another goroutine. The figures are this task's
// start delay (trigger to first barrier), alignment duration (first barrier
// to snapshot) and processed bytes (polled during the alignment).
//
// When Unaligned is set the task also starts recording channel state for
// the checkpoint: the actions that follow say what to persist, and
// InputStateComplete says when the input side is done. Otherwise the input
// channel state is empty.
type StartCheckpoint struct {
	Barrier    Barrier
	Unaligned  bool
	StartDelay time.Duration
	Alignment  time.Duration
	Processed  int64
}

// ForwardBarrier: emit Barrier on every output, as a priority event when
// Priority is set (AddPriorityEvent; see PersistOvertakenOutput) and in
// order otherwise.
type ForwardBarrier struct {
	Barrier  Barrier
	Priority bool
}

// PersistOvertakenOutput: persist, as output channel state of checkpoint ID,
// the unsent output buffers the priority barrier just overtook (what
// AddPriorityEvent returned, per subpartition).
type PersistOvertakenOutput struct{ ID int64 }

// PersistInput: persist the buffer just polled from Channel as input channel
// state of checkpoint ID, then process it as usual.
type PersistInput struct {
	Channel int
	ID      int64
}

// PersistOvertakenInput: persist the overtaken buffer copies that came with
// the barrier just polled from Channel as input channel state of ID. The
// buffers themselves are still queued and are processed as usual.
type PersistOvertakenInput struct {
	Channel int
	ID      int64
}

// PromoteInputBarrier: the checkpoint switched to unaligned; if barrier ID
// is still queued in Channel, promote it to the head (PromoteEvent), persist
// the buffers it overtook as input channel state of ID, and report
// InputBarrierPromoted. If it is not there, do nothing.
type PromoteInputBarrier struct {
	Channel int
	ID      int64
}

// PromoteOutputBarrier: the alignment timeout of checkpoint ID expired while
// its barrier may still be queued in the outputs: promote it to priority in
// every subpartition where it is still queued (PromoteEvent) and persist
// the buffers it overtakes as output channel state of ID.
type PromoteOutputBarrier struct{ ID int64 }

// InputStateComplete: every input channel delivered barrier ID (or ended),
// so the input channel state of unaligned checkpoint ID is complete.
type InputStateComplete struct{ ID int64 }

// RegisterTimer: feed TimerFired at At (or soon after).
type RegisterTimer struct{ At time.Time }

// AbortCheckpoint: abort checkpoint ID here — decline it to the coordinator
// with Reason and drop whatever part of it was started. Followed by
// ForwardCancel.
type AbortCheckpoint struct {
	ID     int64
	Reason Reason
}

// ForwardCancel: emit event.CancelCheckpointMarker{ID} (runtime/network/event) on every output, so that
// downstream tasks stop waiting for barrier ID.
type ForwardCancel struct{ ID int64 }

func (BlockChannel) isAction()           {}
func (UnblockAll) isAction()             {}
func (StartCheckpoint) isAction()        {}
func (ForwardBarrier) isAction()         {}
func (PersistOvertakenOutput) isAction() {}
func (PersistInput) isAction()           {}
func (PersistOvertakenInput) isAction()  {}
func (PromoteInputBarrier) isAction()    {}
func (PromoteOutputBarrier) isAction()   {}
func (InputStateComplete) isAction()     {}
func (RegisterTimer) isAction()          {}
func (AbortCheckpoint) isAction()        {}
func (ForwardCancel) isAction()          {}

func (a BlockChannel) String() string { return fmt.Sprintf("block ch=%d", a.Channel) }
func (UnblockAll) String() string     { return "unblock-all" }
func (a StartCheckpoint) String() string {
	return fmt.Sprintf("start-checkpoint id=%d %s unaligned=%t start-delay=%s alignment=%s processed=%d",
		a.Barrier.ID, a.Barrier.Options.Kind, a.Unaligned, a.StartDelay, a.Alignment, a.Processed)
}
func (a ForwardBarrier) String() string {
	return fmt.Sprintf("forward-barrier id=%d %s priority=%t", a.Barrier.ID, a.Barrier.Options.Alignment, a.Priority)
}
func (a PersistOvertakenOutput) String() string {
	return fmt.Sprintf("persist-overtaken-output id=%d", a.ID)
}
func (a PersistInput) String() string {
	return fmt.Sprintf("persist-input ch=%d id=%d", a.Channel, a.ID)
}
func (a PersistOvertakenInput) String() string {
	return fmt.Sprintf("persist-overtaken-input ch=%d id=%d", a.Channel, a.ID)
}
func (a PromoteInputBarrier) String() string {
	return fmt.Sprintf("promote-input-barrier ch=%d id=%d", a.Channel, a.ID)
}
func (a PromoteOutputBarrier) String() string {
	return fmt.Sprintf("promote-output-barrier id=%d", a.ID)
}
func (a InputStateComplete) String() string { return fmt.Sprintf("input-state-complete id=%d", a.ID) }
func (a RegisterTimer) String() string      { return fmt.Sprintf("register-timer at=%d", a.At.UnixMilli()) }
func (a AbortCheckpoint) String() string {
	return fmt.Sprintf("abort-checkpoint id=%d reason=%s", a.ID, a.Reason)
}
func (a ForwardCancel) String() string { return fmt.Sprintf("forward-cancel id=%d", a.ID) }

// chanSet is a set of channel indexes.
type chanSet []uint64

func newChanSet(n int) chanSet   { return make(chanSet, (n+63)/64) }
func (s chanSet) has(i int) bool { return s[i>>6]&(1<<(uint(i)&63)) != 0 }
func (s chanSet) add(i int)      { s[i>>6] |= 1 << (uint(i) & 63) }
func (s chanSet) clear()         { clear(s) }

// nonNegative clamps a duration computed from two clocks (the trigger time
// is stamped by the coordinator) at zero.
func nonNegative(d time.Duration) time.Duration { return max(d, 0) }

func checkChannel(n, ch int) {
	if ch < 0 || ch >= n {
		panic(fmt.Sprintf("checkpoint: barrier handler event for channel %d, want [0, %d)", ch, n))
	}
}
