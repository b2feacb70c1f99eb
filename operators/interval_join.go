package operators

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// ProcessJoinFunction is the user function of a join: it sees each pair
// of joined records, as Flink's ProcessJoinFunction. It may also implement
// Opener and Closer.
type ProcessJoinFunction[L, R, OUT any] interface {
	ProcessElement(ctx *JoinContext, left L, right R, out Collector[OUT]) error
}

// ProcessJoinFunc adapts a function to a ProcessJoinFunction.
type ProcessJoinFunc[L, R, OUT any] func(ctx *JoinContext, left L, right R, out Collector[OUT]) error

func (f ProcessJoinFunc[L, R, OUT]) ProcessElement(ctx *JoinContext, left L, right R, out Collector[OUT]) error {
	return f(ctx, left, right, out)
}

// JoinContext is what a ProcessJoinFunction sees: both records'
// timestamps, the result's (the larger), side outputs and the runtime.
type JoinContext struct {
	left, right int64
	ts          *int64
	sides       *SideOutputs
	runtime     *Context
}

// LeftTimestamp and RightTimestamp return the joined records' timestamps.
func (c *JoinContext) LeftTimestamp() int64  { return c.left }
func (c *JoinContext) RightTimestamp() int64 { return c.right }

// Timestamp returns the timestamp of the results: the larger of the two.
func (c *JoinContext) Timestamp() int64 { return *c.ts }

// SideOutputs returns the operator's side outputs, for EmitSide.
func (c *JoinContext) SideOutputs() *SideOutputs { return c.sides }

// Runtime returns the operator's runtime context.
func (c *JoinContext) Runtime() *Context { return c.runtime }

// IntervalJoinConfig configures an interval join: a left record at time t
// joins the right records of its key in [t+Lower, t+Upper], both bounds
// inclusive (exclusive bounds are made inclusive by the API: +1 on the
// lower, -1 on the upper), by event time.
type IntervalJoinConfig[K comparable, L, R any] struct {
	Lower, Upper int64
	KeyOfLeft    func(L) K
	KeyOfRight   func(R) K
	KeyCodec     codec.Codec[K]
	// LeftCodec and RightCodec store the buffered records in keyed state.
	LeftCodec  codec.Codec[L]
	RightCodec codec.Codec[R]
	// LeftLateTag and RightLateTag name the side outputs of late records
	// (empty: dropped).
	LeftLateTag, RightLateTag string
}

// IntervalJoin is Flink's interval join operator: both inputs keyed the
// same way, each record buffered in keyed map state by its timestamp until
// the watermark passes the last time a record of the other input could
// join it, and joined on arrival with the buffered records of the other
// input in its interval. A record at or below the watermark is late: it
// joins nothing and goes to the late side output of its input, if any.
type IntervalJoin[K comparable, L, R, OUT any] struct {
	cfg   IntervalJoinConfig[K, L, R]
	fn    ProcessJoinFunction[L, R, OUT]
	keyed keyedCore[K, OUT]
	jctx  JoinContext
	left  state.MapState[int64, []L]
	right state.MapState[int64, []R]
}

// NewIntervalJoin returns the interval join operator running fn.
func NewIntervalJoin[K comparable, L, R, OUT any](cfg IntervalJoinConfig[K, L, R], fn ProcessJoinFunction[L, R, OUT], out Output[OUT]) *IntervalJoin[K, L, R, OUT] {
	j := &IntervalJoin[K, L, R, OUT]{cfg: cfg, fn: fn}
	j.keyed.init(cfg.KeyCodec, out)
	j.jctx.ts = &j.keyed.col.ts
	return j
}

// Input1 (left) and Input2 (right) are the operator's typed inputs.
func (j *IntervalJoin[K, L, R, OUT]) Input1() Input[L] { return intervalLeft[K, L, R, OUT]{j} }
func (j *IntervalJoin[K, L, R, OUT]) Input2() Input[R] { return intervalRight[K, L, R, OUT]{j} }

