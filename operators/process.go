package operators

import (
	"fmt"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// KeyedProcessFunction is the user function of a keyed process operator.
// It may also implement Opener, Closer and TimerHandler.
type KeyedProcessFunction[K comparable, IN, OUT any] interface {
	ProcessElement(ctx *KeyedContext[K], v IN, out Collector[OUT]) error
}

// TimerHandler is implemented by keyed process functions that use timers.
type TimerHandler[K comparable, OUT any] interface {
	OnTimer(ctx *KeyedContext[K], ts int64, out Collector[OUT]) error
}

// KeyedFlusher is implemented by keyed process functions that combine
// records in memory before they reach keyed state, as Flink's window
// aggregation combines records per key and slice: Flush writes into keyed
// state (and registers the timers for) what the function holds for event
// times at or before upTo, switching keys with ctx.SetCurrentKey; it
// emits nothing. The operator calls it when the watermark advances, with
// the new watermark, before the timers it fires; and in the synchronous
// part of a checkpoint, before the snapshot of the keyed state, with
// MaxWatermark: everything, so the checkpoint holds all the function
// combined (Flink's prepareSnapshotPreBarrier). The function may also
// flush by itself (when its buffer is full) from ProcessElement.
type KeyedFlusher[K comparable] interface {
	Flush(ctx *KeyedContext[K], upTo int64) error
}

// Opener is implemented by user functions that prepare at Open: the place
// to obtain state handles.
type Opener interface {
	Open(ctx *Context) error
}

// Closer is implemented by user functions that release resources.
type Closer interface {
	Close() error
}

// ProcessFunc adapts a plain function to a KeyedProcessFunction.
type ProcessFunc[K comparable, IN, OUT any] func(ctx *KeyedContext[K], v IN, out Collector[OUT]) error

func (f ProcessFunc[K, IN, OUT]) ProcessElement(ctx *KeyedContext[K], v IN, out Collector[OUT]) error {
	return f(ctx, v, out)
}

// KeyedContext is what a keyed process function sees: the current key, the
// record's (or timer's) timestamp, and the timer service.
type KeyedContext[K comparable] struct {
	key     K
	ts      int64
	domain  TimeDomain
	inTimer bool
	timers  *TimerService[K]
	runtime *Context
	// sides are the operator's side outputs (nil without any).
	sides *SideOutputs
	// setKey sets the keyed state backend's current key (SetCurrentKey);
	// nil where the operator does not offer it.
	setKey func(K) error
}

// SetCurrentKey makes k the current key of the keyed state and the timer
// service, and of Key: for a KeyedFlusher's Flush, which writes the state
// of many keys. In ProcessElement it changes the key of the record being
// processed for the rest of the call.
func (c *KeyedContext[K]) SetCurrentKey(k K) error {
	if c.setKey == nil {
		return fmt.Errorf("set current key %v: the operator does not switch keys for its function", k)
	}
	if err := c.setKey(k); err != nil {
		return err
	}
	c.key = k
	c.timers.current = k
	return nil
}

// Key returns the key of the record or timer being processed.
func (c *KeyedContext[K]) Key() K { return c.key }

// Timestamp returns the event timestamp of the record being processed, or
// the timestamp of the firing timer; NoTimestamp if the record has none.
func (c *KeyedContext[K]) Timestamp() int64 { return c.ts }

// TimeDomain says which clock fired the current timer (only meaningful in
// OnTimer).
func (c *KeyedContext[K]) TimeDomain() TimeDomain { return c.domain }

// Timers returns the timer service, scoped to the current key.
func (c *KeyedContext[K]) Timers() *TimerService[K] { return c.timers }

// Runtime returns the operator's runtime context.
func (c *KeyedContext[K]) Runtime() *Context { return c.runtime }

// KeyedProcess runs a KeyedProcessFunction on a keyed stream.
type KeyedProcess[K comparable, IN, OUT any] struct {
	fn    KeyedProcessFunction[K, IN, OUT]
	keyOf func(IN) K
	keys  keySetter[K]
	out   Output[OUT]
	col   collector[OUT]
	kctx  KeyedContext[K]
	ctx   *Context
}

// NewKeyedProcess returns the operator running fn, keyed by keyOf; kc
// encodes keys for the keyed state backend.
func NewKeyedProcess[K comparable, IN, OUT any](fn KeyedProcessFunction[K, IN, OUT], keyOf func(IN) K, kc codec.Codec[K], out Output[OUT]) *KeyedProcess[K, IN, OUT] {
	return &KeyedProcess[K, IN, OUT]{fn: fn, keyOf: keyOf, keys: keySetter[K]{codec: kc}, out: out, col: collector[OUT]{out: out}}
}

// keySetter tells the keyed state backend the current key: its encoded
// bytes and key group.
type keySetter[K comparable] struct {
	codec   codec.Codec[K]
	backend state.KeyedBackend
	maxPar  int
	buf     []byte
}

func (s *keySetter[K]) open(ctx *Context) {
	s.backend, s.maxPar = ctx.KeyedState, ctx.MaxParallelism
}

func (s *keySetter[K]) set(k K) error {
	if s.backend == nil {
		return nil
	}
	b, err := s.codec.Append(s.buf[:0], k)
	if err != nil {
		return fmt.Errorf("encode key %v: %w", k, err)
	}
	s.buf = b
	s.backend.SetCurrentKey(b, state.KeyGroupFor(b, s.maxPar))
	return nil
}

func (p *KeyedProcess[K, IN, OUT]) Open(ctx *Context) error {
	p.ctx = ctx
	p.kctx.runtime = ctx
	p.kctx.timers = newTimerService[K](ctx.ProcessingTime, p.onTimer)
	p.kctx.setKey = p.keys.set
	p.keys.open(ctx)
	if ctx.KeyedState != nil {
		// Timers live in keyed state, so they survive a restore.
		if err := p.kctx.timers.persistIn(ctx, p.keys.set, p.keys.codec); err != nil {
			return Wrap(ctx, err)
		}
	}
	if o, ok := p.fn.(Opener); ok {
		if err := o.Open(ctx); err != nil {
			return Wrap(ctx, fmt.Errorf("open: %w", err))
		}
	}
	return nil
}

func (p *KeyedProcess[K, IN, OUT]) ProcessElement(v IN, ts int64) error {
	k := p.keyOf(v)
	if err := p.keys.set(k); err != nil {
		return Wrap(p.ctx, err)
	}
	p.kctx.key, p.kctx.ts, p.kctx.inTimer = k, ts, false
	p.kctx.timers.current = k
	p.col.ts = ts
	err := p.fn.ProcessElement(&p.kctx, v, &p.col)
	if cerr := p.col.take(); cerr != nil {
		return cerr
	}
	if cerr := p.kctx.sides.take(); cerr != nil {
		return Wrap(p.ctx, cerr)
	}
	if terr := p.kctx.timers.takeErr(); terr != nil {
		return Wrap(p.ctx, terr)
	}
	return Wrap(p.ctx, err)
}

func (p *KeyedProcess[K, IN, OUT]) onTimer(key K, ts int64, domain TimeDomain) error {
	h, ok := p.fn.(TimerHandler[K, OUT])
	if !ok {
		return nil
	}
	if err := p.keys.set(key); err != nil {
		return Wrap(p.ctx, err)
	}
	p.kctx.key, p.kctx.ts, p.kctx.domain, p.kctx.inTimer = key, ts, domain, true
	p.kctx.timers.current = key
	if domain == EventTime {
		p.col.ts = ts
	} else {
		p.col.ts = NoTimestamp
	}
	err := h.OnTimer(&p.kctx, ts, &p.col)
	if cerr := p.col.take(); cerr != nil {
		return cerr
	}
	if cerr := p.kctx.sides.take(); cerr != nil {
		return Wrap(p.ctx, cerr)
	}
	if terr := p.kctx.timers.takeErr(); terr != nil {
		return Wrap(p.ctx, terr)
	}
	if err != nil {
		return Wrap(p.ctx, fmt.Errorf("on %s timer at %d: %w", domain, ts, err))
	}
	return nil
}

func (p *KeyedProcess[K, IN, OUT]) ProcessWatermark(wm int64) error {
	if err := p.flush(wm); err != nil {
		return err
	}
	if err := p.kctx.timers.advanceWatermark(wm); err != nil {
		return err
	}
	if err := p.kctx.sides.emitWatermark(wm); err != nil {
		return err
	}
	return p.out.EmitWatermark(wm)
}

// Finish quiesces the processing-time timers: at the end of input the
// ones not yet due never fire (as in Flink); event-time timers have fired
// with the final watermark.
func (p *KeyedProcess[K, IN, OUT]) Finish() error {
	if p.kctx.timers != nil {
		p.kctx.timers.quiesce()
	}
	return nil
}

// flush calls the function's KeyedFlusher, if any, for event times up to
// upTo.
func (p *KeyedProcess[K, IN, OUT]) flush(upTo int64) error {
	f, ok := p.fn.(KeyedFlusher[K])
	if !ok {
		return nil
	}
	p.kctx.ts, p.kctx.inTimer = NoTimestamp, false
	err := f.Flush(&p.kctx, upTo)
	if terr := p.kctx.timers.takeErr(); terr != nil {
		return Wrap(p.ctx, terr)
	}
	if err != nil {
		return Wrap(p.ctx, fmt.Errorf("flush up to %d: %w", upTo, err))
	}
	return nil
}

// SnapshotState writes what a KeyedFlusher combined in memory into keyed
// state and lets the user function store what it keeps outside keyed
// state (FunctionSnapshotter).
func (p *KeyedProcess[K, IN, OUT]) SnapshotState(id int64) ([][]byte, error) {
	if err := p.flush(MaxWatermark); err != nil {
		return nil, err
	}
	return snapshotFunction(p.ctx, p.fn, id)
}

// NotifyCheckpointComplete and NotifyCheckpointAborted pass the
// notifications on to a user function that listens for them.
func (p *KeyedProcess[K, IN, OUT]) NotifyCheckpointComplete(id int64) error {
	if l, ok := p.fn.(CheckpointListener); ok {
		return Wrap(p.ctx, l.NotifyCheckpointComplete(id))
	}
	return nil
}

func (p *KeyedProcess[K, IN, OUT]) NotifyCheckpointAborted(id int64) error {
	if l, ok := p.fn.(CheckpointListener); ok {
		return Wrap(p.ctx, l.NotifyCheckpointAborted(id))
	}
	return nil
}

func (p *KeyedProcess[K, IN, OUT]) Close() error {
	if p.kctx.timers != nil {
		p.kctx.timers.close()
	}
	if c, ok := p.fn.(Closer); ok {
		return Wrap(p.ctx, c.Close())
	}
	return nil
}

// Reduce keeps a running reduction per key in a ValueState and emits the
// updated value for every record, as Flink's keyed reduce does.
type Reduce[K comparable, T any] struct {
	base
	fn    func(acc, v T) (T, error)
	keyOf func(T) K
	keys  keySetter[K]
	vc    codec.Codec[T]
	acc   state.ValueState[T]
	out   Output[T]
}

// NewReduce returns the keyed reduce operator; kc encodes keys and vc the
// reduced values in state.
func NewReduce[K comparable, T any](fn func(acc, v T) (T, error), keyOf func(T) K, kc codec.Codec[K], vc codec.Codec[T], out Output[T]) *Reduce[K, T] {
	return &Reduce[K, T]{fn: fn, keyOf: keyOf, keys: keySetter[K]{codec: kc}, vc: vc, out: out}
}

func (r *Reduce[K, T]) Open(ctx *Context) error {
	r.ctx = ctx
	if ctx.KeyedState == nil {
		return Wrap(ctx, fmt.Errorf("reduce needs a keyed state backend"))
	}
	r.keys.open(ctx)
	acc, err := state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[T]{Name: "reduce", Codec: r.vc})
	if err != nil {
		return Wrap(ctx, err)
	}
	r.acc = acc
	return nil
}

