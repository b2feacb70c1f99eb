package operators

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// ErrAsyncTimeout is the error of an async call that did not complete
// within the operator's timeout, when the function has no timeout
// handler (Flink's TimeoutException): it fails the task.
var ErrAsyncTimeout = errors.New("async call timed out")

// ResultFuture is where an async function hands over the result of one
// call, as Flink's ResultFuture: Complete with the output records (none
// is a valid result) or CompleteExceptionally with an error, which fails
// the task unless the retry strategy retries it. Both are safe from any
// goroutine; the first call counts, later ones are ignored.
type ResultFuture[OUT any] interface {
	Complete(results ...OUT)
	CompleteExceptionally(err error)
}

// AsyncFunction is the user function of async I/O, as Flink's
// AsyncFunction. AsyncInvoke runs on the task goroutine, once per record
// (and per retry): it must not block, but start the request (a goroutine,
// an asynchronous client) and return; the request completes the future
// from wherever it ends. ctx is cancelled once the call's result no longer
// matters (completed, timed out, or the task stopped). It may also
// implement AsyncTimeoutHandler, Opener and Closer.
type AsyncFunction[IN, OUT any] interface {
	AsyncInvoke(ctx context.Context, in IN, result ResultFuture[OUT])
}

// AsyncTimeoutHandler is implemented by async functions that decide what a
// timed-out call yields (Flink's AsyncFunction.timeout): it runs on the
// task goroutine and completes the future, with a fallback result or an
// error. Without it a timeout fails the task with ErrAsyncTimeout.
type AsyncTimeoutHandler[IN, OUT any] interface {
	Timeout(in IN, result ResultFuture[OUT])
}

// AsyncFunc adapts a function to an AsyncFunction.
type AsyncFunc[IN, OUT any] func(ctx context.Context, in IN, result ResultFuture[OUT])

func (f AsyncFunc[IN, OUT]) AsyncInvoke(ctx context.Context, in IN, result ResultFuture[OUT]) {
	f(ctx, in, result)
}

// AsyncRetryStrategy retries async calls, as Flink's AsyncRetryStrategy
// (FixedDelayRetryStrategy and ExponentialBackoffDelayRetryStrategy): a
// call whose result RetryOnResult matches, or whose error RetryOnError
// matches, is called again after a delay, up to MaxAttempts retries (as
// Flink, the attempts after the first call). When the retries are used up
// the last result is emitted, or the last error fails the task. The
// operator's timeout covers the first call and all retries.
type AsyncRetryStrategy[OUT any] struct {
	// MaxAttempts is the number of retries after the first call.
	MaxAttempts int
	// Delay is the delay before every retry, or before the first one with
	// a Multiplier.
	Delay time.Duration
	// Multiplier > 1 makes the delays grow exponentially (each the
	// previous one times Multiplier), up to MaxDelay.
	Multiplier float64
	MaxDelay   time.Duration
	// RetryOnResult and RetryOnError say which outcomes are retried; nil
	// retries none of that kind.
	RetryOnResult func(results []OUT) bool
	RetryOnError  func(err error) bool
}

// backoff is the delay before retry number attempt (1 for the first).
func (r *AsyncRetryStrategy[OUT]) backoff(attempt int) time.Duration {
	if r.Multiplier <= 1 {
		return r.Delay
	}
	d := float64(r.Delay) * math.Pow(r.Multiplier, float64(attempt-1))
	if r.MaxDelay > 0 && d > float64(r.MaxDelay) {
		return r.MaxDelay
	}
	return time.Duration(d)
}

// Validate reports a strategy that cannot work.
func (r *AsyncRetryStrategy[OUT]) Validate() error {
	if r.MaxAttempts < 0 || r.Delay < 0 || r.MaxDelay < 0 || r.Multiplier < 0 {
		return fmt.Errorf("async retry strategy: attempts, delays and multiplier must not be negative")
	}
	if r.Multiplier > 1 && r.MaxDelay > 0 && r.MaxDelay < r.Delay {
		return fmt.Errorf("async retry strategy: max delay %v is below the initial delay %v", r.MaxDelay, r.Delay)
	}
	return nil
}