type intervalLeft[K comparable, L, R, OUT any] struct {
	j *IntervalJoin[K, L, R, OUT]
}
type intervalRight[K comparable, L, R, OUT any] struct {
	j *IntervalJoin[K, L, R, OUT]
}

// Interval join state: each side's records of a key by their timestamp.
const (
	intervalLeftState  = "interval-join-left"
	intervalRightState = "interval-join-right"
)

func (j *IntervalJoin[K, L, R, OUT]) Open(ctx *Context) error {
	if err := j.keyed.open(ctx, j.cleanup); err != nil {
		return err
	}
	j.jctx.runtime = ctx
	var err error
	j.left, err = state.GetMapState(ctx.KeyedState, state.MapStateDescriptor[int64, []L]{
		Name: intervalLeftState, KeyCodec: codec.Int[int64]{}, ValueCodec: ListCodec[L]{Elem: orDefault(j.cfg.LeftCodec)}})
	if err != nil {
		return Wrap(ctx, err)
	}
	j.right, err = state.GetMapState(ctx.KeyedState, state.MapStateDescriptor[int64, []R]{
		Name: intervalRightState, KeyCodec: codec.Int[int64]{}, ValueCodec: ListCodec[R]{Elem: orDefault(j.cfg.RightCodec)}})
	if err != nil {
		return Wrap(ctx, err)
	}
	return openFunction(ctx, j.fn)
}

func orDefault[T any](c codec.Codec[T]) codec.Codec[T] {
	if c == nil {
		return codec.Default[T]()
	}
	return c
}

// late reports whether a record at ts is late: at or below the watermark.
func (j *IntervalJoin[K, L, R, OUT]) late(ts int64) bool {
	return ts <= j.keyed.kctx.timers.CurrentWatermark()
}

func (i intervalLeft[K, L, R, OUT]) ProcessElement(v L, ts int64) error {
	j := i.j
	if ts == NoTimestamp {
		return Wrap(j.keyed.ctx, fmt.Errorf("interval join: a left record without a timestamp (interval joins run on event time: give the source a watermark strategy with timestamps)"))
	}
	return j.keyed.element(j.cfg.KeyOfLeft(v), ts, func(ctx *KeyedContext[K], out Collector[OUT]) error {
		if j.late(ts) {
			EmitSide(ctx.sides, j.cfg.LeftLateTag, v)
			return nil
		}
		if err := appendAt(j.left, ts, v); err != nil {
			return err
		}
		var ferr error
		err := j.right.Iterate(func(rts int64, rs []R) bool {
			if d := rts - ts; d < j.cfg.Lower || d > j.cfg.Upper {
				return true
			}
			for _, r := range rs {
				if ferr = j.emit(v, r, ts, rts, out); ferr != nil {
					return false
				}
			}
			return true
		})
		if err != nil {
			return err
		}
		if ferr != nil {
			return ferr
		}
		ctx.Timers().RegisterEventTimeTimer(ts + max(j.cfg.Upper, 0))
		return nil
	})
}

func (i intervalRight[K, L, R, OUT]) ProcessElement(v R, ts int64) error {
	j := i.j
	if ts == NoTimestamp {
		return Wrap(j.keyed.ctx, fmt.Errorf("interval join: a right record without a timestamp (interval joins run on event time: give the source a watermark strategy with timestamps)"))
	}
	return j.keyed.element(j.cfg.KeyOfRight(v), ts, func(ctx *KeyedContext[K], out Collector[OUT]) error {
		if j.late(ts) {
			EmitSide(ctx.sides, j.cfg.RightLateTag, v)
			return nil
		}
		if err := appendAt(j.right, ts, v); err != nil {
			return err
		}
		var ferr error
		err := j.left.Iterate(func(lts int64, ls []L) bool {
			if d := ts - lts; d < j.cfg.Lower || d > j.cfg.Upper {
				return true
			}
			for _, l := range ls {
				if ferr = j.emit(l, v, lts, ts, out); ferr != nil {
					return false
				}
			}
			return true
		})
		if err != nil {
			return err
		}
		if ferr != nil {
			return ferr
		}
		ctx.Timers().RegisterEventTimeTimer(ts + max(-j.cfg.Lower, 0))
		return nil
	})
}

