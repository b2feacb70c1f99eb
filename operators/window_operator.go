package operators

import (
	"fmt"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// WindowConfig is what every window operator is built from.
type WindowConfig[K comparable, IN any] struct {
	Assigner WindowAssigner
	KeyOf    func(IN) K
	KeyCodec codec.Codec[K]
	// AllowedLateness (ms, event time only) keeps a window's state for
	// that long after the watermark passed its end: records arriving in
	// that time are added and fire the window again.
	AllowedLateness int64
	// LateDataTag names the side output that receives records too late
	// for every window they belong to; "" drops them.
	LateDataTag string
	// Trigger decides when windows fire (nil: DefaultTrigger of the
	// assigner).
	Trigger Trigger[IN]
	// Evictor removes elements before and after the window function
	// (NewEvictingWindow only).
	Evictor Evictor[IN]
	// BufferLimit bounds the in-memory buffer of event-time session
	// windows with an incremental reduce or aggregate and the default
	// trigger (see WindowOperator): the sessions it holds before it
	// writes them all into keyed state. 0 turns the buffer off: every
	// record reads and writes keyed state. DefaultWindowBufferLimit is
	// what the sluice package sets unless told otherwise.
	BufferLimit int
}

// ProcessWindowFunction is the user function of a window that sees the
// window and all its elements (or the single incremental result when
// combined with a reduce or aggregate function), as Flink's
// ProcessWindowFunction. It may also implement Opener, Closer and
// WindowStateClearer.
type ProcessWindowFunction[K comparable, IN, OUT any] interface {
	Process(ctx *WindowContext[K], elements []IN, out Collector[OUT]) error
}

// WindowStateClearer is implemented by process window functions that keep
// per-window state (under WindowContext.WindowNamespace): Clear is called
// when the window is purged, at its end plus the allowed lateness.
type WindowStateClearer[K comparable] interface {
	Clear(ctx *WindowContext[K]) error
}

// ProcessWindowFunc adapts a plain function to a ProcessWindowFunction.
type ProcessWindowFunc[K comparable, IN, OUT any] func(ctx *WindowContext[K], elements []IN, out Collector[OUT]) error

func (f ProcessWindowFunc[K, IN, OUT]) Process(ctx *WindowContext[K], elements []IN, out Collector[OUT]) error {
	return f(ctx, elements, out)
}

// WindowContext is what a process window function sees: the key, the
// window, the clocks, and the operator's state and side outputs.
type WindowContext[K comparable] struct {
	key    K
	window TimeWindow
	ns     []byte
	timers *TimerService[K]
	rt     *Context
	sides  *SideOutputs
}

// Key returns the key of the window.
func (c *WindowContext[K]) Key() K { return c.key }

// Window returns the window being fired or cleared.
func (c *WindowContext[K]) Window() TimeWindow { return c.window }

// WindowNamespace returns the state namespace of the window: keyed state
// handles set to it (SetNamespace) hold per-window state, which
// WindowStateClearer.Clear must clear. As in Flink, per-window state does
// not work with merging (session) windows: it is neither merged nor
// cleared for the windows a merge replaces. The bytes are valid during the
// call only.
func (c *WindowContext[K]) WindowNamespace() []byte {
	c.ns = AppendWindowNamespace(c.ns[:0], c.window)
	return c.ns
}

// CurrentWatermark returns the operator's event time.
func (c *WindowContext[K]) CurrentWatermark() int64 { return c.timers.CurrentWatermark() }

// CurrentProcessingTime returns the wall clock in Unix milliseconds.
func (c *WindowContext[K]) CurrentProcessingTime() int64 { return c.timers.CurrentProcessingTime() }

// Runtime returns the operator's runtime context (its keyed state backend
// is where per-key and per-window state comes from).
func (c *WindowContext[K]) Runtime() *Context { return c.rt }

// SideOutputs returns the operator's side outputs, for EmitSide; records
// emitted there carry the window's max timestamp.
func (c *WindowContext[K]) SideOutputs() *SideOutputs { return c.sides }

// windowContents is the keyed state that holds the contents of windows,
// namespaced by (state) window: a ReducingState, an AggregatingState or a
// ListState.
type windowContents[IN, V any] interface {
	SetNamespace(ns []byte)
	Add(v IN) error
	Get() (V, bool, error)
	Clear() error
	MergeNamespaces(target []byte, sources [][]byte) error
}

// windowContentsName is the keyed state holding the window contents.
const windowContentsName = "window-contents"

// mergingSetName is the keyed value state holding each key's
// merging-window set (windowSetCodec).
const mergingSetName = "merging-windows"

// mergingSetListName is the earlier layout of the merging-window sets: a
// list state of pairs, which a record read and rewrote with two iterator
// scans on RocksDB. A restore of a checkpoint that has it moves its sets
// into mergingSetName at Open (migrateMergingSets).
const mergingSetListName = "merging-window-set"

// WindowOperator runs windows on a keyed stream, as Flink's WindowOperator
// with the default trigger of the assigner's time domain:
//
//   - Event time: a window fires when the watermark reaches its max
//     timestamp (end - 1). A record that arrives later but within the
//     allowed lateness is added and fires the window again at once. At end
//   - allowed lateness - 1 the window's state is purged; a record later
//     than that for all its windows goes to the late-data side output (or
//     is dropped).
//   - Processing time: a window fires when the wall clock reaches its max
//     timestamp, and is purged then; allowed lateness does not apply.
//
// Window contents, each key's merging-window set and the timers live in
// keyed state, so windows survive a restore and a rescale. An emitted
// result carries the window's max timestamp.
//
// Event-time session windows with an incremental reduce or aggregate,
// the default trigger and no evictor combine in memory first
// (WindowConfig.BufferLimit, windowBuffer): a record whose window ends
// after the watermark joins its key's buffered sessions, and a key's
// sessions go into keyed state - added to the merging-window set and
// merged into the window contents as the record-by-record path would
// have put them, with the same timers - when one of them is due at a new
// watermark (before the watermark moves), before any timer of the key
// fires, before a record of the key whose window the watermark has
// passed (which then takes the per-record path), when the buffer is full,
// and before a snapshot (a Context flusher). Nothing fires while a record
// is on time, so the results, their timestamps and their order are
// those of the per-record path; only which namespace holds a window's
// contents may differ.
type WindowOperator[K comparable, IN, V, OUT any] struct {
	cfg      WindowConfig[K, IN]
	merging  MergingWindowAssigner
	event    bool
	keys     keySetter[K]
	contents windowContents[IN, V]
	// newContents registers the contents state at Open.
	newContents func(b state.KeyedBackend) (windowContents[IN, V], error)
	// newBuffer makes the in-memory buffer of session windows over the
	// contents state (nil: the window function cannot combine in
	// memory); buf is it, when the operator buffers (buffers).
	newBuffer func(c windowContents[IN, V], limit int) windowBuffer[K, IN]
	buf       windowBuffer[K, IN]
	// flushKeys and flushSet are scratch of the buffer's flushes; place
	// is the method value of placeSession.
	flushKeys []K
	flushSet  *mergingWindowSet
	place     func(win TimeWindow) error
	// emit hands a fired window's contents to the window function.
	emit func(ctx *WindowContext[K], v V, out Collector[OUT]) error
	// fn is the user's process window function, if any (Opener, Closer,
	// WindowStateClearer, checkpoint hooks).
	fn       any
	out      Output[OUT]
	col      collector[OUT]
	wctx     WindowContext[K]
	timers   *TimerService[K]
	mergeSet state.ValueState[[]windowPair]
	// set is the merging-window set of the current key, loaded by
	// loadMergingSet (its map is reused from record to record). While
	// setHeld, it is what the state holds for key setOf (persisted, and
	// not changed since), so records of that key in a row read it once.
	set     mergingWindowSet
	setOf   K
	setHeld bool
	sides   *SideOutputs
	ctx     *Context

	trigger Trigger[IN]
	tctx    TriggerContext
	// elemTS is the timestamp of the record being added (evicting
	// windows keep it with the element).
	elemTS int64

	windows     []TimeWindow
	nsBuf       []byte
	mergeBufs   [][]byte
	mergeTarget []byte
	lateDropped int64
}

func newWindowOperator[K comparable, IN, V, OUT any](cfg WindowConfig[K, IN], out Output[OUT], fn any,
	contents func(state.KeyedBackend) (windowContents[IN, V], error),
	buffer func(windowContents[IN, V], int) windowBuffer[K, IN],
	emit func(*WindowContext[K], V, Collector[OUT]) error) *WindowOperator[K, IN, V, OUT] {
	w := &WindowOperator[K, IN, V, OUT]{cfg: cfg, keys: keySetter[K]{codec: cfg.KeyCodec}, out: out,
		col: collector[OUT]{out: out}, fn: fn, newContents: contents, newBuffer: buffer, emit: emit}
	w.merging, _ = cfg.Assigner.(MergingWindowAssigner)
	w.event = cfg.Assigner.IsEventTime()
	w.trigger = cfg.Trigger
	if w.trigger == nil {
		w.trigger = DefaultTrigger[IN](cfg.Assigner)
	}
	if !w.event {
		w.cfg.AllowedLateness = 0
	}
	return w
}

func emitValue[K comparable, V any](_ *WindowContext[K], v V, out Collector[V]) error {
	out.Collect(v)
	return nil
}

// NewReduceWindow returns a window operator that reduces each window
// incrementally with reduce (a ReducingState per window) and emits the
// result; vc encodes the reduced value in state.
func NewReduceWindow[K comparable, T any](cfg WindowConfig[K, T], reduce func(acc, v T) (T, error), vc codec.Codec[T], out Output[T]) *WindowOperator[K, T, T, T] {
	return newWindowOperator(cfg, out, nil, reducingContents[T](reduce, vc), reduceBuffer[K](reduce), emitValue[K, T])
}

// NewAggregateWindow returns a window operator that aggregates each window
// incrementally with agg (an AggregatingState per window) and emits its
// result; accCodec encodes the accumulator in state (nil: the default).
func NewAggregateWindow[K comparable, IN, ACC, OUT any](cfg WindowConfig[K, IN], agg state.AggregateFunction[IN, ACC, OUT], accCodec codec.Codec[ACC], out Output[OUT]) *WindowOperator[K, IN, OUT, OUT] {
	return newWindowOperator(cfg, out, nil, aggregatingContents(agg, accCodec), aggregateBuffer[K](agg), emitValue[K, OUT])
}

// NewProcessWindow returns a window operator that buffers each window's
// elements (a ListState per window, elements encoded with elemCodec) and
// hands them to fn when the window fires.
func NewProcessWindow[K comparable, IN, OUT any](cfg WindowConfig[K, IN], fn ProcessWindowFunction[K, IN, OUT], elemCodec codec.Codec[IN], out Output[OUT]) *WindowOperator[K, IN, []IN, OUT] {
	return newWindowOperator(cfg, out, fn, listContents[IN](elemCodec), nil, fn.Process)
}

// NewReduceProcessWindow reduces each window incrementally and hands the
// single result to fn with the window, as Flink's reduce(ReduceFunction,
// ProcessWindowFunction).
func NewReduceProcessWindow[K comparable, T, OUT any](cfg WindowConfig[K, T], reduce func(acc, v T) (T, error), vc codec.Codec[T], fn ProcessWindowFunction[K, T, OUT], out Output[OUT]) *WindowOperator[K, T, T, OUT] {
	return newWindowOperator(cfg, out, fn, reducingContents[T](reduce, vc), reduceBuffer[K](reduce), singleTo(fn))
}

// NewAggregateProcessWindow aggregates each window incrementally and hands
// the aggregate's result to fn with the window, as Flink's
// aggregate(AggregateFunction, ProcessWindowFunction).
func NewAggregateProcessWindow[K comparable, IN, ACC, V, OUT any](cfg WindowConfig[K, IN], agg state.AggregateFunction[IN, ACC, V], accCodec codec.Codec[ACC], fn ProcessWindowFunction[K, V, OUT], out Output[OUT]) *WindowOperator[K, IN, V, OUT] {
	return newWindowOperator(cfg, out, fn, aggregatingContents(agg, accCodec), aggregateBuffer[K](agg), singleTo(fn))
}

func singleTo[K comparable, V, OUT any](fn ProcessWindowFunction[K, V, OUT]) func(*WindowContext[K], V, Collector[OUT]) error {
	return func(ctx *WindowContext[K], v V, out Collector[OUT]) error {
		return fn.Process(ctx, []V{v}, out)
	}
}

// reducingWindow is a ReducingState whose reduce function may fail: the
// failure is returned by the Add or merge that called it.
type reducingWindow[T any] struct {
	state.ReducingState[T]
	err *error
}

func (r reducingWindow[T]) check(err error) error {
	if err != nil {
		return err
	}
	if e := *r.err; e != nil {
		*r.err = nil
		return fmt.Errorf("reduce: %w", e)
	}
	return nil
}

func (r reducingWindow[T]) Add(v T) error { return r.check(r.ReducingState.Add(v)) }
func (r reducingWindow[T]) MergeNamespaces(target []byte, sources [][]byte) error {
	return r.check(r.ReducingState.MergeNamespaces(target, sources))
}

func reducingContents[T any](reduce func(acc, v T) (T, error), vc codec.Codec[T]) func(state.KeyedBackend) (windowContents[T, T], error) {
	return func(b state.KeyedBackend) (windowContents[T, T], error) {
		errp := new(error)
		st, err := state.GetReducingState(b, state.ReducingStateDescriptor[T]{Name: windowContentsName, Codec: vc,
			Reduce: func(acc, v T) T {
				if *errp != nil {
					return acc
				}
				r, err := reduce(acc, v)
				if err != nil {
					*errp = err
					return acc
				}
				return r
			}})
		if err != nil {
			return nil, err
		}
		return reducingWindow[T]{ReducingState: st, err: errp}, nil
	}
}

func aggregatingContents[IN, ACC, OUT any](agg state.AggregateFunction[IN, ACC, OUT], accCodec codec.Codec[ACC]) func(state.KeyedBackend) (windowContents[IN, OUT], error) {
	return func(b state.KeyedBackend) (windowContents[IN, OUT], error) {
		st, err := state.GetAggregatingState(b, state.AggregatingStateDescriptor[aggInput[IN, ACC], ACC, OUT]{
			Name: windowContentsName, Aggregate: accMerging[IN, ACC, OUT]{agg}, AccCodec: accCodec})
		if err != nil {
			return nil, err
		}
		return aggregatingWindow[IN, ACC, OUT]{st}, nil
	}
}

// listWindow is a ListState as window contents: Get reports whether the
// window has elements.
type listWindow[T any] struct {
	state.ListState[T]
}

func (l listWindow[T]) Get() ([]T, bool, error) {
	v, err := l.ListState.Get()
	return v, len(v) > 0, err
}

func listContents[T any](c codec.Codec[T]) func(state.KeyedBackend) (windowContents[T, []T], error) {
	return func(b state.KeyedBackend) (windowContents[T, []T], error) {
		st, err := state.GetListState(b, state.ListStateDescriptor[T]{Name: windowContentsName, Codec: c})
		if err != nil {
			return nil, err
		}
		return listWindow[T]{st}, nil
	}
}

// SetSideOutputs implements SideOutputAcceptor: late records go to the
// side output named by WindowConfig.LateDataTag, and a process window
// function may emit to any.
func (w *WindowOperator[K, IN, V, OUT]) SetSideOutputs(s *SideOutputs) {
	s.ts = &w.col.ts
	w.sides = s
	w.wctx.sides = s
}

// NumLateRecordsDropped counts the late records dropped for want of a
// late-data side output (Flink's numLateRecordsDropped).
func (w *WindowOperator[K, IN, V, OUT]) NumLateRecordsDropped() int64 { return w.lateDropped }

func (w *WindowOperator[K, IN, V, OUT]) Open(ctx *Context) error {
	w.ctx = ctx
	if err := w.cfg.Assigner.Validate(); err != nil {
		return Wrap(ctx, err)
	}
	if err := ValidateTrigger(w.trigger, w.cfg.Assigner); err != nil {
		return Wrap(ctx, err)
	}
	if ctx.KeyedState == nil {
		return Wrap(ctx, fmt.Errorf("window operator needs a keyed state backend"))
	}
	w.keys.open(ctx)
	c, err := w.newContents(ctx.KeyedState)
	if err != nil {
		return Wrap(ctx, fmt.Errorf("window contents state: %w", err))
	}
	w.contents = c
	if w.buffers() {
		// Before the timers' flusher: a flush of the buffer registers
		// timers.
		w.buf = w.newBuffer(c, w.cfg.BufferLimit)
		w.place = w.placeSession
		ctx.flushers = append(ctx.flushers, func() error { return Wrap(ctx, w.flushAll()) })
	}
	if w.merging != nil {
		if w.mergeSet, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[[]windowPair]{Name: mergingSetName, Codec: windowSetCodec{}}); err != nil {
			return Wrap(ctx, fmt.Errorf("merging window set state: %w", err))
		}
		if err := w.migrateMergingSets(ctx.KeyedState); err != nil {
			return Wrap(ctx, err)
		}
	}
	w.timers = newNamespacedTimerService(ctx.ProcessingTime, w.onTimer)
	if err := w.timers.persistIn(ctx, w.keys.set, w.keys.codec); err != nil {
		return Wrap(ctx, err)
	}
	w.wctx.timers, w.wctx.rt = w.timers, ctx
	w.tctx.timers, w.tctx.backend = w.timers, ctx.KeyedState
	if o, ok := w.fn.(Opener); ok {
		if err := o.Open(ctx); err != nil {
			return Wrap(ctx, fmt.Errorf("open: %w", err))
		}
	}
	return nil
}

