package operators

import (
	"fmt"

	"github.com/sluicehq/sluice/state"
)

// TriggerResult is what a trigger decides for a window, as Flink's
// TriggerResult: whether to fire it (evaluate the window function and emit
// its result) and whether to purge its contents (the window's metadata,
// its trigger state and timers, stays until its cleanup time).
type TriggerResult uint8

const (
	// Continue does nothing.
	Continue TriggerResult = 0
	// Fire emits the window's result and keeps its contents.
	Fire TriggerResult = 1
	// Purge drops the window's contents without emitting.
	Purge TriggerResult = 2
	// FireAndPurge emits the window's result, then drops its contents.
	FireAndPurge TriggerResult = Fire | Purge
)

// IsFire reports whether the window fires.
func (r TriggerResult) IsFire() bool { return r&Fire != 0 }

// IsPurge reports whether the window's contents are dropped.
func (r TriggerResult) IsPurge() bool { return r&Purge != 0 }

func (r TriggerResult) String() string {
	return [...]string{"CONTINUE", "FIRE", "PURGE", "FIRE_AND_PURGE"}[r&3]
}

// Trigger decides when a window fires, as Flink's Trigger. The window
// operator calls it on the task goroutine with the window's key set: for
// every record added to a window (OnElement), for every timer of a window
// (OnEventTime, OnProcessingTime; timers are registered through the
// context and kept in keyed state under the window's namespace), when
// windows merge (OnMerge) and when a window is purged at its cleanup time
// (Clear, which must delete the trigger's timers and state of the window).
//
// A trigger keeps what it needs in keyed state scoped to the window
// (GetTriggerState), never in its own fields: it is shared by every key
// and window of a subtask, and state in keyed state is checkpointed,
// restored and rescaled with the window.
type Trigger[T any] interface {
	OnElement(v T, ts int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error)
	OnEventTime(time int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error)
	OnProcessingTime(time int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error)
	// CanMerge reports whether the trigger supports merging (session)
	// windows; OnMerge is only called if it does.
	CanMerge() bool
	// OnMerge is called when windows merged into w: the trigger merges its
	// state (MergeTriggerState) and registers the timers w needs. The
	// merged windows are cleared (Clear) afterwards.
	OnMerge(w TimeWindow, ctx *TriggerContext) error
	Clear(w TimeWindow, ctx *TriggerContext) error
	String() string
}

// triggerTimers is what a trigger context needs of the window operator's
// timer service (*TimerService[K] implements it).
type triggerTimers interface {
	CurrentWatermark() int64
	CurrentProcessingTime() int64
	register(d TimeDomain, ns string, ts int64) error
	delete(d TimeDomain, ns string, ts int64) error
}

// TriggerContext is what a trigger sees: the clocks, the timers and keyed
// state of the current key and window, as Flink's Trigger.TriggerContext
// (and OnMergeContext in OnMerge).
type TriggerContext struct {
	timers  triggerTimers
	backend state.KeyedBackend
	window  TimeWindow
	ns      []byte
	// merged are the namespaces of the windows merged into window (in
	// OnMerge only).
	merged  [][]byte
	handles map[string]state.KeyedState
}

// setWindow scopes the context to w.
func (c *TriggerContext) setWindow(w TimeWindow) {
	c.window = w
	c.ns = AppendWindowNamespace(c.ns[:0], w)
	c.merged = c.merged[:0]
}

// CurrentWatermark returns the operator's event time.
func (c *TriggerContext) CurrentWatermark() int64 { return c.timers.CurrentWatermark() }

// CurrentProcessingTime returns the wall clock in Unix milliseconds.
func (c *TriggerContext) CurrentProcessingTime() int64 { return c.timers.CurrentProcessingTime() }

// RegisterEventTimeTimer asks for OnEventTime of the current window and
// key once the watermark reaches ts.
func (c *TriggerContext) RegisterEventTimeTimer(ts int64) error {
	return c.timers.register(EventTime, string(c.ns), ts)
}

