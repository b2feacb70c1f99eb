package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/operators"
)

// JoinFunction makes the result of one joined pair of a window join, as
// Flink's JoinFunction; JoinFunc adapts a function.
type JoinFunction[L, R, OUT any] interface {
	Join(left L, right R) (OUT, error)
}

// JoinFunc adapts a function to a JoinFunction.
type JoinFunc[L, R, OUT any] func(left L, right R) (OUT, error)

// Join implements JoinFunction.
func (f JoinFunc[L, R, OUT]) Join(left L, right R) (OUT, error) { return f(left, right) }

// CoGroupFunction sees, per key and window, the records of both inputs
// (either may be empty), as Flink's CoGroupFunction; CoGroupFunc adapts a
// function.
type CoGroupFunction[L, R, OUT any] interface {
	CoGroup(left []L, right []R, out Collector[OUT]) error
}

// CoGroupFunc adapts a function to a CoGroupFunction.
type CoGroupFunc[L, R, OUT any] func(left []L, right []R, out Collector[OUT]) error

// CoGroup implements CoGroupFunction.
func (f CoGroupFunc[L, R, OUT]) CoGroup(left []L, right []R, out Collector[OUT]) error {
	return f(left, right, out)
}

// TwoInputWindowing is two keyed streams waiting for the windows of their
// window join or coGroup (Window), as Flink's JoinedStreams.Where.EqualTo
// and CoGroupedStreams.Where.EqualTo.
type TwoInputWindowing[K comparable, L, R any] struct {
	left  *KeyedStream[K, L]
	right *KeyedStream[K, R]
	what  string
}

// WindowJoin joins two keyed streams per key and window: each pair of a
// left and a right record of one key in one window (an inner join), as
// Flink's a.join(b).where(keyA).equalTo(keyB).window(assigner). Both
// streams must encode their keys with the same codec (see ConnectKeyed).
//
//	pairs := sluice.ApplyWindowJoin(
//		sluice.WindowJoin(sluice.KeyBy(orders, Order.User), sluice.KeyBy(payments, Payment.User)).
//			Window(sluice.TumblingEventTimeWindows(time.Minute)),
//		sluice.JoinFunc[Order, Payment, Paid](pay), sluice.UID("order-payments"))
func WindowJoin[K comparable, L, R any](left *KeyedStream[K, L], right *KeyedStream[K, R]) *TwoInputWindowing[K, L, R] {
	checkSameKeying(left, right, "WindowJoin")
	return &TwoInputWindowing[K, L, R]{left: left, right: right, what: "WindowJoin"}
}

// CoGroup groups two keyed streams per key and window, as Flink's
// a.coGroup(b).where(keyA).equalTo(keyB).window(assigner): the function
// sees both inputs' records of a key in a window, also when one input has
// none.
func CoGroup[K comparable, L, R any](left *KeyedStream[K, L], right *KeyedStream[K, R]) *TwoInputWindowing[K, L, R] {
	checkSameKeying(left, right, "CoGroup")
	return &TwoInputWindowing[K, L, R]{left: left, right: right, what: "CoGroup"}
}

// Window sets the windows (any assigner: tumbling, sliding, session,
// event or processing time).
func (t *TwoInputWindowing[K, L, R]) Window(assigner WindowAssigner) *TwoInputWindowed[K, L, R] {
	env := t.left.stream.env
	if assigner == nil {
		env.addErr(fmt.Errorf("%w: %s needs a window assigner", ErrInvalidOption, t.what))
	} else if err := assigner.Validate(); err != nil {
		env.addErr(fmt.Errorf("%w: %s window assigner: %w", ErrInvalidOption, t.what, err))
	}
	return &TwoInputWindowed[K, L, R]{t: t, assigner: assigner}
}

// TwoInputWindowed is a window join or coGroup with its windows, waiting
// for its function (ApplyWindowJoin, ApplyCoGroup).
type TwoInputWindowed[K comparable, L, R any] struct {
	t        *TwoInputWindowing[K, L, R]
	assigner WindowAssigner
	lateness time.Duration
	trigger  Trigger[TaggedUnion[L, R]]
	evictor  Evictor[TaggedUnion[L, R]]
}

