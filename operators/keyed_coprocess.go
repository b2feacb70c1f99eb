package operators

import (
	"fmt"

	"github.com/sluicehq/sluice/codec"
)

// KeyedCoProcessFunction is the user function of a keyed two-input
// operator (two keyed streams connected), as Flink's
// KeyedCoProcessFunction: both inputs are keyed the same way, so the
// records of one key from either input meet on one subtask, which holds
// that key's state and timers. It may also implement Opener, Closer,
// TimerHandler (OnTimer with the timer's key), FunctionSnapshotter and
// CheckpointListener.
type KeyedCoProcessFunction[K comparable, IN1, IN2, OUT any] interface {
	ProcessElement1(ctx *KeyedContext[K], v IN1, out Collector[OUT]) error
	ProcessElement2(ctx *KeyedContext[K], v IN2, out Collector[OUT]) error
}

// KeyedCoProcess runs a KeyedCoProcessFunction. Its two inputs are Input1
// and Input2; the runtime gives it a keyed state backend, and its timers
// live in that state as a KeyedProcess's do.
type KeyedCoProcess[K comparable, IN1, IN2, OUT any] struct {
	fn     KeyedCoProcessFunction[K, IN1, IN2, OUT]
	keyOf1 func(IN1) K
	keyOf2 func(IN2) K
	keyed  keyedCore[K, OUT]
}

// NewKeyedCoProcess returns the operator running fn; keyOf1 and keyOf2
// give the key of a record of either input, kc encodes keys for the keyed
// state backend (both inputs' partitioners must encode keys the same way).
func NewKeyedCoProcess[K comparable, IN1, IN2, OUT any](fn KeyedCoProcessFunction[K, IN1, IN2, OUT], keyOf1 func(IN1) K, keyOf2 func(IN2) K, kc codec.Codec[K], out Output[OUT]) *KeyedCoProcess[K, IN1, IN2, OUT] {
	p := &KeyedCoProcess[K, IN1, IN2, OUT]{fn: fn, keyOf1: keyOf1, keyOf2: keyOf2}
	p.keyed.init(kc, out)
	return p
}

// Input1 and Input2 are the operator's typed inputs.
func (p *KeyedCoProcess[K, IN1, IN2, OUT]) Input1() Input[IN1] {
	return keyedCoInput1[K, IN1, IN2, OUT]{p}
}
func (p *KeyedCoProcess[K, IN1, IN2, OUT]) Input2() Input[IN2] {
	return keyedCoInput2[K, IN1, IN2, OUT]{p}
}

type keyedCoInput1[K comparable, IN1, IN2, OUT any] struct {
	p *KeyedCoProcess[K, IN1, IN2, OUT]
}
type keyedCoInput2[K comparable, IN1, IN2, OUT any] struct {
	p *KeyedCoProcess[K, IN1, IN2, OUT]
}

func (i keyedCoInput1[K, IN1, IN2, OUT]) ProcessElement(v IN1, ts int64) error {
	p := i.p
	return p.keyed.element(p.keyOf1(v), ts, func(ctx *KeyedContext[K], out Collector[OUT]) error {
		return p.fn.ProcessElement1(ctx, v, out)
	})
}

func (i keyedCoInput2[K, IN1, IN2, OUT]) ProcessElement(v IN2, ts int64) error {
	p := i.p
	return p.keyed.element(p.keyOf2(v), ts, func(ctx *KeyedContext[K], out Collector[OUT]) error {
		return p.fn.ProcessElement2(ctx, v, out)
	})
}

func (p *KeyedCoProcess[K, IN1, IN2, OUT]) Open(ctx *Context) error {
	var onTimer func(ctx *KeyedContext[K], ts int64, out Collector[OUT]) error
	if h, ok := p.fn.(TimerHandler[K, OUT]); ok {
		onTimer = h.OnTimer
	}
	if err := p.keyed.open(ctx, onTimer); err != nil {
		return err
	}
	return openFunction(ctx, p.fn)
}

func (p *KeyedCoProcess[K, IN1, IN2, OUT]) ProcessWatermark(wm int64) error {
	return p.keyed.watermark(wm)
}

// Finish quiesces the processing-time timers, as KeyedProcess does.
func (p *KeyedCoProcess[K, IN1, IN2, OUT]) Finish() error {
	p.keyed.finish()
	return nil
}

// SnapshotState lets the user function store what it keeps outside keyed
// state (FunctionSnapshotter).
func (p *KeyedCoProcess[K, IN1, IN2, OUT]) SnapshotState(id int64) ([][]byte, error) {
	return snapshotFunction(p.keyed.ctx, p.fn, id)
}

// NotifyCheckpointComplete and NotifyCheckpointAborted pass the
// notifications on to a user function that listens for them.
func (p *KeyedCoProcess[K, IN1, IN2, OUT]) NotifyCheckpointComplete(id int64) error {
	if l, ok := p.fn.(CheckpointListener); ok {
		return Wrap(p.keyed.ctx, l.NotifyCheckpointComplete(id))
	}
	return nil
}