// RegisterProcessingTimeTimer asks for OnProcessingTime of the current
// window and key once the wall clock reaches ts.
func (c *TriggerContext) RegisterProcessingTimeTimer(ts int64) error {
	return c.timers.register(ProcessingTime, string(c.ns), ts)
}

// DeleteEventTimeTimer removes the window's event-time timer at ts.
func (c *TriggerContext) DeleteEventTimeTimer(ts int64) error {
	return c.timers.delete(EventTime, string(c.ns), ts)
}

// DeleteProcessingTimeTimer removes the window's processing-time timer at
// ts.
func (c *TriggerContext) DeleteProcessingTimeTimer(ts int64) error {
	return c.timers.delete(ProcessingTime, string(c.ns), ts)
}

// KeyedState returns the operator's keyed state backend, its current key
// set to the window's key.
func (c *TriggerContext) KeyedState() state.KeyedBackend { return c.backend }

// WindowNamespace returns the namespace of the current window (valid
// during the call only).
func (c *TriggerContext) WindowNamespace() []byte { return c.ns }

// GetTriggerState returns the handle of the keyed state d describes,
// scoped to the current key and window, as Flink's
// TriggerContext.getPartitionedState: H is the handle's type
// (state.ReducingState[int64] for a ReducingStateDescriptor[int64]).
// Handles are cached per state name.
func GetTriggerState[H state.KeyedState](ctx *TriggerContext, d state.Descriptor) (H, error) {
	var zero H
	m, err := d.Meta()
	if err != nil {
		return zero, err
	}
	h, ok := ctx.handles[m.Name]
	if !ok {
		if h, err = createKeyedState(ctx.backend, d); err != nil {
			return zero, fmt.Errorf("trigger state %q: %w", m.Name, err)
		}
		if ctx.handles == nil {
			ctx.handles = map[string]state.KeyedState{}
		}
		ctx.handles[m.Name] = h
	}
	typed, ok := h.(H)
	if !ok {
		return zero, fmt.Errorf("trigger state %q is %T, not %T: %w", m.Name, h, zero, state.ErrIncompatibleState)
	}
	typed.SetNamespace(ctx.ns)
	return typed, nil
}

func createKeyedState(b state.KeyedBackend, d state.Descriptor) (state.KeyedState, error) {
	h, err := b.CreateState(d)
	if err != nil {
		return nil, err
	}
	ks, ok := h.(state.KeyedState)
	if !ok {
		return nil, fmt.Errorf("backend returned %T, not a keyed state: %w", h, state.ErrIncompatibleState)
	}
	return ks, nil
}

// MergeTriggerState merges the state d describes of the windows merged
// into the current one (in OnMerge), as Flink's
// OnMergeContext.mergePartitionedState. The state must be a merging one
// (list, reducing, aggregating).
func MergeTriggerState(ctx *TriggerContext, d state.Descriptor) error {
	h, err := GetTriggerState[state.KeyedState](ctx, d)
	if err != nil {
		return err
	}
	ms, ok := h.(state.MergingState)
	if !ok {
		return fmt.Errorf("trigger state %T does not merge: %w", h, state.ErrIncompatibleState)
	}
	if len(ctx.merged) == 0 {
		return nil
	}
	return ms.MergeNamespaces(ctx.ns, ctx.merged)
}

// EventTimeTrigger fires a window when the watermark passes its end, and
// at once for every record added later within the allowed lateness: the
// default trigger of event-time assigners (Flink's EventTimeTrigger).
type EventTimeTrigger[T any] struct{}

func (EventTimeTrigger[T]) OnElement(_ T, _ int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error) {
	if w.MaxTimestamp() <= ctx.CurrentWatermark() {
		return Fire, nil // late but allowed: fire again at once
	}
	return Continue, ctx.RegisterEventTimeTimer(w.MaxTimestamp())
}