// setKey makes k the current key of the state backend and the timers.
func (w *WindowOperator[K, IN, V, OUT]) setKey(k K) error {
	if err := w.keys.set(k); err != nil {
		return err
	}
	w.timers.current, w.wctx.key = k, k
	return nil
}

func (w *WindowOperator[K, IN, V, OUT]) ns(win TimeWindow) []byte {
	w.nsBuf = AppendWindowNamespace(w.nsBuf[:0], win)
	return w.nsBuf
}

func timerNS(win TimeWindow) string {
	var b [windowNamespaceLen]byte
	return string(AppendWindowNamespace(b[:0], win))
}

// cleanupTime is when the window's state is purged: end - 1 + allowed
// lateness for event time, end - 1 for processing time.
func (w *WindowOperator[K, IN, V, OUT]) cleanupTime(win TimeWindow) int64 {
	return addSaturating(win.MaxTimestamp(), w.cfg.AllowedLateness)
}

func (w *WindowOperator[K, IN, V, OUT]) isWindowLate(win TimeWindow) bool {
	return w.event && w.cleanupTime(win) <= w.timers.watermark
}

func (w *WindowOperator[K, IN, V, OUT]) isElementLate(ts int64) bool {
	return w.event && addSaturating(ts, w.cfg.AllowedLateness) <= w.timers.watermark
}