// AllowedLateness keeps each event-time window for d after the watermark
// passed its end (see WindowedStream.AllowedLateness): a late record
// fires its window again with everything it holds.
func (w *TwoInputWindowed[K, L, R]) AllowedLateness(d time.Duration) *TwoInputWindowed[K, L, R] {
	if d < 0 {
		w.t.left.stream.env.addErr(fmt.Errorf("%w: %s: allowed lateness must not be negative, got %v", ErrInvalidOption, w.t.what, d))
	}
	c := *w
	c.lateness = d
	return &c
}

// Trigger replaces the assigner's default trigger, as Flink's
// JoinedStreams.WithWindow.trigger: it sees the records of both inputs as
// TaggedUnion values (sluice.CountTrigger[sluice.TaggedUnion[L, R]](n)
// fires a window every n records of either input).
func (w *TwoInputWindowed[K, L, R]) Trigger(t Trigger[TaggedUnion[L, R]]) *TwoInputWindowed[K, L, R] {
	if err := operators.ValidateTrigger(t, w.assigner); err != nil && w.assigner != nil {
		w.t.left.stream.env.addErr(fmt.Errorf("%w: %s trigger: %w", ErrInvalidOption, w.t.what, err))
	}
	c := *w
	c.trigger = t
	return &c
}

// Evictor sets the windows' evictor, as Flink's
// JoinedStreams.WithWindow.evictor: it removes records of either input
// (TaggedUnion values) before or after the join or coGroup function runs.
func (w *TwoInputWindowed[K, L, R]) Evictor(e Evictor[TaggedUnion[L, R]]) *TwoInputWindowed[K, L, R] {
	if e == nil {
		w.t.left.stream.env.addErr(fmt.Errorf("%w: %s evictor is nil", ErrInvalidOption, w.t.what))
	} else if err := operators.ValidateEvictor(e); err != nil {
		w.t.left.stream.env.addErr(fmt.Errorf("%w: %s evictor: %w", ErrInvalidOption, w.t.what, err))
	}
	c := *w
	c.evictor = e
	return &c
}

// ApplyWindowJoin runs fn on each pair of a left and a right record of
// one key in one window when the window fires, as Flink's
// JoinedStreams.WithWindow.apply; the results carry the window's max
// timestamp (end - 1).
func ApplyWindowJoin[K comparable, L, R, OUT any](w *TwoInputWindowed[K, L, R], fn JoinFunction[L, R, OUT], opts ...OpOption) *Stream[OUT] {
	return coGroupWindow(w, "WindowJoin", opts, func() CoGroupFunction[L, R, OUT] {
		return &joinAsCoGroup[L, R, OUT]{fn: cloneFunction(fn)}
	})
}

// ApplyCoGroup runs fn on the records of both inputs of each key and
// window when the window fires, as Flink's CoGroupedStreams.WithWindow.apply;
// the results carry the window's max timestamp (end - 1).
func ApplyCoGroup[K comparable, L, R, OUT any](w *TwoInputWindowed[K, L, R], fn CoGroupFunction[L, R, OUT], opts ...OpOption) *Stream[OUT] {
	return coGroupWindow(w, "CoGroup", opts, func() CoGroupFunction[L, R, OUT] { return cloneFunction(fn) })
}

// coGroupWindow builds both as Flink does: each input is tagged into one
// union type, the two are unioned, keyed and windowed, and the window
// function splits each window's records by input.
func coGroupWindow[K comparable, L, R, OUT any](w *TwoInputWindowed[K, L, R], defName string, opts []OpOption, newFn func() CoGroupFunction[L, R, OUT]) *Stream[OUT] {
	left, right := w.t.left, w.t.right
	set := &opSettings{name: defName}
	for _, o := range opts {
		o(set)
	}
	tc := taggedUnionCodec[L, R]{left: streamCodec(left.stream), right: streamCodec(right.stream)}
	tagOpts := func(side string) []OpOption {
		o := []OpOption{Name(set.name + "-tag-" + side), WithCodec[TaggedUnion[L, R]](tc)}
		if set.uid != "" {
			o = append(o, UID(set.uid+"-tag-"+side))
		}
		return o
	}
	lt := Map(left.stream, func(v L) (TaggedUnion[L, R], error) {
		return TaggedUnion[L, R]{IsLeft: true, Left: v}, nil
	}, tagOpts("left")...)
	rt := Map(right.stream, func(v R) (TaggedUnion[L, R], error) {
		return TaggedUnion[L, R]{Right: v}, nil
	}, tagOpts("right")...)
	lk, rk := left.keyOf, right.keyOf
	ks := KeyByCodec(Union(lt, rt), func(t TaggedUnion[L, R]) K {
		if t.IsLeft {
			return lk(t.Left)
		}
		return rk(t.Right)
	}, left.keyCodec)
	ws := &WindowedStream[K, TaggedUnion[L, R]]{keyed: ks, assigner: w.assigner, lateness: w.lateness,
		trigger: w.trigger, evictor: w.evictor}
	return windowNode(ws, defName, opts, func(cfg operators.WindowConfig[K, TaggedUnion[L, R]], out operators.Output[OUT]) operators.Operator {
		fn := &coGroupSplitter[K, L, R, OUT]{fn: newFn()}
		if cfg.Evictor != nil {
			return operators.NewEvictingWindow[K](cfg, fn, tc, fn.Process, out)
		}
		return operators.NewProcessWindow[K](cfg, fn, tc, out)
	})
}