// AsyncConfig configures an async wait operator.
type AsyncConfig[IN, OUT any] struct {
	// Ordered emits results in the order of their inputs (orderedWait);
	// otherwise as they complete, but never across a watermark
	// (unorderedWait).
	Ordered bool
	// Capacity is the most calls in flight (Flink's capacity, default
	// 100); at capacity the task takes no input until one completes.
	Capacity int
	// Timeout bounds each record's calls, retries included; 0: none.
	Timeout time.Duration
	// Retry retries calls (nil: none).
	Retry *AsyncRetryStrategy[OUT]
	// InCodec encodes the inputs in flight into operator state.
	InCodec codec.Codec[IN]
}

// asyncStateName is the operator list state holding the inputs in flight
// at a checkpoint.
const asyncStateName = "async-wait-inputs"

// asyncEntry is one element of the queue: a record with its call, or a
// watermark.
type asyncEntry[IN, OUT any] struct {
	isWM bool
	wm   int64

	in      IN
	ts      int64
	attempt int
	// gen counts the calls of the entry; a future or a timer of an
	// earlier call is ignored.
	gen      int
	done     bool
	timedOut bool
	results  []OUT
	cancel   context.CancelFunc
	timer    *time.Timer // the timeout
	retry    *time.Timer
}

// asyncEvent is something that happened to an entry on another goroutine,
// handled on the task goroutine.
type asyncEvent[IN, OUT any] struct {
	e       *asyncEntry[IN, OUT]
	gen     int
	kind    asyncEventKind
	results []OUT
	err     error
}

type asyncEventKind uint8

const (
	asyncCompleted asyncEventKind = iota
	asyncTimedOut
	asyncRetryDue
)

// AsyncWait is the async I/O operator, as Flink's AsyncWaitOperator: each
// record starts a call of the async function; the results are emitted on
// the task goroutine (from a mail) as the calls complete, in input order
// (ordered) or in completion order within the records between two
// watermarks (unordered); watermarks keep their place among the records.
// The inputs of the calls in flight are kept in operator state at every
// checkpoint and called again on restore, so each result is emitted once
// in the committed output whatever the crashes.
type AsyncWait[IN, OUT any] struct {
	cfg AsyncConfig[IN, OUT]
	fn  AsyncFunction[IN, OUT]
	out Output[OUT]
	ctx *Context

	queue    []*asyncEntry[IN, OUT]
	inFlight int // records in the queue
	st       state.OperatorListState[TimestampedValue[IN]]

	mu     sync.Mutex
	events []asyncEvent[IN, OUT]
	closed bool
	// posted is set while a mail to handle the events is queued.
	posted atomic.Bool
	// signal wakes a task goroutine waiting inside the operator (at
	// capacity within one record's fan-out, or at the end of input).
	signal chan struct{}
	spare  []asyncEvent[IN, OUT]
}

// NewAsyncWait returns the async I/O operator running fn, emitting to out.
func NewAsyncWait[IN, OUT any](cfg AsyncConfig[IN, OUT], fn AsyncFunction[IN, OUT], out Output[OUT]) *AsyncWait[IN, OUT] {
	if cfg.Capacity <= 0 {
		cfg.Capacity = 100
	}
	return &AsyncWait[IN, OUT]{cfg: cfg, fn: fn, out: out, signal: make(chan struct{}, 1)}
}

// InputAvailable implements InputAvailability: false while every slot of
// the capacity is in flight.
func (a *AsyncWait[IN, OUT]) InputAvailable() bool { return a.inFlight < a.cfg.Capacity }

// InFlight returns the number of records whose results are not emitted.
func (a *AsyncWait[IN, OUT]) InFlight() int { return a.inFlight }