func (w *WindowOperator[K, IN, V, OUT]) domain() TimeDomain {
	if w.event {
		return EventTime
	}
	return ProcessingTime
}

// triggerCtx scopes the trigger context to win.
func (w *WindowOperator[K, IN, V, OUT]) triggerCtx(win TimeWindow) *TriggerContext {
	w.tctx.setWindow(win)
	return &w.tctx
}

// triggerClear clears the trigger's timers and state of win.
func (w *WindowOperator[K, IN, V, OUT]) triggerClear(win TimeWindow) error {
	if err := w.trigger.Clear(win, w.triggerCtx(win)); err != nil {
		return fmt.Errorf("%s: clear window %v: %w", w.trigger, win, err)
	}
	return nil
}

func (w *WindowOperator[K, IN, V, OUT]) registerCleanupTimer(win TimeWindow) error {
	t := w.cleanupTime(win)
	if t == MaxWatermark {
		return nil // never: the final watermark fires the window, and the job ends
	}
	return w.timers.register(w.domain(), timerNS(win), t)
}

func (w *WindowOperator[K, IN, V, OUT]) deleteCleanupTimer(win TimeWindow) error {
	t := w.cleanupTime(win)
	if t == MaxWatermark {
		return nil
	}
	return w.timers.delete(w.domain(), timerNS(win), t)
}

