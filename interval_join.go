package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
)

// ProcessJoinFunction sees each pair of joined records, as Flink's
// ProcessJoinFunction; ProcessJoinFunc adapts a function.
type ProcessJoinFunction[L, R, OUT any] = operators.ProcessJoinFunction[L, R, OUT]

// ProcessJoinFunc adapts a function to a ProcessJoinFunction.
type ProcessJoinFunc[L, R, OUT any] = operators.ProcessJoinFunc[L, R, OUT]

// JoinContext is the context of a ProcessJoinFunction: both records'
// timestamps, the result's, side outputs (EmitSide) and the runtime.
type JoinContext = operators.JoinContext

// IntervalJoining is two keyed streams waiting for the bounds of their
// interval join (Between), as Flink's KeyedStream.IntervalJoin.
type IntervalJoining[K comparable, L, R any] struct {
	left  *KeyedStream[K, L]
	right *KeyedStream[K, R]
}

// IntervalJoin joins two keyed streams by key and event time: each left
// record at time t with each right record of its key in [t+lower,
// t+upper] (Between), as Flink's left.intervalJoin(right). Both streams
// must encode their keys with the same codec (see ConnectKeyed).
//
//	matched := sluice.ProcessIntervalJoin(
//		sluice.IntervalJoin(sluice.KeyBy(impressions, Impression.AdID), sluice.KeyBy(clicks, Click.AdID)).
//			Between(0, 10*time.Minute),
//		sluice.ProcessJoinFunc[Impression, Click, Attributed](attribute), sluice.UID("attribution"))
func IntervalJoin[K comparable, L, R any](left *KeyedStream[K, L], right *KeyedStream[K, R]) *IntervalJoining[K, L, R] {
	checkSameKeying(left, right, "IntervalJoin")
	return &IntervalJoining[K, L, R]{left: left, right: right}
}

// Between sets the interval of right timestamps relative to each left
// record's, both bounds inclusive; lower must not exceed upper.
func (j *IntervalJoining[K, L, R]) Between(lower, upper time.Duration) *IntervalJoined[K, L, R] {
	env := j.left.stream.env
	if lower > upper {
		env.addErr(fmt.Errorf("%w: interval join: lower bound %v above the upper bound %v", ErrInvalidOption, lower, upper))
	}
	if lower%time.Millisecond != 0 || upper%time.Millisecond != 0 {
		env.addErr(fmt.Errorf("%w: interval join: bounds %v and %v must be whole milliseconds (event time is in milliseconds)", ErrInvalidOption, lower, upper))
	}
	return &IntervalJoined[K, L, R]{j: j, lower: lower.Milliseconds(), upper: upper.Milliseconds()}
}

// IntervalJoined is an interval join with its bounds, waiting for its
// function (ProcessIntervalJoin), as Flink's IntervalJoined.
type IntervalJoined[K comparable, L, R any] struct {
	j                         *IntervalJoining[K, L, R]
	lower, upper              int64
	lowerExcl, upperExcl      bool
	leftLateTag, rightLateTag string
}

// LowerBoundExclusive excludes the lower bound from the interval.
func (ij *IntervalJoined[K, L, R]) LowerBoundExclusive() *IntervalJoined[K, L, R] {
	c := *ij
	c.lowerExcl = true
	return &c
}

// UpperBoundExclusive excludes the upper bound from the interval.
func (ij *IntervalJoined[K, L, R]) UpperBoundExclusive() *IntervalJoined[K, L, R] {
	c := *ij
	c.upperExcl = true
	return &c
}

// SideOutputLeftLateData sends the left records that arrive at or below
// the watermark (they join nothing) to the side output tag instead of
// dropping them; take them with SideOutput on the join's stream.
func (ij *IntervalJoined[K, L, R]) SideOutputLeftLateData(tag OutputTag[L]) *IntervalJoined[K, L, R] {
	c := *ij
	c.leftLateTag = ij.lateTag(tag.name)
	return &c
}

// SideOutputRightLateData is SideOutputLeftLateData for the right input.
func (ij *IntervalJoined[K, L, R]) SideOutputRightLateData(tag OutputTag[R]) *IntervalJoined[K, L, R] {
	c := *ij
	c.rightLateTag = ij.lateTag(tag.name)
	return &c
}

func (ij *IntervalJoined[K, L, R]) lateTag(name string) string {
	if name == "" {
		ij.j.left.stream.env.addErr(fmt.Errorf("%w: interval join: late data output tag needs a name", ErrInvalidOption))
	}
	return name
}

// ProcessIntervalJoin runs fn on every pair the interval join finds, as
// Flink's IntervalJoined.process. Each record waits in keyed state until
// the watermark passes the last time a record of the other input could
// join it (left at t: t+upper; right at t: t-lower); results carry the
// larger of the two timestamps. A record at or below the watermark when it
// arrives is late: it joins nothing, and goes to the late side output of
// its input if one was set.
func ProcessIntervalJoin[K comparable, L, R, OUT any](ij *IntervalJoined[K, L, R], fn ProcessJoinFunction[L, R, OUT], opts ...OpOption) *Stream[OUT] {
	left, right := ij.j.left, ij.j.right
	env := left.stream.env
	cfg := operators.IntervalJoinConfig[K, L, R]{
		Lower: ij.lower, Upper: ij.upper,
		KeyOfLeft: left.keyOf, KeyOfRight: right.keyOf, KeyCodec: left.keyCodec,
		LeftCodec: streamCodec(left.stream), RightCodec: streamCodec(right.stream),
		LeftLateTag: ij.leftLateTag, RightLateTag: ij.rightLateTag,
	}
	if ij.lowerExcl {
		cfg.Lower++
	}
	if ij.upperExcl {
		cfg.Upper--
	}
	n, _ := newNode[OUT](env, "IntervalJoin", opts, true)
	n.Keyed, n.KeyCodec = true, left.keyCodec
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewIntervalJoin(cfg, cloneFunction(fn), out.(operators.Output[OUT]))
		return op, []any{op.Input1(), op.Input2()}, nil
	}
	connect(left.stream, n, 0)
	connect(right.stream, n, 1)
	return newStream[OUT](env, n)
}

// streamCodec is the codec of a stream's records: that of an operator
// producing them, or the default for the type.
func streamCodec[T any](s *Stream[T]) Codec[T] {
	for _, n := range s.from {
		if n.Out != nil {
			if c, ok := n.Out.Codec().(codec.Codec[T]); ok {
				return c
			}
		}
	}
	return defaultCodec[T](s.env)
}