func (p *KeyedCoProcess[K, IN1, IN2, OUT]) NotifyCheckpointAborted(id int64) error {
	if l, ok := p.fn.(CheckpointListener); ok {
		return Wrap(p.keyed.ctx, l.NotifyCheckpointAborted(id))
	}
	return nil
}

func (p *KeyedCoProcess[K, IN1, IN2, OUT]) Close() error {
	p.keyed.close()
	if c, ok := p.fn.(Closer); ok {
		return Wrap(p.keyed.ctx, c.Close())
	}
	return nil
}

// SetSideOutputs implements SideOutputAcceptor: the function emits to them
// with EmitSide from either input or a timer.
func (p *KeyedCoProcess[K, IN1, IN2, OUT]) SetSideOutputs(s *SideOutputs) {
	p.keyed.setSideOutputs(s)
}

// openFunction calls a user function's Opener, if any.
func openFunction(ctx *Context, fn any) error {
	if o, ok := fn.(Opener); ok {
		if err := o.Open(ctx); err != nil {
			return Wrap(ctx, fmt.Errorf("open: %w", err))
		}
	}
	return nil
}

// keyedCore is what every keyed operator with user callbacks shares: the
// current key of the keyed backend, the keyed context, the collector,
// side outputs and the timer service whose timers live in keyed state.
type keyedCore[K comparable, OUT any] struct {
	keys    keySetter[K]
	out     Output[OUT]
	col     collector[OUT]
	kctx    KeyedContext[K]
	ctx     *Context
	onTimer func(ctx *KeyedContext[K], ts int64, out Collector[OUT]) error
}

func (c *keyedCore[K, OUT]) init(kc codec.Codec[K], out Output[OUT]) {
	c.keys = keySetter[K]{codec: kc}
	c.out = out
	c.col = collector[OUT]{out: out}
}

// open wires the core to the operator's context; onTimer (nil: timers
// fire without effect) handles the timers the function registers.
func (c *keyedCore[K, OUT]) open(ctx *Context, onTimer func(*KeyedContext[K], int64, Collector[OUT]) error) error {
	c.ctx = ctx
	c.onTimer = onTimer
	c.kctx.runtime = ctx
	c.kctx.timers = newTimerService[K](ctx.ProcessingTime, c.fire)
	c.keys.open(ctx)
	if ctx.KeyedState == nil {
		return Wrap(ctx, fmt.Errorf("a keyed two-input operator needs a keyed state backend"))
	}
	if err := c.kctx.timers.persistIn(ctx, c.keys.set, c.keys.codec); err != nil {
		return Wrap(ctx, err)
	}
	return nil
}

// element runs fn for a record of key k and timestamp ts, with the keyed
// backend's current key set, and returns the first error of fn, the
// collector, the side outputs or the timer service.
func (c *keyedCore[K, OUT]) element(k K, ts int64, fn func(*KeyedContext[K], Collector[OUT]) error) error {
	if err := c.keys.set(k); err != nil {
		return Wrap(c.ctx, err)
	}
	c.kctx.key, c.kctx.ts, c.kctx.inTimer = k, ts, false
	c.kctx.timers.current = k
	c.col.ts = ts
	err := fn(&c.kctx, &c.col)
	return c.after(err)
}

func (c *keyedCore[K, OUT]) after(err error) error {
	if cerr := c.col.take(); cerr != nil {
		return cerr
	}
	if cerr := c.kctx.sides.take(); cerr != nil {
		return Wrap(c.ctx, cerr)
	}
	if terr := c.kctx.timers.takeErr(); terr != nil {
		return Wrap(c.ctx, terr)
	}
	return Wrap(c.ctx, err)
}

func (c *keyedCore[K, OUT]) fire(key K, ts int64, domain TimeDomain) error {
	if c.onTimer == nil {
		return nil
	}
	if err := c.keys.set(key); err != nil {
		return Wrap(c.ctx, err)
	}
	c.kctx.key, c.kctx.ts, c.kctx.domain, c.kctx.inTimer = key, ts, domain, true
	c.kctx.timers.current = key
	if domain == EventTime {
		c.col.ts = ts
	} else {
		c.col.ts = NoTimestamp
	}
	err := c.onTimer(&c.kctx, ts, &c.col)
	if err != nil {
		err = fmt.Errorf("on %s timer at %d: %w", domain, ts, err)
	}
	return c.after(err)
}

func (c *keyedCore[K, OUT]) watermark(wm int64) error {
	if err := c.kctx.timers.advanceWatermark(wm); err != nil {
		return err
	}
	if err := c.kctx.sides.emitWatermark(wm); err != nil {
		return err
	}
	return c.out.EmitWatermark(wm)
}

func (c *keyedCore[K, OUT]) finish() {
	if c.kctx.timers != nil {
		c.kctx.timers.quiesce()
	}
}

func (c *keyedCore[K, OUT]) close() {
	if c.kctx.timers != nil {
		c.kctx.timers.close()
	}
}

func (c *keyedCore[K, OUT]) setSideOutputs(s *SideOutputs) {
	s.ts = &c.col.ts
	c.kctx.sides = s
}