func (w *WindowOperator[K, IN, V, OUT]) ProcessElement(v IN, ts int64) error {
	if err := w.processElement(v, ts); err != nil {
		return Wrap(w.ctx, err)
	}
	return nil
}

func (w *WindowOperator[K, IN, V, OUT]) processElement(v IN, ts int64) error {
	if w.buf != nil {
		if done, err := w.buffer(v, ts); done || err != nil {
			return err
		}
	}
	if err := w.setKey(w.cfg.KeyOf(v)); err != nil {
		return err
	}
	w.elemTS = ts
	var now int64
	if !w.event {
		now = w.timers.CurrentProcessingTime()
	}
	windows, err := w.cfg.Assigner.AssignWindows(ts, now, w.windows[:0])
	w.windows = windows
	if err != nil {
		return fmt.Errorf("%s: %w", w.cfg.Assigner, err)
	}
	skipped := true
	if w.merging != nil {
		set, err := w.loadMergingSet(w.wctx.key)
		if err != nil {
			return err
		}
		for _, win := range windows {
			actual, err := set.addWindow(win, w.merging, w.mergeWindows)
			if err != nil {
				return err
			}
			if w.isWindowLate(actual) {
				if err := set.retireWindow(actual); err != nil {
					return err
				}
				continue
			}
			skipped = false
			sw, ok := set.stateWindow(actual)
			if !ok {
				return fmt.Errorf("window %v has no state window: %w", actual, ErrInvalidWindow)
			}
			if err := w.addAndTrigger(v, ts, actual, sw); err != nil {
				return err
			}
		}
		if err := w.persistMergingSet(set); err != nil {
			return err
		}
		w.setOf, w.setHeld = w.wctx.key, true
	} else {
		for _, win := range windows {
			if w.isWindowLate(win) {
				continue
			}
			skipped = false
			if err := w.addAndTrigger(v, ts, win, win); err != nil {
				return err
			}
		}
	}
	if skipped && w.isElementLate(ts) {
		if w.cfg.LateDataTag == "" || w.sides == nil {
			w.lateDropped++
			return nil
		}
		w.col.ts = ts
		EmitSide(w.sides, w.cfg.LateDataTag, v)
		return w.sides.take()
	}
	return nil
}