func (a *AsyncWait[IN, OUT]) Open(ctx *Context) error {
	a.ctx = ctx
	if ctx.PostMail == nil {
		return Wrap(ctx, fmt.Errorf("async wait operator needs a task mailbox"))
	}
	if a.cfg.Retry != nil {
		if err := a.cfg.Retry.Validate(); err != nil {
			return Wrap(ctx, err)
		}
	}
	if o, ok := a.fn.(Opener); ok {
		if err := o.Open(ctx); err != nil {
			return Wrap(ctx, fmt.Errorf("open: %w", err))
		}
	}
	if ctx.OperatorState == nil {
		return nil
	}
	st, err := state.GetOperatorListState(ctx.OperatorState, state.ListStateDescriptor[TimestampedValue[IN]]{
		Name: asyncStateName, Codec: timestampedCodec[IN]{orDefaultCodec(a.cfg.InCodec)}})
	if err != nil {
		return Wrap(ctx, fmt.Errorf("async inputs state: %w", err))
	}
	a.st = st
	restored, err := st.Get()
	if err != nil {
		return Wrap(ctx, fmt.Errorf("read restored async inputs: %w", err))
	}
	if err := st.Clear(); err != nil {
		return Wrap(ctx, err)
	}
	// The calls in flight at the checkpoint are made again, in their order.
	for _, r := range restored {
		if err := a.ProcessElement(r.Value, r.Timestamp); err != nil {
			return err
		}
	}
	return nil
}

func (a *AsyncWait[IN, OUT]) ProcessElement(v IN, ts int64) error {
	// The task stops reading at capacity (InputAvailable); a record that
	// comes anyway (one input record fanned out upstream in the chain)
	// waits here for a slot.
	for a.inFlight >= a.cfg.Capacity {
		if err := a.waitForEvents(); err != nil {
			return err
		}
	}
	e := &asyncEntry[IN, OUT]{in: v, ts: ts, attempt: 1}
	a.queue = append(a.queue, e)
	a.inFlight++
	if a.cfg.Timeout > 0 {
		gen := e.gen
		e.timer = time.AfterFunc(a.cfg.Timeout, func() { a.push(asyncEvent[IN, OUT]{e: e, gen: gen, kind: asyncTimedOut}) })
	}
	a.invoke(e)
	return nil
}

// invoke makes the entry's next call.
func (a *AsyncWait[IN, OUT]) invoke(e *asyncEntry[IN, OUT]) {
	e.gen++
	cctx, cancel := context.WithCancel(a.ctx.Ctx)
	e.cancel = cancel
	a.fn.AsyncInvoke(cctx, e.in, &asyncFuture[IN, OUT]{a: a, e: e, gen: e.gen})
}

// asyncFuture is the ResultFuture of one call.
type asyncFuture[IN, OUT any] struct {
	a    *AsyncWait[IN, OUT]
	e    *asyncEntry[IN, OUT]
	gen  int
	once atomic.Bool
}

func (f *asyncFuture[IN, OUT]) Complete(results ...OUT) {
	if f.once.CompareAndSwap(false, true) {
		f.a.push(asyncEvent[IN, OUT]{e: f.e, gen: f.gen, kind: asyncCompleted, results: results})
	}
}

func (f *asyncFuture[IN, OUT]) CompleteExceptionally(err error) {
	if err == nil {
		err = errors.New("completed exceptionally with a nil error")
	}
	if f.once.CompareAndSwap(false, true) {
		f.a.push(asyncEvent[IN, OUT]{e: f.e, gen: f.gen, kind: asyncCompleted, err: err})
	}
}

// push hands an event to the task goroutine: any goroutine.
func (a *AsyncWait[IN, OUT]) push(ev asyncEvent[IN, OUT]) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.events = append(a.events, ev)
	a.mu.Unlock()
	select {
	case a.signal <- struct{}{}:
	default:
	}
	if a.posted.CompareAndSwap(false, true) {
		if err := a.ctx.PostMail(a.onMail); err != nil {
			a.posted.Store(false) // the task exited: nothing to hand over to
		}
	}
}