func (EventTimeTrigger[T]) OnEventTime(time int64, w TimeWindow, _ *TriggerContext) (TriggerResult, error) {
	if time == w.MaxTimestamp() {
		return Fire, nil
	}
	return Continue, nil
}

func (EventTimeTrigger[T]) OnProcessingTime(int64, TimeWindow, *TriggerContext) (TriggerResult, error) {
	return Continue, nil
}

func (EventTimeTrigger[T]) CanMerge() bool { return true }

func (EventTimeTrigger[T]) OnMerge(w TimeWindow, ctx *TriggerContext) error {
	if w.MaxTimestamp() > ctx.CurrentWatermark() {
		return ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	}
	return nil
}

func (EventTimeTrigger[T]) Clear(w TimeWindow, ctx *TriggerContext) error {
	return ctx.DeleteEventTimeTimer(w.MaxTimestamp())
}

func (EventTimeTrigger[T]) String() string { return "EventTimeTrigger()" }

// ProcessingTimeTrigger fires a window when the wall clock passes its end:
// the default trigger of processing-time assigners (Flink's
// ProcessingTimeTrigger).
type ProcessingTimeTrigger[T any] struct{}

func (ProcessingTimeTrigger[T]) OnElement(_ T, _ int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error) {
	return Continue, ctx.RegisterProcessingTimeTimer(w.MaxTimestamp())
}

func (ProcessingTimeTrigger[T]) OnEventTime(int64, TimeWindow, *TriggerContext) (TriggerResult, error) {
	return Continue, nil
}

func (ProcessingTimeTrigger[T]) OnProcessingTime(int64, TimeWindow, *TriggerContext) (TriggerResult, error) {
	return Fire, nil
}

func (ProcessingTimeTrigger[T]) CanMerge() bool { return true }

func (ProcessingTimeTrigger[T]) OnMerge(w TimeWindow, ctx *TriggerContext) error {
	if w.MaxTimestamp() > ctx.CurrentProcessingTime() {
		return ctx.RegisterProcessingTimeTimer(w.MaxTimestamp())
	}
	return nil
}

func (ProcessingTimeTrigger[T]) Clear(w TimeWindow, ctx *TriggerContext) error {
	return ctx.DeleteProcessingTimeTimer(w.MaxTimestamp())
}

func (ProcessingTimeTrigger[T]) String() string { return "ProcessingTimeTrigger()" }

// NeverTrigger never fires: the default trigger of GlobalWindows (Flink's
// GlobalWindows.NeverTrigger); give such windows a trigger.
type NeverTrigger[T any] struct{}

func (NeverTrigger[T]) OnElement(T, int64, TimeWindow, *TriggerContext) (TriggerResult, error) {
	return Continue, nil
}
func (NeverTrigger[T]) OnEventTime(int64, TimeWindow, *TriggerContext) (TriggerResult, error) {
	return Continue, nil
}
func (NeverTrigger[T]) OnProcessingTime(int64, TimeWindow, *TriggerContext) (TriggerResult, error) {
	return Continue, nil
}
func (NeverTrigger[T]) CanMerge() bool                            { return true }
func (NeverTrigger[T]) OnMerge(TimeWindow, *TriggerContext) error { return nil }
func (NeverTrigger[T]) Clear(TimeWindow, *TriggerContext) error   { return nil }
func (NeverTrigger[T]) String() string                            { return "NeverTrigger()" }

// countStateName is the keyed state of CountTrigger (per window).
const countStateName = "count"

func sumInt64(a, b int64) int64 { return a + b }

func minInt64(a, b int64) int64 { return min(a, b) }

// CountTrigger fires a window every time it received MaxCount more
// records (Flink's CountTrigger.of). The count is kept in keyed state per
// window, so it survives a restore; it does not purge: wrap it in
// PurgingTrigger for tumbling counts.
type CountTrigger[T any] struct {
	MaxCount int64
}