// addAndTrigger adds v to the contents of win (kept under stateWindow),
// fires win if the trigger says so, and registers its cleanup timer.
func (w *WindowOperator[K, IN, V, OUT]) addAndTrigger(v IN, ts int64, win, stateWindow TimeWindow) error {
	w.contents.SetNamespace(w.ns(stateWindow))
	if err := w.contents.Add(v); err != nil {
		return fmt.Errorf("add to window %v: %w", win, err)
	}
	res, err := w.trigger.OnElement(v, ts, win, w.triggerCtx(win))
	if err != nil {
		return fmt.Errorf("%s: window %v: %w", w.trigger, win, err)
	}
	if err := w.apply(win, res); err != nil {
		return err
	}
	return w.registerCleanupTimer(win)
}

// apply carries out a trigger's result for win, whose contents state is
// set to its state window.
func (w *WindowOperator[K, IN, V, OUT]) apply(win TimeWindow, res TriggerResult) error {
	if res.IsFire() {
		if err := w.fire(win); err != nil {
			return err
		}
	}
	if res.IsPurge() {
		if err := w.contents.Clear(); err != nil {
			return fmt.Errorf("purge window %v: %w", win, err)
		}
	}
	return nil
}

// mergeWindows is the merging-window set's callback: the timers of the
// merged windows go, the merged window's timer comes, and the contents of
// the merged state windows are merged into the result's state window.
func (w *WindowOperator[K, IN, V, OUT]) mergeWindows(result TimeWindow, merged []TimeWindow, stateResult TimeWindow, mergedState []TimeWindow) error {
	if w.event && w.cleanupTime(result) <= w.timers.watermark {
		return fmt.Errorf("merging made event-time window %v end before the watermark %d: %w", result, w.timers.watermark, ErrInvalidWindow)
	}
	if !w.event && result.MaxTimestamp() <= w.timers.CurrentProcessingTime() {
		return fmt.Errorf("merging made processing-time window %v end before the current processing time: %w", result, ErrInvalidWindow)
	}
	tctx := w.triggerCtx(result)
	for _, m := range merged {
		if m != result {
			tctx.merged = appendNamespaceReusing(tctx.merged, m)
		}
	}
	if err := w.trigger.OnMerge(result, tctx); err != nil {
		return fmt.Errorf("%s: merge into window %v: %w", w.trigger, result, err)
	}
	for _, m := range merged {
		if m == result {
			continue
		}
		if err := w.triggerClear(m); err != nil {
			return err
		}
		if err := w.deleteCleanupTimer(m); err != nil {
			return err
		}
	}
	if len(mergedState) == 0 {
		return nil
	}
	w.mergeBufs = w.mergeBufs[:0]
	for _, sw := range mergedState {
		w.mergeBufs = appendNamespaceReusing(w.mergeBufs, sw)
	}
	w.mergeTarget = AppendWindowNamespace(w.mergeTarget[:0], stateResult)
	if err := w.contents.MergeNamespaces(w.mergeTarget, w.mergeBufs); err != nil {
		return fmt.Errorf("merge windows %v into %v: %w", mergedState, result, err)
	}
	return nil
}