func (a *AsyncWait[IN, OUT]) onMail() error {
	a.posted.Store(false)
	return a.handleEvents()
}

// waitForEvents blocks the task goroutine until an event comes, and
// handles it: only inside a record's processing at capacity and at the end
// of input.
func (a *AsyncWait[IN, OUT]) waitForEvents() error {
	select {
	case <-a.signal:
	case <-a.ctx.Ctx.Done():
		return a.ctx.Ctx.Err()
	}
	return a.handleEvents()
}

// handleEvents applies the events that came in and emits what they made
// emittable; on the task goroutine.
func (a *AsyncWait[IN, OUT]) handleEvents() error {
	for {
		a.mu.Lock()
		evs := a.events
		a.events = a.spare[:0]
		a.mu.Unlock()
		if len(evs) == 0 {
			a.spare = evs
			return a.emitReady()
		}
		for i := range evs {
			if err := a.handle(&evs[i]); err != nil {
				return Wrap(a.ctx, err)
			}
		}
		clear(evs)
		a.spare = evs[:0]
	}
}

func (a *AsyncWait[IN, OUT]) handle(ev *asyncEvent[IN, OUT]) error {
	e := ev.e
	if e.done {
		return nil
	}
	switch ev.kind {
	case asyncTimedOut:
		if e.timedOut {
			return nil
		}
		e.timedOut = true
		a.stopCall(e)
		if h, ok := a.fn.(AsyncTimeoutHandler[IN, OUT]); ok {
			e.gen++
			h.Timeout(e.in, &asyncFuture[IN, OUT]{a: a, e: e, gen: e.gen})
			return nil
		}
		return fmt.Errorf("record at %d after %v and %d attempt(s): %w", e.ts, a.cfg.Timeout, e.attempt, ErrAsyncTimeout)
	case asyncRetryDue:
		if ev.gen != e.gen || e.timedOut {
			return nil
		}
		e.attempt++
		a.invoke(e)
		return nil
	}
	if ev.gen != e.gen {
		return nil // a call that was retried or timed out
	}
	if r := a.cfg.Retry; r != nil && !e.timedOut && e.attempt <= r.MaxAttempts &&
		(ev.err != nil && r.RetryOnError != nil && r.RetryOnError(ev.err) ||
			ev.err == nil && r.RetryOnResult != nil && r.RetryOnResult(ev.results)) {
		if e.cancel != nil {
			e.cancel()
		}
		gen := e.gen
		e.retry = time.AfterFunc(r.backoff(e.attempt), func() { a.push(asyncEvent[IN, OUT]{e: e, gen: gen, kind: asyncRetryDue}) })
		return nil
	}
	if ev.err != nil {
		return fmt.Errorf("async call of the record at %d (attempt %d): %w", e.ts, e.attempt, ev.err)
	}
	e.done, e.results = true, ev.results
	a.stopCall(e)
	if e.timer != nil {
		e.timer.Stop()
	}
	return nil
}

// stopCall cancels the entry's call context and its pending retry.
func (a *AsyncWait[IN, OUT]) stopCall(e *asyncEntry[IN, OUT]) {
	if e.cancel != nil {
		e.cancel()
		e.cancel = nil
	}
	if e.retry != nil {
		e.retry.Stop()
		e.retry = nil
	}
}

// emitReady emits the completed records the order allows, and the
// watermarks they no longer hold back.
func (a *AsyncWait[IN, OUT]) emitReady() error {
	for len(a.queue) > 0 {
		head := a.queue[0]
		if head.isWM {
			a.popHead()
			if err := a.out.EmitWatermark(head.wm); err != nil {
				return err
			}
			continue
		}
		if a.cfg.Ordered {
			if !head.done {
				return nil
			}
			a.popHead()
			if err := a.emit(head); err != nil {
				return err
			}
			continue
		}
		// Unordered: any completed record before the first watermark.
		kept := a.queue[:0]
		i := 0
		for ; i < len(a.queue) && !a.queue[i].isWM; i++ {
			e := a.queue[i]
			if !e.done {
				kept = append(kept, e)
				continue
			}
			a.inFlight--
			if err := a.emit(e); err != nil {
				return err
			}
		}
		n := len(kept)
		kept = append(kept, a.queue[i:]...)
		clear(a.queue[len(kept):])
		a.queue = kept
		if n > 0 {
			return nil // records still in flight before the next watermark
		}
		if len(a.queue) == 0 {
			return nil
		}
	}
	return nil
}