func (t CountTrigger[T]) desc() state.ReducingStateDescriptor[int64] {
	return state.ReducingStateDescriptor[int64]{Name: countStateName, Reduce: sumInt64}
}

func (t CountTrigger[T]) OnElement(_ T, _ int64, _ TimeWindow, ctx *TriggerContext) (TriggerResult, error) {
	c, err := GetTriggerState[state.ReducingState[int64]](ctx, t.desc())
	if err != nil {
		return Continue, err
	}
	if err := c.Add(1); err != nil {
		return Continue, err
	}
	n, _, err := c.Get()
	if err != nil {
		return Continue, err
	}
	if n >= t.MaxCount {
		return Fire, c.Clear()
	}
	return Continue, nil
}

func (CountTrigger[T]) OnEventTime(int64, TimeWindow, *TriggerContext) (TriggerResult, error) {
	return Continue, nil
}

func (CountTrigger[T]) OnProcessingTime(int64, TimeWindow, *TriggerContext) (TriggerResult, error) {
	return Continue, nil
}

func (CountTrigger[T]) CanMerge() bool { return true }

func (t CountTrigger[T]) OnMerge(_ TimeWindow, ctx *TriggerContext) error {
	return MergeTriggerState(ctx, t.desc())
}

func (t CountTrigger[T]) Clear(_ TimeWindow, ctx *TriggerContext) error {
	c, err := GetTriggerState[state.ReducingState[int64]](ctx, t.desc())
	if err != nil {
		return err
	}
	return c.Clear()
}

func (t CountTrigger[T]) String() string { return fmt.Sprintf("CountTrigger(%d)", t.MaxCount) }

// fireTimeStateName is the keyed state of the continuous triggers: the
// next firing time of the window.
const fireTimeStateName = "fire-time"

func fireTimeDesc() state.ReducingStateDescriptor[int64] {
	return state.ReducingStateDescriptor[int64]{Name: fireTimeStateName, Reduce: minInt64}
}

// ContinuousEventTimeTrigger fires a window every Interval ms of event
// time (at the multiples of Interval the watermark passes) and when the
// watermark passes its end (Flink's ContinuousEventTimeTrigger.of).
type ContinuousEventTimeTrigger[T any] struct {
	Interval int64
}

func (t ContinuousEventTimeTrigger[T]) OnElement(_ T, ts int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error) {
	if w.MaxTimestamp() <= ctx.CurrentWatermark() {
		return Fire, nil
	}
	if err := ctx.RegisterEventTimeTimer(w.MaxTimestamp()); err != nil {
		return Continue, err
	}
	ft, err := GetTriggerState[state.ReducingState[int64]](ctx, fireTimeDesc())
	if err != nil {
		return Continue, err
	}
	if _, ok, err := ft.Get(); err != nil || ok {
		return Continue, err
	}
	if ts == NoTimestamp {
		return Continue, fmt.Errorf("%s: %w", t, ErrNoTimestamp)
	}
	return Continue, registerNextFire(ctx, ft, w, WindowStart(ts, 0, t.Interval), EventTime)
}

// registerNextFire keeps and registers the next firing time: at, but not
// after the window's end.
func registerNextFire(ctx *TriggerContext, ft state.ReducingState[int64], w TimeWindow, at int64, d TimeDomain) error {
	at = min(at, w.MaxTimestamp())
	if err := ft.Add(at); err != nil {
		return err
	}
	if d == EventTime {
		return ctx.RegisterEventTimeTimer(at)
	}
	return ctx.RegisterProcessingTimeTimer(at)
}

