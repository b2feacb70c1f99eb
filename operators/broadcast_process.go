package operators

import (
	"fmt"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// BroadcastStateDeclaration is one broadcast state of a broadcast stream
// (Flink's broadcast(MapStateDescriptor...)): the operator that processes
// the stream registers it in its operator state at Open.
type BroadcastStateDeclaration struct {
	Name     string
	register func(b *state.OperatorStateBackend) (any, error)
}

// DeclareBroadcastState declares the broadcast state d describes.
func DeclareBroadcastState[K comparable, V any](d state.MapStateDescriptor[K, V]) BroadcastStateDeclaration {
	return BroadcastStateDeclaration{Name: d.Name, register: func(b *state.OperatorStateBackend) (any, error) {
		return state.GetBroadcastState(b, d)
	}}
}

// BroadcastStates are the broadcast states of one operator instance, by
// name.
type BroadcastStates struct {
	byName map[string]any // state.BroadcastState[K, V]
}

func registerBroadcastStates(ctx *Context, decls []BroadcastStateDeclaration) (*BroadcastStates, error) {
	if ctx.OperatorState == nil {
		return nil, fmt.Errorf("broadcast state needs an operator state backend")
	}
	s := &BroadcastStates{byName: make(map[string]any, len(decls))}
	for _, d := range decls {
		st, err := d.register(ctx.OperatorState)
		if err != nil {
			return nil, fmt.Errorf("broadcast state %q: %w", d.Name, err)
		}
		s.byName[d.Name] = st
	}
	return s, nil
}

// ErrUndeclaredBroadcastState is returned (wrapped) when a function asks
// for a broadcast state its broadcast stream did not declare.
var ErrUndeclaredBroadcastState = fmt.Errorf("broadcast state not declared by the broadcast stream")

func lookupBroadcast[K comparable, V any](s *BroadcastStates, d state.MapStateDescriptor[K, V]) (state.BroadcastState[K, V], error) {
	st, ok := s.byName[d.Name]
	if !ok {
		return nil, fmt.Errorf("broadcast state %q: %w", d.Name, ErrUndeclaredBroadcastState)
	}
	typed, ok := st.(state.BroadcastState[K, V])
	if !ok {
		return nil, fmt.Errorf("broadcast state %q is not a map of %T to %T: %w", d.Name, *new(K), *new(V), state.ErrIncompatibleState)
	}
	return typed, nil
}

// BroadcastReader is a context that reads broadcast state: every context
// of a broadcast process function.
type BroadcastReader interface {
	broadcastStates() *BroadcastStates
}

// BroadcastWriter is a context that may write broadcast state: the
// broadcast side's (BroadcastContext, KeyedBroadcastContext).
type BroadcastWriter interface {
	BroadcastReader
	writesBroadcast()
}

// GetBroadcastState returns the broadcast state d describes, for writing,
// from the context of the broadcast side.
func GetBroadcastState[K comparable, V any](ctx BroadcastWriter, d state.MapStateDescriptor[K, V]) (state.BroadcastState[K, V], error) {
	return lookupBroadcast(ctx.broadcastStates(), d)
}

// GetReadOnlyBroadcastState returns a read-only view of the broadcast state
// d describes, from any context of a broadcast process function.
func GetReadOnlyBroadcastState[K comparable, V any](ctx BroadcastReader, d state.MapStateDescriptor[K, V]) (state.ReadOnlyBroadcastState[K, V], error) {
	st, err := lookupBroadcast(ctx.broadcastStates(), d)
	if err != nil {
		return nil, err
	}
	return readOnlyBroadcast[K, V]{st}, nil
}

// readOnlyBroadcast hides the writing methods (a type assertion does not
// find them).
type readOnlyBroadcast[K comparable, V any] struct {
	s state.BroadcastState[K, V]
}

func (r readOnlyBroadcast[K, V]) Get(k K) (V, bool, error)             { return r.s.Get(k) }
func (r readOnlyBroadcast[K, V]) Contains(k K) (bool, error)           { return r.s.Contains(k) }
func (r readOnlyBroadcast[K, V]) Iterate(fn func(k K, v V) bool) error { return r.s.Iterate(fn) }
func (r readOnlyBroadcast[K, V]) Len() int                             { return r.s.Len() }

// broadcastCommon is what every broadcast context holds.
type broadcastCommon struct {
	ts        int64
	watermark int64
	states    *BroadcastStates
	sides     *SideOutputs
	runtime   *Context
}

func (c *broadcastCommon) broadcastStates() *BroadcastStates { return c.states }

// Timestamp returns the event timestamp of the record being processed.
func (c *broadcastCommon) Timestamp() int64 { return c.ts }

// CurrentWatermark returns the operator's event time.
func (c *broadcastCommon) CurrentWatermark() int64 { return c.watermark }

// SideOutputs returns the operator's side outputs, for EmitSide.
func (c *broadcastCommon) SideOutputs() *SideOutputs { return c.sides }

// Runtime returns the operator's runtime context.
func (c *broadcastCommon) Runtime() *Context { return c.runtime }

// ReadOnlyBroadcastContext is the context of the non-broadcast side of a
// BroadcastProcessFunction: broadcast state is read-only there
// (GetReadOnlyBroadcastState).
type ReadOnlyBroadcastContext struct{ broadcastCommon }

// BroadcastContext is the context of the broadcast side of a broadcast
// process function: it may write broadcast state (GetBroadcastState).
type BroadcastContext struct{ broadcastCommon }

func (*BroadcastContext) writesBroadcast() {}

// BroadcastProcessFunction processes a non-keyed stream connected with a
// broadcast stream, as Flink's BroadcastProcessFunction. Only the
// broadcast side writes broadcast state, so every subtask's copy stays the
// same. It may also implement Opener, Closer, FunctionSnapshotter and
// CheckpointListener.
type BroadcastProcessFunction[IN, BC, OUT any] interface {
	ProcessElement(ctx *ReadOnlyBroadcastContext, v IN, out Collector[OUT]) error
	ProcessBroadcastElement(ctx *BroadcastContext, v BC, out Collector[OUT]) error
}

// BroadcastProcess runs a BroadcastProcessFunction: Input1 is the
// non-broadcast input, Input2 the broadcast one.
type BroadcastProcess[IN, BC, OUT any] struct {
	fn    BroadcastProcessFunction[IN, BC, OUT]
	decls []BroadcastStateDeclaration
	out   Output[OUT]
	col   collector[OUT]
	ro    ReadOnlyBroadcastContext
	rw    BroadcastContext
	wm    int64
	sides *SideOutputs
	ctx   *Context
}

// NewBroadcastProcess returns the operator running fn with the broadcast
// states decls.
func NewBroadcastProcess[IN, BC, OUT any](fn BroadcastProcessFunction[IN, BC, OUT], decls []BroadcastStateDeclaration, out Output[OUT]) *BroadcastProcess[IN, BC, OUT] {
	return &BroadcastProcess[IN, BC, OUT]{fn: fn, decls: decls, out: out, col: collector[OUT]{out: out}, wm: MinWatermark}
}

// Input1 (the non-broadcast input) and Input2 (the broadcast input).
func (p *BroadcastProcess[IN, BC, OUT]) Input1() Input[IN] { return bcMain[IN, BC, OUT]{p} }
func (p *BroadcastProcess[IN, BC, OUT]) Input2() Input[BC] { return bcSide[IN, BC, OUT]{p} }

type bcMain[IN, BC, OUT any] struct {
	p *BroadcastProcess[IN, BC, OUT]
}
type bcSide[IN, BC, OUT any] struct {
	p *BroadcastProcess[IN, BC, OUT]
}

func (i bcMain[IN, BC, OUT]) ProcessElement(v IN, ts int64) error {
	p := i.p
	p.col.ts = ts
	p.ro.ts, p.ro.watermark = ts, p.wm
	return p.after(p.fn.ProcessElement(&p.ro, v, &p.col))
}

func (i bcSide[IN, BC, OUT]) ProcessElement(v BC, ts int64) error {
	p := i.p
	p.col.ts = ts
	p.rw.ts, p.rw.watermark = ts, p.wm
	return p.after(p.fn.ProcessBroadcastElement(&p.rw, v, &p.col))
}

func (p *BroadcastProcess[IN, BC, OUT]) after(err error) error {
	if cerr := p.col.take(); cerr != nil {
		return cerr
	}
	if cerr := p.sides.take(); cerr != nil {
		return Wrap(p.ctx, cerr)
	}
	return Wrap(p.ctx, err)
}

func (p *BroadcastProcess[IN, BC, OUT]) Open(ctx *Context) error {
	p.ctx = ctx
	states, err := registerBroadcastStates(ctx, p.decls)
	if err != nil {
		return Wrap(ctx, err)
	}
	common := broadcastCommon{states: states, sides: p.sides, runtime: ctx}
	p.ro.broadcastCommon, p.rw.broadcastCommon = common, common
	return openFunction(ctx, p.fn)
}

func (p *BroadcastProcess[IN, BC, OUT]) ProcessWatermark(wm int64) error {
	p.wm = wm
	if err := p.sides.emitWatermark(wm); err != nil {
		return err
	}
	return p.out.EmitWatermark(wm)
}

func (p *BroadcastProcess[IN, BC, OUT]) Finish() error { return nil }

func (p *BroadcastProcess[IN, BC, OUT]) SnapshotState(id int64) ([][]byte, error) {
	return snapshotFunction(p.ctx, p.fn, id)
}

func (p *BroadcastProcess[IN, BC, OUT]) NotifyCheckpointComplete(id int64) error {
	if l, ok := p.fn.(CheckpointListener); ok {
		return Wrap(p.ctx, l.NotifyCheckpointComplete(id))
	}
	return nil
}

func (p *BroadcastProcess[IN, BC, OUT]) NotifyCheckpointAborted(id int64) error {
	if l, ok := p.fn.(CheckpointListener); ok {
		return Wrap(p.ctx, l.NotifyCheckpointAborted(id))
	}
	return nil
}

func (p *BroadcastProcess[IN, BC, OUT]) Close() error {
	if c, ok := p.fn.(Closer); ok {
		return Wrap(p.ctx, c.Close())
	}
	return nil
}

// SetSideOutputs implements SideOutputAcceptor.
func (p *BroadcastProcess[IN, BC, OUT]) SetSideOutputs(s *SideOutputs) {
	s.ts = &p.col.ts
	p.sides = s
}

// KeyedReadOnlyBroadcastContext is the context of the keyed side of a
// KeyedBroadcastProcessFunction (and of its timers): the KeyedContext
// (current key, keyed state, timers, side outputs) and read-only
// broadcast state.
type KeyedReadOnlyBroadcastContext[K comparable] struct {
	*KeyedContext[K]
	states *BroadcastStates
}

func (c *KeyedReadOnlyBroadcastContext[K]) broadcastStates() *BroadcastStates { return c.states }

// KeyedBroadcastContext is the context of the broadcast side of a
// KeyedBroadcastProcessFunction: it writes broadcast state and may apply
// a function to the keyed state of every key (ApplyToKeyedState). There is
// no current key.
type KeyedBroadcastContext[K comparable] struct {
	broadcastCommon
	keys    *keySetter[K]
	backend state.KeyedBackend
}

func (*KeyedBroadcastContext[K]) writesBroadcast() {}

// ApplyToKeyedState calls fn for every key that has state in the keyed
// state named stateName (default namespace), with that key current in the
// keyed state backend, so fn reads and writes its state through the
// handles the function got at Open, as Flink's applyToKeyedState.
func (c *KeyedBroadcastContext[K]) ApplyToKeyedState(stateName string, fn func(key K) error) error {
	type kk struct {
		b  []byte
		kg int
	}
	var keys []kk
	err := c.backend.Keys(stateName, nil, func(b []byte, kg int) error {
		keys = append(keys, kk{append([]byte(nil), b...), kg})
		return nil
	})
	if err != nil {
		return fmt.Errorf("keys of state %q: %w", stateName, err)
	}
	for _, k := range keys {
		key, err := c.keys.codec.Decode(k.b)
		if err != nil {
			return fmt.Errorf("decode a key of state %q: %w", stateName, err)
		}
		c.backend.SetCurrentKey(k.b, k.kg)
		if err := fn(key); err != nil {
			return err
		}
	}
	return nil
}

// KeyedBroadcastProcessFunction processes a keyed stream connected with a
// broadcast stream, as Flink's KeyedBroadcastProcessFunction: the keyed
// side has keyed state and timers and reads broadcast state; the broadcast
// side writes it. It may also implement BroadcastTimerHandler, Opener,
// Closer, FunctionSnapshotter and CheckpointListener.
type KeyedBroadcastProcessFunction[K comparable, IN, BC, OUT any] interface {
	ProcessElement(ctx *KeyedReadOnlyBroadcastContext[K], v IN, out Collector[OUT]) error
	ProcessBroadcastElement(ctx *KeyedBroadcastContext[K], v BC, out Collector[OUT]) error
}

// BroadcastTimerHandler is implemented by keyed broadcast process
// functions that use timers.
type BroadcastTimerHandler[K comparable, OUT any] interface {
	OnTimer(ctx *KeyedReadOnlyBroadcastContext[K], ts int64, out Collector[OUT]) error
}

// KeyedBroadcastProcess runs a KeyedBroadcastProcessFunction: Input1 is
// the keyed input, Input2 the broadcast one.
type KeyedBroadcastProcess[K comparable, IN, BC, OUT any] struct {
	fn    KeyedBroadcastProcessFunction[K, IN, BC, OUT]
	keyOf func(IN) K
	decls []BroadcastStateDeclaration
	keyed keyedCore[K, OUT]
	ro    KeyedReadOnlyBroadcastContext[K]
	rw    KeyedBroadcastContext[K]
}

// NewKeyedBroadcastProcess returns the operator running fn; keyOf keys
// the non-broadcast input, kc encodes its keys.
func NewKeyedBroadcastProcess[K comparable, IN, BC, OUT any](fn KeyedBroadcastProcessFunction[K, IN, BC, OUT], keyOf func(IN) K, kc codec.Codec[K], decls []BroadcastStateDeclaration, out Output[OUT]) *KeyedBroadcastProcess[K, IN, BC, OUT] {
	p := &KeyedBroadcastProcess[K, IN, BC, OUT]{fn: fn, keyOf: keyOf, decls: decls}
	p.keyed.init(kc, out)
	p.ro.KeyedContext = &p.keyed.kctx
	return p
}

// Input1 (the keyed input) and Input2 (the broadcast input).
func (p *KeyedBroadcastProcess[K, IN, BC, OUT]) Input1() Input[IN] { return kbcMain[K, IN, BC, OUT]{p} }
func (p *KeyedBroadcastProcess[K, IN, BC, OUT]) Input2() Input[BC] { return kbcSide[K, IN, BC, OUT]{p} }

type kbcMain[K comparable, IN, BC, OUT any] struct {
	p *KeyedBroadcastProcess[K, IN, BC, OUT]
}
type kbcSide[K comparable, IN, BC, OUT any] struct {
	p *KeyedBroadcastProcess[K, IN, BC, OUT]
}

func (i kbcMain[K, IN, BC, OUT]) ProcessElement(v IN, ts int64) error {
	p := i.p
	return p.keyed.element(p.keyOf(v), ts, func(_ *KeyedContext[K], out Collector[OUT]) error {
		return p.fn.ProcessElement(&p.ro, v, out)
	})
}

func (i kbcSide[K, IN, BC, OUT]) ProcessElement(v BC, ts int64) error {
	p := i.p
	c := &p.keyed
	c.col.ts = ts
	p.rw.ts, p.rw.watermark = ts, c.kctx.timers.CurrentWatermark()
	return c.after(p.fn.ProcessBroadcastElement(&p.rw, v, &c.col))
}

func (p *KeyedBroadcastProcess[K, IN, BC, OUT]) Open(ctx *Context) error {
	var onTimer func(*KeyedContext[K], int64, Collector[OUT]) error
	if h, ok := p.fn.(BroadcastTimerHandler[K, OUT]); ok {
		onTimer = func(_ *KeyedContext[K], ts int64, out Collector[OUT]) error { return h.OnTimer(&p.ro, ts, out) }
	}
	if err := p.keyed.open(ctx, onTimer); err != nil {
		return err
	}
	states, err := registerBroadcastStates(ctx, p.decls)
	if err != nil {
		return Wrap(ctx, err)
	}
	p.ro.states = states
	p.rw.broadcastCommon = broadcastCommon{states: states, sides: p.keyed.kctx.sides, runtime: ctx}
	p.rw.keys, p.rw.backend = &p.keyed.keys, ctx.KeyedState
	return openFunction(ctx, p.fn)
}

func (p *KeyedBroadcastProcess[K, IN, BC, OUT]) ProcessWatermark(wm int64) error {
	return p.keyed.watermark(wm)
}

func (p *KeyedBroadcastProcess[K, IN, BC, OUT]) Finish() error {
	p.keyed.finish()
	return nil
}

func (p *KeyedBroadcastProcess[K, IN, BC, OUT]) SnapshotState(id int64) ([][]byte, error) {
	return snapshotFunction(p.keyed.ctx, p.fn, id)
}

func (p *KeyedBroadcastProcess[K, IN, BC, OUT]) NotifyCheckpointComplete(id int64) error {
	if l, ok := p.fn.(CheckpointListener); ok {
		return Wrap(p.keyed.ctx, l.NotifyCheckpointComplete(id))
	}
	return nil
}

func (p *KeyedBroadcastProcess[K, IN, BC, OUT]) NotifyCheckpointAborted(id int64) error {
	if l, ok := p.fn.(CheckpointListener); ok {
		return Wrap(p.keyed.ctx, l.NotifyCheckpointAborted(id))
	}
	return nil
}

func (p *KeyedBroadcastProcess[K, IN, BC, OUT]) Close() error {
	p.keyed.close()
	if c, ok := p.fn.(Closer); ok {
		return Wrap(p.keyed.ctx, c.Close())
	}
	return nil
}

// SetSideOutputs implements SideOutputAcceptor.
func (p *KeyedBroadcastProcess[K, IN, BC, OUT]) SetSideOutputs(s *SideOutputs) {
	p.keyed.setSideOutputs(s)
}