// appendNamespaceReusing appends the namespace of win to list, reusing
// the bytes of an entry a reset of list left past its length.
func appendNamespaceReusing(list [][]byte, win TimeWindow) [][]byte {
	if n := len(list); n < cap(list) {
		list = list[:n+1]
		list[n] = AppendWindowNamespace(list[n][:0], win)
		return list
	}
	return append(list, AppendWindowNamespace(nil, win))
}

// loadMergingSet returns the merging-window set of key k, the current
// key: the one held if it is k's (see setHeld), else read from state. The
// caller changes it, so it is no longer held until the caller has
// persisted it and says so.
func (w *WindowOperator[K, IN, V, OUT]) loadMergingSet(k K) (*mergingWindowSet, error) {
	if w.setHeld && w.setOf == k {
		w.setHeld = false
		return &w.set, nil
	}
	w.setHeld = false
	pairs, _, err := w.mergeSet.Value()
	if err != nil {
		return nil, fmt.Errorf("read merging window set: %w", err)
	}
	w.set.reset(pairs)
	return &w.set, nil
}

// persistMergingSet writes the current key's merging-window set if it
// changed; an empty set deletes the key's entry.
func (w *WindowOperator[K, IN, V, OUT]) persistMergingSet(set *mergingWindowSet) error {
	if !set.dirty {
		return nil
	}
	var err error
	if len(set.mapping) == 0 {
		err = w.mergeSet.Clear()
	} else {
		err = w.mergeSet.Update(set.pairs())
	}
	if err != nil {
		return fmt.Errorf("write merging window set: %w", err)
	}
	set.dirty = false
	return nil
}

