package operators

// base carries what every operator keeps: its context and a forward of
// watermarks to its output.
type base struct {
	ctx *Context
}

func (b *base) Open(ctx *Context) error { b.ctx = ctx; return nil }
func (b *base) Finish() error           { return nil }
func (b *base) Close() error            { return nil }

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

func (m *Map[T, U]) Collect(v T, ts int64) error {
	u, err := m.fn(v)
	if err != nil {
		return Wrap(m.ctx, err)
	}
	return m.out.Collect(u, ts)
}

func (m *Map[T, U]) ProcessWatermark(wm int64) error { return m.out.EmitWatermark(wm) }

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

func (f *Filter[T]) Collect(v T, ts int64) error {
	ok, err := f.fn(v)
	if err != nil {
		return Wrap(f.ctx, err)
	}
	if !ok {
		return nil
	}
	return f.out.Collect(v, ts)
}

func (f *Filter[T]) ProcessWatermark(wm int64) error { return f.out.EmitWatermark(wm) }

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

func (f *FlatMap[T, U]) Collect(v T, ts int64) error {
	f.col.ts = ts
	err := f.fn(v, &f.col)
	if cerr := f.col.take(); cerr != nil {
		return cerr
	}
	return Wrap(f.ctx, err)
}

func (f *FlatMap[T, U]) ProcessWatermark(wm int64) error { return f.out.EmitWatermark(wm) }

// Collect (the operator's body) and EmitWatermark let the previous operator
// of a chain call an operator directly as its Output: one call per hop.
// ProcessElement is the same, for records from the network.
func (m *Map[T, U]) ProcessElement(v T, ts int64) error     { return m.Collect(v, ts) }
func (m *Map[T, U]) EmitWatermark(wm int64) error           { return m.ProcessWatermark(wm) }
func (f *Filter[T]) ProcessElement(v T, ts int64) error     { return f.Collect(v, ts) }
func (f *Filter[T]) EmitWatermark(wm int64) error           { return f.ProcessWatermark(wm) }
func (f *FlatMap[T, U]) ProcessElement(v T, ts int64) error { return f.Collect(v, ts) }
func (f *FlatMap[T, U]) EmitWatermark(wm int64) error       { return f.ProcessWatermark(wm) }