func (t ContinuousEventTimeTrigger[T]) OnEventTime(time int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error) {
	if time == w.MaxTimestamp() {
		return Fire, nil
	}
	ft, err := GetTriggerState[state.ReducingState[int64]](ctx, fireTimeDesc())
	if err != nil {
		return Continue, err
	}
	next, ok, err := ft.Get()
	if err != nil || !ok || next != time {
		return Continue, err
	}
	if err := ft.Clear(); err != nil {
		return Continue, err
	}
	return Fire, registerNextFire(ctx, ft, w, addSaturating(time, t.Interval), EventTime)
}

func (ContinuousEventTimeTrigger[T]) OnProcessingTime(int64, TimeWindow, *TriggerContext) (TriggerResult, error) {
	return Continue, nil
}

func (ContinuousEventTimeTrigger[T]) CanMerge() bool { return true }

func (ContinuousEventTimeTrigger[T]) OnMerge(w TimeWindow, ctx *TriggerContext) error {
	return mergeNextFire(ctx, EventTime)
}

func mergeNextFire(ctx *TriggerContext, d TimeDomain) error {
	if err := MergeTriggerState(ctx, fireTimeDesc()); err != nil {
		return err
	}
	ft, err := GetTriggerState[state.ReducingState[int64]](ctx, fireTimeDesc())
	if err != nil {
		return err
	}
	next, ok, err := ft.Get()
	if err != nil || !ok {
		return err
	}
	if d == EventTime {
		return ctx.RegisterEventTimeTimer(next)
	}
	return ctx.RegisterProcessingTimeTimer(next)
}

func (ContinuousEventTimeTrigger[T]) Clear(w TimeWindow, ctx *TriggerContext) error {
	return clearNextFire(ctx, EventTime)
}

func clearNextFire(ctx *TriggerContext, d TimeDomain) error {
	ft, err := GetTriggerState[state.ReducingState[int64]](ctx, fireTimeDesc())
	if err != nil {
		return err
	}
	next, ok, err := ft.Get()
	if err != nil || !ok {
		return err
	}
	if d == EventTime {
		err = ctx.DeleteEventTimeTimer(next)
	} else {
		err = ctx.DeleteProcessingTimeTimer(next)
	}
	if err != nil {
		return err
	}
	return ft.Clear()
}

func (t ContinuousEventTimeTrigger[T]) String() string {
	return fmt.Sprintf("ContinuousEventTimeTrigger(%v)", ms(t.Interval))
}

// ContinuousProcessingTimeTrigger fires a window every Interval ms of
// processing time, at the multiples of Interval (Flink's
// ContinuousProcessingTimeTrigger.of).
type ContinuousProcessingTimeTrigger[T any] struct {
	Interval int64
}

func (t ContinuousProcessingTimeTrigger[T]) OnElement(_ T, _ int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error) {
	ft, err := GetTriggerState[state.ReducingState[int64]](ctx, fireTimeDesc())
	if err != nil {
		return Continue, err
	}
	if _, ok, err := ft.Get(); err != nil || ok {
		return Continue, err
	}
	now := ctx.CurrentProcessingTime()
	return Continue, registerNextFire(ctx, ft, w, WindowStart(now, 0, t.Interval), ProcessingTime)
}

func (ContinuousProcessingTimeTrigger[T]) OnEventTime(int64, TimeWindow, *TriggerContext) (TriggerResult, error) {
	return Continue, nil
}

func (t ContinuousProcessingTimeTrigger[T]) OnProcessingTime(time int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error) {
	ft, err := GetTriggerState[state.ReducingState[int64]](ctx, fireTimeDesc())
	if err != nil {
		return Continue, err
	}
	next, ok, err := ft.Get()
	if err != nil || !ok || next != time {
		return Continue, err
	}
	if err := ft.Clear(); err != nil {
		return Continue, err
	}
	return Fire, registerNextFire(ctx, ft, w, addSaturating(time, t.Interval), ProcessingTime)
}

func (ContinuousProcessingTimeTrigger[T]) CanMerge() bool { return true }