// migrateMergingSets moves the merging-window sets of a restored
// checkpoint written in the earlier layout (a list state of pairs,
// mergingSetListName) into the value state, key by key, and empties the
// list. A backend that cannot tell its restored states has nothing to
// migrate from: both built-in backends can.
func (w *WindowOperator[K, IN, V, OUT]) migrateMergingSets(b state.KeyedBackend) error {
	rs, ok := b.(state.RestoredStates)
	if !ok {
		return nil
	}
	if _, ok := rs.RestoredState(mergingSetListName); !ok {
		return nil
	}
	legacy, err := state.GetListState(b, state.ListStateDescriptor[windowPair]{Name: mergingSetListName, Codec: windowPairCodec{}})
	if err != nil {
		return fmt.Errorf("merging window sets of the earlier layout (list state %q): %w", mergingSetListName, err)
	}
	type keyAt struct {
		key []byte
		kg  int
	}
	var keys []keyAt
	if err := b.Keys(mergingSetListName, nil, func(k []byte, kg int) error {
		keys = append(keys, keyAt{append([]byte(nil), k...), kg})
		return nil
	}); err != nil {
		return fmt.Errorf("list the merging window sets of state %q: %w", mergingSetListName, err)
	}
	for _, k := range keys {
		b.SetCurrentKey(k.key, k.kg)
		pairs, err := legacy.Get()
		if err != nil {
			return fmt.Errorf("read merging window set of state %q: %w", mergingSetListName, err)
		}
		if err := w.mergeSet.Update(pairs); err != nil {
			return fmt.Errorf("write merging window set: %w", err)
		}
		if err := legacy.Clear(); err != nil {
			return fmt.Errorf("clear merging window set of state %q: %w", mergingSetListName, err)
		}
	}
	if len(keys) > 0 && w.ctx.Logger != nil {
		w.ctx.Logger.Info("moved the merging window sets of a checkpoint's earlier layout into the value state",
			"keys", len(keys), "from", mergingSetListName, "to", mergingSetName)
	}
	return nil
}

// fire emits the contents of win (the contents state is set to its state
// window) through the window function.
func (w *WindowOperator[K, IN, V, OUT]) fire(win TimeWindow) error {
	v, ok, err := w.contents.Get()
	if err != nil {
		return fmt.Errorf("read window %v: %w", win, err)
	}
	if !ok {
		return nil
	}
	w.wctx.window = win
	w.col.ts = win.MaxTimestamp()
	err = w.emit(&w.wctx, v, &w.col)
	if cerr := w.col.take(); cerr != nil {
		return cerr
	}
	if serr := w.sides.take(); serr != nil {
		return serr
	}
	if err != nil {
		return fmt.Errorf("window %v: %w", win, err)
	}
	return nil
}

// onTimer is the timer service's callback: ns is the encoded window.
func (w *WindowOperator[K, IN, V, OUT]) onTimer(key K, ns string, ts int64, d TimeDomain) error {
	if err := w.onTimerErr(key, ns, ts, d); err != nil {
		return Wrap(w.ctx, fmt.Errorf("on %s timer at %d: %w", d, ts, err))
	}
	return nil
}