// TaggedUnion is a record of either input of a window join or coGroup,
// as Flink's CoGroupedStreams.TaggedUnion: the type a window join's
// trigger and evictor see (IsLeft tells which input, Left or Right holds
// the record).
type TaggedUnion[L, R any] struct {
	IsLeft bool
	Left   L
	Right  R
}

// taggedUnionCodec encodes a TaggedUnion as one byte (1 left, 2 right)
// and the record in its input's codec.
type taggedUnionCodec[L, R any] struct {
	left  Codec[L]
	right Codec[R]
}

func (c taggedUnionCodec[L, R]) Append(dst []byte, v TaggedUnion[L, R]) ([]byte, error) {
	if v.IsLeft {
		return c.left.Append(append(dst, 1), v.Left)
	}
	return c.right.Append(append(dst, 2), v.Right)
}

func (c taggedUnionCodec[L, R]) Decode(src []byte) (TaggedUnion[L, R], error) {
	var t TaggedUnion[L, R]
	if len(src) == 0 {
		return t, fmt.Errorf("tagged union: empty encoding")
	}
	var err error
	switch src[0] {
	case 1:
		t.IsLeft = true
		t.Left, err = c.left.Decode(src[1:])
	case 2:
		t.Right, err = c.right.Decode(src[1:])
	default:
		return t, fmt.Errorf("tagged union: unknown input tag %d", src[0])
	}
	if err != nil {
		return t, fmt.Errorf("tagged union input %d: %w", src[0], err)
	}
	return t, nil
}

// coGroupSplitter is the window function: it splits a window's records by
// input and hands them to the coGroup function.
type coGroupSplitter[K comparable, L, R, OUT any] struct {
	fn CoGroupFunction[L, R, OUT]
}

func (s *coGroupSplitter[K, L, R, OUT]) Process(_ *WindowContext[K], els []TaggedUnion[L, R], out Collector[OUT]) error {
	var ls []L
	var rs []R
	for _, e := range els {
		if e.IsLeft {
			ls = append(ls, e.Left)
		} else {
			rs = append(rs, e.Right)
		}
	}
	return s.fn.CoGroup(ls, rs, out)
}

// Open and Close pass the operator's lifecycle on to the user function.
func (s *coGroupSplitter[K, L, R, OUT]) Open(ctx *OperatorContext) error {
	return openFunction(s.fn, ctx)
}

func (s *coGroupSplitter[K, L, R, OUT]) Close() error { return closeFunction(s.fn) }

// joinAsCoGroup is a window join as a coGroup: the cross product of the
// two inputs' records.
type joinAsCoGroup[L, R, OUT any] struct{ fn JoinFunction[L, R, OUT] }

func (j *joinAsCoGroup[L, R, OUT]) CoGroup(ls []L, rs []R, out Collector[OUT]) error {
	for _, l := range ls {
		for _, r := range rs {
			v, err := j.fn.Join(l, r)
			if err != nil {
				return err
			}
			out.Collect(v)
		}
	}
	return nil
}

func (j *joinAsCoGroup[L, R, OUT]) Open(ctx *OperatorContext) error { return openFunction(j.fn, ctx) }

func (j *joinAsCoGroup[L, R, OUT]) Close() error { return closeFunction(j.fn) }

func openFunction(fn any, ctx *OperatorContext) error {
	if o, ok := fn.(interface{ Open(*OperatorContext) error }); ok {
		return o.Open(ctx)
	}
	return nil
}

func closeFunction(fn any) error {
	if c, ok := fn.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}
