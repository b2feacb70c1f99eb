package operators

import "fmt"

// base carries what the stateless operators keep: their context, the
// user's function object when it is a rich function (its Open, Close,
// snapshot and checkpoint hooks), their side outputs and the timestamp of
// the record being processed (that of records emitted to side outputs).
type base struct {
	ctx   *Context
	udf   any
	sides *SideOutputs
	ts    int64
}

func (b *base) Open(ctx *Context) error {
	b.ctx = ctx
	ctx.sides = b.sides
	if o, ok := b.udf.(Opener); ok {
		if err := o.Open(ctx); err != nil {
			return Wrap(ctx, fmt.Errorf("open: %w", err))
		}
	}
	return nil
}

func (b *base) Finish() error { return nil }

func (b *base) Close() error {
	if c, ok := b.udf.(Closer); ok {
		return Wrap(b.ctx, c.Close())
	}
	return nil
}

// AcceptsSideOutputs reports whether the operator runs a function that
// can emit to side outputs: a rich function or a process function, not a
// plain func.
func (b *base) AcceptsSideOutputs() bool { return b.udf != nil }

// SetSideOutputs implements SideOutputAcceptor: a rich function emits to
// them with EmitSide on its Context.
func (b *base) SetSideOutputs(s *SideOutputs) {
	s.ts = &b.ts
	b.sides = s
}

// SnapshotState lets a rich function store what it keeps outside state
// (FunctionSnapshotter).
func (b *base) SnapshotState(id int64) ([][]byte, error) { return snapshotFunction(b.ctx, b.udf, id) }

// NotifyCheckpointComplete and NotifyCheckpointAborted pass the
// notifications on to a rich function that listens for them.
func (b *base) NotifyCheckpointComplete(id int64) error {
	if l, ok := b.udf.(CheckpointListener); ok {
		return Wrap(b.ctx, l.NotifyCheckpointComplete(id))
	}
	return nil
}

func (b *base) NotifyCheckpointAborted(id int64) error {
	if l, ok := b.udf.(CheckpointListener); ok {
		return Wrap(b.ctx, l.NotifyCheckpointAborted(id))
	}
	return nil
}

// done returns the first error of the call: the side outputs', then the
// function's.
func (b *base) done(err error) error {
	if serr := b.sides.take(); serr != nil {
		return serr
	}
	return Wrap(b.ctx, err)
}

// MapFunction is a rich map function (Flink's RichMapFunction): it may
// also implement Opener (Open receives the runtime context: subtask,
// parallelism, metrics, side outputs), Closer, FunctionSnapshotter and
// CheckpointListener.
type MapFunction[T, U any] interface {
	Map(v T) (U, error)
}

// FlatMapFunction is a rich flat-map function (Flink's
// RichFlatMapFunction); see MapFunction.
type FlatMapFunction[T, U any] interface {
	FlatMap(v T, out Collector[U]) error
}

// FilterFunction is a rich filter function (Flink's RichFilterFunction);
// see MapFunction.
type FilterFunction[T any] interface {
	Filter(v T) (bool, error)
}

// Map applies a function to every record.
type Map[T, U any] struct {
	base
	fn  func(T) (U, error)
	out Output[U]
}

// NewMap returns a map operator emitting to out.
func NewMap[T, U any](fn func(T) (U, error), out Output[U]) *Map[T, U] {
	return &Map[T, U]{fn: fn, out: out}
}

// NewRichMap returns a map operator running a rich map function.
func NewRichMap[T, U any](fn MapFunction[T, U], out Output[U]) *Map[T, U] {
	m := NewMap(fn.Map, out)
	m.udf = fn
	return m
}

func (m *Map[T, U]) Collect(v T, ts int64) error {
	m.ts = ts
	u, err := m.fn(v)
	if err = m.done(err); err != nil {
		return err
	}
	return m.out.Collect(u, ts)
}

func (m *Map[T, U]) ProcessWatermark(wm int64) error {
	if err := m.sides.emitWatermark(wm); err != nil {
		return err
	}
	return m.out.EmitWatermark(wm)
}

// Filter keeps the records for which a predicate holds.
type Filter[T any] struct {
	base
	fn  func(T) (bool, error)
	out Output[T]
}

// NewFilter returns a filter operator emitting to out.
func NewFilter[T any](fn func(T) (bool, error), out Output[T]) *Filter[T] {
	return &Filter[T]{fn: fn, out: out}
}

// NewRichFilter returns a filter operator running a rich filter function.
func NewRichFilter[T any](fn FilterFunction[T], out Output[T]) *Filter[T] {
	f := NewFilter(fn.Filter, out)
	f.udf = fn
	return f
}

func (f *Filter[T]) Collect(v T, ts int64) error {
	f.ts = ts
	ok, err := f.fn(v)
	if err = f.done(err); err != nil {
		return err
	}
	if !ok {
		return nil
	}
	return f.out.Collect(v, ts)
}

func (f *Filter[T]) ProcessWatermark(wm int64) error {
	if err := f.sides.emitWatermark(wm); err != nil {
		return err
	}
	return f.out.EmitWatermark(wm)
}

// FlatMap emits any number of records per input record.
type FlatMap[T, U any] struct {
	base
	fn  func(T, Collector[U]) error
	col collector[U]
	out Output[U]
}