func (a *AsyncWait[IN, OUT]) popHead() {
	if !a.queue[0].isWM {
		a.inFlight--
	}
	a.queue[0] = nil
	a.queue = a.queue[1:]
}

func (a *AsyncWait[IN, OUT]) emit(e *asyncEntry[IN, OUT]) error {
	for _, r := range e.results {
		if err := a.out.Collect(r, e.ts); err != nil {
			return err
		}
	}
	return nil
}

// ProcessWatermark emits wm at once when nothing is in flight, else queues
// it behind the records before it: no result crosses a watermark.
func (a *AsyncWait[IN, OUT]) ProcessWatermark(wm int64) error {
	if len(a.queue) == 0 {
		return a.out.EmitWatermark(wm)
	}
	a.queue = append(a.queue, &asyncEntry[IN, OUT]{isWM: true, wm: wm})
	return nil
}

// Finish waits for every call in flight and emits the results, as Flink's
// endInput does.
func (a *AsyncWait[IN, OUT]) Finish() error {
	if err := a.handleEvents(); err != nil {
		return err
	}
	for len(a.queue) > 0 {
		if err := a.waitForEvents(); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotState writes the inputs of every record not emitted yet (in
// flight or completed behind one in flight) into operator state: they are
// called again on restore.
func (a *AsyncWait[IN, OUT]) SnapshotState(id int64) ([][]byte, error) {
	if a.st == nil {
		return nil, nil
	}
	ins := make([]TimestampedValue[IN], 0, a.inFlight)
	for _, e := range a.queue {
		if !e.isWM {
			ins = append(ins, TimestampedValue[IN]{Value: e.in, Timestamp: e.ts})
		}
	}
	if err := a.st.Update(ins); err != nil {
		return nil, Wrap(a.ctx, fmt.Errorf("snapshot async inputs for checkpoint %d: %w", id, err))
	}
	return snapshotFunction(a.ctx, a.fn, id)
}

// NotifyCheckpointComplete and NotifyCheckpointAborted pass the
// notifications on to a function that listens for them.
func (a *AsyncWait[IN, OUT]) NotifyCheckpointComplete(id int64) error {
	if l, ok := a.fn.(CheckpointListener); ok {
		return Wrap(a.ctx, l.NotifyCheckpointComplete(id))
	}
	return nil
}

func (a *AsyncWait[IN, OUT]) NotifyCheckpointAborted(id int64) error {
	if l, ok := a.fn.(CheckpointListener); ok {
		return Wrap(a.ctx, l.NotifyCheckpointAborted(id))
	}
	return nil
}

// Close cancels the calls in flight; their late completions are dropped.
func (a *AsyncWait[IN, OUT]) Close() error {
	a.mu.Lock()
	a.closed = true
	a.events = nil
	a.mu.Unlock()
	for _, e := range a.queue {
		if e.isWM {
			continue
		}
		a.stopCall(e)
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	a.queue = nil
	if c, ok := a.fn.(Closer); ok {
		return Wrap(a.ctx, c.Close())
	}
	return nil
}

// Collect and EmitWatermark let the previous operator of a chain call the
// operator directly as its Output.
func (a *AsyncWait[IN, OUT]) Collect(v IN, ts int64) error { return a.ProcessElement(v, ts) }
func (a *AsyncWait[IN, OUT]) EmitWatermark(wm int64) error { return a.ProcessWatermark(wm) }