func (ContinuousProcessingTimeTrigger[T]) OnMerge(_ TimeWindow, ctx *TriggerContext) error {
	return mergeNextFire(ctx, ProcessingTime)
}

func (ContinuousProcessingTimeTrigger[T]) Clear(_ TimeWindow, ctx *TriggerContext) error {
	return clearNextFire(ctx, ProcessingTime)
}

func (t ContinuousProcessingTimeTrigger[T]) String() string {
	return fmt.Sprintf("ContinuousProcessingTimeTrigger(%v)", ms(t.Interval))
}

// PurgingTrigger makes every firing of Nested also purge the window's
// contents (Flink's PurgingTrigger.of).
type PurgingTrigger[T any] struct {
	Nested Trigger[T]
}

func purging(r TriggerResult, err error) (TriggerResult, error) {
	if r.IsFire() {
		return FireAndPurge, err
	}
	return r, err
}

func (t PurgingTrigger[T]) OnElement(v T, ts int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error) {
	return purging(t.Nested.OnElement(v, ts, w, ctx))
}

func (t PurgingTrigger[T]) OnEventTime(time int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error) {
	return purging(t.Nested.OnEventTime(time, w, ctx))
}

func (t PurgingTrigger[T]) OnProcessingTime(time int64, w TimeWindow, ctx *TriggerContext) (TriggerResult, error) {
	return purging(t.Nested.OnProcessingTime(time, w, ctx))
}

func (t PurgingTrigger[T]) CanMerge() bool { return t.Nested.CanMerge() }

func (t PurgingTrigger[T]) OnMerge(w TimeWindow, ctx *TriggerContext) error {
	return t.Nested.OnMerge(w, ctx)
}

func (t PurgingTrigger[T]) Clear(w TimeWindow, ctx *TriggerContext) error {
	return t.Nested.Clear(w, ctx)
}

func (t PurgingTrigger[T]) String() string { return fmt.Sprintf("PurgingTrigger(%s)", t.Nested) }

// DefaultTrigger is the trigger a window operator uses when none is set:
// NeverTrigger for GlobalWindows, EventTimeTrigger for event-time
// assigners, ProcessingTimeTrigger for processing-time ones.
func DefaultTrigger[T any](a WindowAssigner) Trigger[T] {
	switch {
	case isGlobal(a):
		return NeverTrigger[T]{}
	case a.IsEventTime():
		return EventTimeTrigger[T]{}
	default:
		return ProcessingTimeTrigger[T]{}
	}
}

// ValidateTrigger reports a trigger that cannot run: missing, a count or
// interval that is not positive, or one that cannot merge on a merging
// assigner.
func ValidateTrigger[T any](t Trigger[T], a WindowAssigner) error {
	switch tt := t.(type) {
	case nil:
		return fmt.Errorf("no trigger: %w", ErrInvalidWindow)
	case CountTrigger[T]:
		if tt.MaxCount <= 0 {
			return fmt.Errorf("%s: the count must be positive: %w", tt, ErrInvalidWindow)
		}
	case ContinuousEventTimeTrigger[T]:
		if tt.Interval <= 0 {
			return fmt.Errorf("%s: the interval must be positive: %w", tt, ErrInvalidWindow)
		}
	case ContinuousProcessingTimeTrigger[T]:
		if tt.Interval <= 0 {
			return fmt.Errorf("%s: the interval must be positive: %w", tt, ErrInvalidWindow)
		}
	case PurgingTrigger[T]:
		if tt.Nested == nil {
			return fmt.Errorf("PurgingTrigger without a nested trigger: %w", ErrInvalidWindow)
		}
		return ValidateTrigger(tt.Nested, a)
	}
	if _, merging := a.(MergingWindowAssigner); merging && !t.CanMerge() {
		return fmt.Errorf("%s cannot merge, but %s merges windows: %w", t, a, ErrInvalidWindow)
	}
	return nil
}