func (r *Reduce[K, T]) ProcessElement(v T, ts int64) error {
	if err := r.keys.set(r.keyOf(v)); err != nil {
		return Wrap(r.ctx, err)
	}
	acc, ok, err := r.acc.Value()
	if err != nil {
		return Wrap(r.ctx, err)
	}
	if ok {
		if acc, err = r.fn(acc, v); err != nil {
			return Wrap(r.ctx, err)
		}
	} else {
		acc = v
	}
	if err := r.acc.Update(acc); err != nil {
		return Wrap(r.ctx, err)
	}
	return r.out.Collect(acc, ts)
}

func (r *Reduce[K, T]) ProcessWatermark(wm int64) error { return r.out.EmitWatermark(wm) }

// Collect and EmitWatermark let the previous operator of a chain call these
// operators directly as its Output.
func (p *KeyedProcess[K, IN, OUT]) Collect(v IN, ts int64) error { return p.ProcessElement(v, ts) }
func (p *KeyedProcess[K, IN, OUT]) EmitWatermark(wm int64) error { return p.ProcessWatermark(wm) }
func (r *Reduce[K, T]) Collect(v T, ts int64) error              { return r.ProcessElement(v, ts) }
func (r *Reduce[K, T]) EmitWatermark(wm int64) error             { return r.ProcessWatermark(wm) }
