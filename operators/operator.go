package operators

import (
	"context"
	"errors"
	"github.com/sluicehq/sluice/source"

	"fmt"
	"github.com/sluicehq/sluice/state"
	"log/slog"
	"math"
)

// NoTimestamp marks a record that carries no event timestamp (the one
// definition is source.NoTimestamp).
const NoTimestamp = source.NoTimestamp

// MinWatermark is the watermark before any was seen.
const MinWatermark int64 = math.MinInt64

// MaxWatermark means event time has reached its end.
const MaxWatermark int64 = math.MaxInt64

// Input receives the records of one input of an operator.
type Input[T any] interface {
	ProcessElement(v T, ts int64) error
}

// Output is where an operator emits records and watermarks: the Input of
// the next operator in the chain, a network writer, or a fan-out of both.
type Output[T any] interface {
	Collect(v T, ts int64) error
	EmitWatermark(wm int64) error
}

// Operator is the lifecycle the runtime drives, type-erased. The typed
// inputs of an operator are returned by its builder (see runtime.Node).
type Operator interface {
	// Open prepares the operator before the first record.
	Open(ctx *Context) error
	// ProcessWatermark tells the operator that event time has reached wm on
	// every input: it fires due event-time timers and forwards wm.
	ProcessWatermark(wm int64) error
	// Finish is called once at end of input, before Close: the operator
	// emits anything it still buffers.
	Finish() error
	// Close releases resources; it is called on every exit path.
	Close() error
}

// InputAvailability is implemented by operators that can refuse input
// for a while (async I/O with every slot of its capacity in flight): while
// InputAvailable is false the task reads no input, as when an output has
// no buffer, but still runs its mails (timers, checkpoints, completions),
// so it never blocks its goroutine waiting.
type InputAvailability interface {
	InputAvailable() bool
}

// ProcessingTimeService schedules callbacks on the task goroutine at a wall
// clock time (Unix milliseconds).
type ProcessingTimeService interface {
	// Now returns the current processing time in Unix milliseconds.
	Now() int64
	// At schedules fn to run as a mail on the task goroutine at time ts (or
	// soon after). It returns a function that cancels the callback.
	At(ts int64, fn func() error) (cancel func())
}

// Context is what the runtime hands an operator at Open.
type Context struct {
	// OperatorName and UID identify the operator; UID is the stable id its
	// state is mapped by.
	OperatorName, UID string
	// Subtask and Parallelism place this instance among its peers.
	Subtask, Parallelism int
	// TaskName names the subtask running the operator (the chain's name
	// with its subtask, as Flink's getTaskNameWithSubtasks).
	TaskName string
	// Attempt is the number of the job's attempt, 0 for the first run
	// and +1 for every restart (Flink's getAttemptNumber); a task that
	// its failover region's restart made counts those restarts too, so a
	// subtask's number grows with each of its restarts.
	Attempt int
	// Metrics is the operator's group of user-defined metrics, reported
	// with the task's (nil outside a running task).
	Metrics *MetricGroup
	// MaxParallelism is the number of key groups.
	MaxParallelism int
	// ProcessingTime schedules processing-time callbacks.
	ProcessingTime ProcessingTimeService
	// Logger carries the job, vertex and subtask attributes.
	Logger *slog.Logger
	// Ctx is cancelled when the task is cancelled (job cancelled, attempt
	// failed over): blocking I/O of an operator (a sink talking to a
	// broker that is down) must give up on it.
	Ctx context.Context
	// PostMail queues fn to run on the task goroutine, between records,
	// and wakes the task; an error of fn fails the task. It is safe from
	// any goroutine and fails once the task has exited. Operators whose
	// work completes on other goroutines (async I/O) hand results back
	// through it.
	PostMail func(fn func() error) error

	// OperatorState is the operator's non-keyed state of this subtask
	// (list and union list states), checkpointed with it.
	OperatorState *state.OperatorStateBackend
	// KeyedState is the keyed state backend of a keyed operator (nil for
	// others). The operator sets the current key before each record and
	// timer, so user functions read and write the state of that key.
	KeyedState state.KeyedBackend

	// Restored is true when the job restored this operator's state from a
	// checkpoint or savepoint (RestoredCheckpointID).
	Restored             bool
	RestoredCheckpointID int64
	// RestoredCommittables are the two-phase-commit committables of the
	// restored checkpoint that this subtask re-commits before it writes.
	RestoredCommittables [][]byte
	// RestoredParallelisms are the parallelisms the operator had in the
	// restored checkpoint.
	RestoredParallelisms []int

	// sides are the operator's side outputs, for a rich function's
	// EmitSide (nil without any).
	sides *SideOutputs
	// flushers write into KeyedState what the operator keeps of its keyed
	// state in memory only (FlushKeyedState).
	flushers []func() error
}

// FlushKeyedState writes into KeyedState what the operator holds of its
// keyed state in memory alone: the timers registered, deleted and fired
// since the last flush (a TimerService keeps its timers in a heap and
// writes their changes to keyed state only here, as Flink's heap timers
// are written only by a snapshot). The runtime calls it before it
// snapshots the keyed backend; a tool that reads the timers from the
// backend (RegisteredTimers) calls it first. It changes the backend's
// current key.
func (c *Context) FlushKeyedState() error {
	for _, f := range c.flushers {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// SideOutputs returns the side outputs of the operator (for EmitSide
// from a rich function); nil when it has none.
func (c *Context) SideOutputs() *SideOutputs { return c.sides }

// Error is the error of a failing operator: it names the operator and the
// subtask. Use errors.As to find it in a job's error.
type Error struct {
	Operator    string
	Subtask     int
	Parallelism int
	Err         error
}

func (e *Error) Error() string {
	return fmt.Sprintf("operator %q (subtask %d/%d): %v", e.Operator, e.Subtask, e.Parallelism, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Wrap attributes err to the operator of ctx, unless an operator already
// claimed it (an error that came up from further down the chain).
func Wrap(ctx *Context, err error) error {
	if err == nil {
		return nil
	}
	var oe *Error
	if errors.As(err, &oe) {
		return err
	}
	return &Error{Operator: ctx.OperatorName, Subtask: ctx.Subtask, Parallelism: ctx.Parallelism, Err: err}
}

// Collector is handed to user functions that emit any number of records.
// Collect never fails from the user's view: the first error of the output
// is kept and returned by the operator after the user function returns, and
// later Collects are dropped.
type Collector[T any] interface {
	Collect(v T)
}

// collector adapts an Output to a Collector with a fixed timestamp.
type collector[T any] struct {
	out Output[T]
	ts  int64
	err error
}

func (c *collector[T]) Collect(v T) {
	if c.err != nil {
		return
	}
	c.err = c.out.Collect(v, c.ts)
}

// take returns the kept error and resets the collector for the next call.
func (c *collector[T]) take() error {
	err := c.err
	c.err = nil
	return err
}