// NewFlatMap returns a flat-map operator emitting to out.
func NewFlatMap[T, U any](fn func(T, Collector[U]) error, out Output[U]) *FlatMap[T, U] {
	return &FlatMap[T, U]{fn: fn, out: out, col: collector[U]{out: out}}
}

// NewRichFlatMap returns a flat-map operator running a rich flat-map
// function.
func NewRichFlatMap[T, U any](fn FlatMapFunction[T, U], out Output[U]) *FlatMap[T, U] {
	f := NewFlatMap(fn.FlatMap, out)
	f.udf = fn
	return f
}

func (f *FlatMap[T, U]) Collect(v T, ts int64) error {
	f.col.ts, f.ts = ts, ts
	err := f.fn(v, &f.col)
	if cerr := f.col.take(); cerr != nil {
		return cerr
	}
	return f.done(err)
}

func (f *FlatMap[T, U]) ProcessWatermark(wm int64) error {
	if err := f.sides.emitWatermark(wm); err != nil {
		return err
	}
	return f.out.EmitWatermark(wm)
}

// ProcessFunction is the user function of a process operator on a
// non-keyed stream (Flink's ProcessFunction on a DataStream): it sees
// each record with its timestamp, the clocks, and may emit to side
// outputs; it has no keyed state and no timers (use a keyed Process for
// those). It may also implement Opener, Closer, FunctionSnapshotter and
// CheckpointListener.
type ProcessFunction[IN, OUT any] interface {
	ProcessElement(ctx *ProcessContext, v IN, out Collector[OUT]) error
}

// ProcessFunctionFunc adapts a function to a ProcessFunction.
type ProcessFunctionFunc[IN, OUT any] func(ctx *ProcessContext, v IN, out Collector[OUT]) error

func (f ProcessFunctionFunc[IN, OUT]) ProcessElement(ctx *ProcessContext, v IN, out Collector[OUT]) error {
	return f(ctx, v, out)
}

// ProcessContext is what a ProcessFunction sees.
type ProcessContext struct {
	ts        int64
	watermark int64
	rt        *Context
}

// Timestamp returns the event timestamp of the record (NoTimestamp if it
// has none).
func (c *ProcessContext) Timestamp() int64 { return c.ts }

// CurrentWatermark returns the operator's event time.
func (c *ProcessContext) CurrentWatermark() int64 { return c.watermark }

// CurrentProcessingTime returns the wall clock in Unix milliseconds.
func (c *ProcessContext) CurrentProcessingTime() int64 { return c.rt.ProcessingTime.Now() }

// Runtime returns the operator's runtime context.
func (c *ProcessContext) Runtime() *Context { return c.rt }

// SideOutputs returns the operator's side outputs, for EmitSide.
func (c *ProcessContext) SideOutputs() *SideOutputs { return c.rt.sides }

// Process runs a ProcessFunction on a non-keyed stream.
type Process[IN, OUT any] struct {
	base
	fn   ProcessFunction[IN, OUT]
	pctx ProcessContext
	col  collector[OUT]
	out  Output[OUT]
}

// NewProcess returns the operator running fn, emitting to out.
func NewProcess[IN, OUT any](fn ProcessFunction[IN, OUT], out Output[OUT]) *Process[IN, OUT] {
	p := &Process[IN, OUT]{fn: fn, out: out, col: collector[OUT]{out: out}, pctx: ProcessContext{watermark: MinWatermark}}
	p.udf = fn
	return p
}

func (p *Process[IN, OUT]) Open(ctx *Context) error {
	p.pctx.rt = ctx
	return p.base.Open(ctx)
}

func (p *Process[IN, OUT]) Collect(v IN, ts int64) error {
	p.col.ts, p.ts, p.pctx.ts = ts, ts, ts
	err := p.fn.ProcessElement(&p.pctx, v, &p.col)
	if cerr := p.col.take(); cerr != nil {
		return cerr
	}
	return p.done(err)
}

func (p *Process[IN, OUT]) ProcessWatermark(wm int64) error {
	p.pctx.watermark = wm
	if err := p.sides.emitWatermark(wm); err != nil {
		return err
	}
	return p.out.EmitWatermark(wm)
}

// Collect (the operator's body) and EmitWatermark let the previous operator
// of a chain call an operator directly as its Output: one call per hop.
// ProcessElement is the same, for records from the network.
func (m *Map[T, U]) ProcessElement(v T, ts int64) error         { return m.Collect(v, ts) }
func (m *Map[T, U]) EmitWatermark(wm int64) error               { return m.ProcessWatermark(wm) }
func (f *Filter[T]) ProcessElement(v T, ts int64) error         { return f.Collect(v, ts) }
func (f *Filter[T]) EmitWatermark(wm int64) error               { return f.ProcessWatermark(wm) }
func (f *FlatMap[T, U]) ProcessElement(v T, ts int64) error     { return f.Collect(v, ts) }
func (f *FlatMap[T, U]) EmitWatermark(wm int64) error           { return f.ProcessWatermark(wm) }
func (p *Process[IN, OUT]) ProcessElement(v IN, ts int64) error { return p.Collect(v, ts) }
func (p *Process[IN, OUT]) EmitWatermark(wm int64) error        { return p.ProcessWatermark(wm) }