// emit hands one pair to the function, its results at the larger
// timestamp.
func (j *IntervalJoin[K, L, R, OUT]) emit(l L, r R, lts, rts int64, out Collector[OUT]) error {
	j.keyed.col.ts = max(lts, rts)
	j.jctx.left, j.jctx.right, j.jctx.sides = lts, rts, j.keyed.kctx.sides
	err := j.fn.ProcessElement(&j.jctx, l, r, out)
	j.keyed.col.ts = j.keyed.kctx.ts
	return err
}

// cleanup is the event-time timer at t: the left records at t - max(Upper,
// 0) and the right records at t - max(-Lower, 0) can join nothing more
// (one timer serves both when they coincide).
func (j *IntervalJoin[K, L, R, OUT]) cleanup(_ *KeyedContext[K], t int64, _ Collector[OUT]) error {
	if err := j.left.Remove(t - max(j.cfg.Upper, 0)); err != nil {
		return err
	}
	return j.right.Remove(t - max(-j.cfg.Lower, 0))
}

func appendAt[T any](m state.MapState[int64, []T], ts int64, v T) error {
	vs, _, err := m.Get(ts)
	if err != nil {
		return err
	}
	// Clipped: the slice may share its array with a snapshot's view.
	return m.Put(ts, append(slices.Clip(vs), v))
}

func (j *IntervalJoin[K, L, R, OUT]) ProcessWatermark(wm int64) error { return j.keyed.watermark(wm) }

func (j *IntervalJoin[K, L, R, OUT]) Finish() error {
	j.keyed.finish()
	return nil
}

func (j *IntervalJoin[K, L, R, OUT]) Close() error {
	j.keyed.close()
	if c, ok := j.fn.(Closer); ok {
		return Wrap(j.keyed.ctx, c.Close())
	}
	return nil
}

// SetSideOutputs implements SideOutputAcceptor: the late records and what
// the function emits with EmitSide.
func (j *IntervalJoin[K, L, R, OUT]) SetSideOutputs(s *SideOutputs) { j.keyed.setSideOutputs(s) }

// ListCodec encodes a slice as its length and each element's encoding,
// length-prefixed (uvarints).
type ListCodec[T any] struct{ Elem codec.Codec[T] }

func (c ListCodec[T]) Append(dst []byte, vs []T) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(vs)))
	var buf []byte
	for i, v := range vs {
		var err error
		if buf, err = c.Elem.Append(buf[:0], v); err != nil {
			return dst, fmt.Errorf("list element %d: %w", i, err)
		}
		dst = binary.AppendUvarint(dst, uint64(len(buf)))
		dst = append(dst, buf...)
	}
	return dst, nil
}

func (c ListCodec[T]) Decode(src []byte) ([]T, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)) {
		return nil, fmt.Errorf("list length: %w", state.ErrCorruptSnapshot)
	}
	src = src[k:]
	out := make([]T, 0, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(src)
		if k <= 0 || l > uint64(len(src)-k) {
			return nil, fmt.Errorf("list element %d: %w", i, state.ErrCorruptSnapshot)
		}
		v, err := c.Elem.Decode(src[k : k+int(l)])
		if err != nil {
			return nil, fmt.Errorf("list element %d: %w", i, err)
		}
		out = append(out, v)
		src = src[k+int(l):]
	}
	if len(src) != 0 {
		return nil, fmt.Errorf("list: %d trailing bytes: %w", len(src), state.ErrCorruptSnapshot)
	}
	return out, nil
}
