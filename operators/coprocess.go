package operators

// CoProcessFunction is the user function of a two-input operator (Connect).
// It may also implement Opener and Closer.
type CoProcessFunction[IN1, IN2, OUT any] interface {
	ProcessElement1(ctx *CoContext, v IN1, out Collector[OUT]) error
	ProcessElement2(ctx *CoContext, v IN2, out Collector[OUT]) error
}

// CoContext is what a two-input process function sees.
type CoContext struct {
	ts        int64
	watermark int64
	runtime   *Context
}

// Timestamp returns the event timestamp of the record being processed.
func (c *CoContext) Timestamp() int64 { return c.ts }

// CurrentWatermark returns the operator's event time: the minimum over both
// inputs.
func (c *CoContext) CurrentWatermark() int64 { return c.watermark }

// Runtime returns the operator's runtime context.
func (c *CoContext) Runtime() *Context { return c.runtime }

// CoProcess runs a CoProcessFunction. Its two inputs are Input1 and Input2.
type CoProcess[IN1, IN2, OUT any] struct {
	fn   CoProcessFunction[IN1, IN2, OUT]
	out  Output[OUT]
	col  collector[OUT]
	cctx CoContext
	ctx  *Context
}

// NewCoProcess returns the two-input operator running fn.
func NewCoProcess[IN1, IN2, OUT any](fn CoProcessFunction[IN1, IN2, OUT], out Output[OUT]) *CoProcess[IN1, IN2, OUT] {
	return &CoProcess[IN1, IN2, OUT]{fn: fn, out: out, col: collector[OUT]{out: out}, cctx: CoContext{watermark: MinWatermark}}
}

// Input1 and Input2 are the operator's typed inputs.
func (p *CoProcess[IN1, IN2, OUT]) Input1() Input[IN1] { return coInput1[IN1, IN2, OUT]{p} }
func (p *CoProcess[IN1, IN2, OUT]) Input2() Input[IN2] { return coInput2[IN1, IN2, OUT]{p} }

type coInput1[IN1, IN2, OUT any] struct{ p *CoProcess[IN1, IN2, OUT] }
type coInput2[IN1, IN2, OUT any] struct{ p *CoProcess[IN1, IN2, OUT] }

func (i coInput1[IN1, IN2, OUT]) ProcessElement(v IN1, ts int64) error {
	p := i.p
	p.cctx.ts, p.col.ts = ts, ts
	err := p.fn.ProcessElement1(&p.cctx, v, &p.col)
	if cerr := p.col.take(); cerr != nil {
		return cerr
	}
	return Wrap(p.ctx, err)
}

func (i coInput2[IN1, IN2, OUT]) ProcessElement(v IN2, ts int64) error {
	p := i.p
	p.cctx.ts, p.col.ts = ts, ts
	err := p.fn.ProcessElement2(&p.cctx, v, &p.col)
	if cerr := p.col.take(); cerr != nil {
		return cerr
	}
	return Wrap(p.ctx, err)
}

func (p *CoProcess[IN1, IN2, OUT]) Open(ctx *Context) error {
	p.ctx = ctx
	p.cctx.runtime = ctx
	if o, ok := p.fn.(Opener); ok {
		return Wrap(ctx, o.Open(ctx))
	}
	return nil
}

func (p *CoProcess[IN1, IN2, OUT]) ProcessWatermark(wm int64) error {
	p.cctx.watermark = wm
	return p.out.EmitWatermark(wm)
}

func (p *CoProcess[IN1, IN2, OUT]) Finish() error { return nil }

// SnapshotState lets the user function store what it keeps outside keyed
// state (FunctionSnapshotter).
func (p *CoProcess[IN1, IN2, OUT]) SnapshotState(id int64) ([][]byte, error) {
	return snapshotFunction(p.ctx, p.fn, id)
}

// NotifyCheckpointComplete and NotifyCheckpointAborted pass the
// notifications on to a user function that listens for them.
func (p *CoProcess[IN1, IN2, OUT]) NotifyCheckpointComplete(id int64) error {
	if l, ok := p.fn.(CheckpointListener); ok {
		return Wrap(p.ctx, l.NotifyCheckpointComplete(id))
	}
	return nil
}

func (p *CoProcess[IN1, IN2, OUT]) NotifyCheckpointAborted(id int64) error {
	if l, ok := p.fn.(CheckpointListener); ok {
		return Wrap(p.ctx, l.NotifyCheckpointAborted(id))
	}
	return nil
}

func (p *CoProcess[IN1, IN2, OUT]) Close() error {
	if c, ok := p.fn.(Closer); ok {
		return Wrap(p.ctx, c.Close())
	}
	return nil
}