func (w *WindowOperator[K, IN, V, OUT]) onTimerErr(key K, ns string, ts int64, d TimeDomain) error {
	if w.buf != nil && w.buf.has(key) {
		// A buffered session of the key may merge with win: it goes
		// into state first, as it would have at its record.
		if err := w.flushKey(key); err != nil {
			return err
		}
	}
	if err := w.setKey(key); err != nil {
		return err
	}
	win, err := DecodeWindowNamespace([]byte(ns))
	if err != nil {
		return err
	}
	var set *mergingWindowSet
	if w.merging != nil {
		if set, err = w.loadMergingSet(key); err != nil {
			return err
		}
		sw, ok := set.stateWindow(win)
		if !ok {
			return nil // merged away; its timers went with it
		}
		w.contents.SetNamespace(w.ns(sw))
	} else {
		w.contents.SetNamespace(w.ns(win))
	}
	var res TriggerResult
	if d == EventTime {
		res, err = w.trigger.OnEventTime(ts, win, w.triggerCtx(win))
	} else {
		res, err = w.trigger.OnProcessingTime(ts, win, w.triggerCtx(win))
	}
	if err != nil {
		return fmt.Errorf("%s: window %v: %w", w.trigger, win, err)
	}
	if err := w.apply(win, res); err != nil {
		return err
	}
	if d == w.domain() && ts == w.cleanupTime(win) {
		if err := w.clearAllState(win, set); err != nil {
			return err
		}
	}
	if set != nil {
		if err := w.persistMergingSet(set); err != nil {
			return err
		}
		w.setOf, w.setHeld = key, true
	}
	return nil
}

// clearAllState purges win: its contents, its timer, the user's
// per-window state, and its entry of the merging-window set.
func (w *WindowOperator[K, IN, V, OUT]) clearAllState(win TimeWindow, set *mergingWindowSet) error {
	if err := w.contents.Clear(); err != nil {
		return fmt.Errorf("clear window %v: %w", win, err)
	}
	if err := w.triggerClear(win); err != nil {
		return err
	}
	if c, ok := w.fn.(WindowStateClearer[K]); ok {
		w.wctx.window = win
		if err := c.Clear(&w.wctx); err != nil {
			return fmt.Errorf("clear window %v: %w", win, err)
		}
	}
	if set != nil {
		return set.retireWindow(win)
	}
	return nil
}

func (w *WindowOperator[K, IN, V, OUT]) ProcessWatermark(wm int64) error {
	if w.buf != nil && wm >= w.buf.due() {
		// The sessions due go into state before the watermark moves, as
		// their records did before it came.
		if err := w.flushDue(wm); err != nil {
			return Wrap(w.ctx, err)
		}
	}
	if err := w.timers.advanceWatermark(wm); err != nil {
		return err
	}
	if err := w.sides.emitWatermark(wm); err != nil {
		return err
	}
	return w.out.EmitWatermark(wm)
}

// Finish quiesces the processing-time timers: the final watermark has
// fired every event-time window, and processing-time windows not yet due
// are dropped at the end of input, as in Flink.
func (w *WindowOperator[K, IN, V, OUT]) Finish() error {
	if w.timers != nil {
		w.timers.quiesce()
	}
	return nil
}

func (w *WindowOperator[K, IN, V, OUT]) Close() error {
	if w.timers != nil {
		w.timers.close()
	}
	if c, ok := w.fn.(Closer); ok {
		return Wrap(w.ctx, c.Close())
	}
	return nil
}

// SnapshotState lets a process window function store what it keeps
// outside keyed state (FunctionSnapshotter).
func (w *WindowOperator[K, IN, V, OUT]) SnapshotState(id int64) ([][]byte, error) {
	return snapshotFunction(w.ctx, w.fn, id)
}

// NotifyCheckpointComplete and NotifyCheckpointAborted pass the
// notifications on to a process window function that listens for them.
func (w *WindowOperator[K, IN, V, OUT]) NotifyCheckpointComplete(id int64) error {
	if l, ok := w.fn.(CheckpointListener); ok {
		return Wrap(w.ctx, l.NotifyCheckpointComplete(id))
	}
	return nil
}

func (w *WindowOperator[K, IN, V, OUT]) NotifyCheckpointAborted(id int64) error {
	if l, ok := w.fn.(CheckpointListener); ok {
		return Wrap(w.ctx, l.NotifyCheckpointAborted(id))
	}
	return nil
}

// Collect and EmitWatermark let the previous operator of a chain call the
// window operator directly as its Output.
func (w *WindowOperator[K, IN, V, OUT]) Collect(v IN, ts int64) error { return w.ProcessElement(v, ts) }
func (w *WindowOperator[K, IN, V, OUT]) EmitWatermark(wm int64) error { return w.ProcessWatermark(wm) }
