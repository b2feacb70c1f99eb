package sluice

import (
	"fmt"

	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// ConnectedKeyedStreams are two keyed streams with the same key type,
// processed together by a keyed two-input function (KeyedCoProcess), as
// Flink's ConnectedStreams of two KeyedStreams.
type ConnectedKeyedStreams[K comparable, A, B any] struct {
	a *KeyedStream[K, A]
	b *KeyedStream[K, B]
}

// ConnectKeyed pairs two keyed streams for KeyedCoProcess. Both must
// encode their keys with the same codec (KeyBy's default for K, or equal
// KeyByCodec codecs): the key group of a record is the hash of its encoded
// key, so equal keys of either input meet on one subtask only then.
func ConnectKeyed[K comparable, A, B any](a *KeyedStream[K, A], b *KeyedStream[K, B]) *ConnectedKeyedStreams[K, A, B] {
	checkSameKeying(a, b, "ConnectKeyed")
	return &ConnectedKeyedStreams[K, A, B]{a: a, b: b}
}

// checkSameKeying refuses two keyed streams that cannot meet by key.
func checkSameKeying[K comparable, A, B any](a *KeyedStream[K, A], b *KeyedStream[K, B], what string) {
	env := a.stream.env
	if b.stream.env != env {
		env.addErr(fmt.Errorf("%w: %s of streams from different environments", ErrInvalidOption, what))
		return
	}
	if ca, cb := state.CodecID(a.keyCodec), state.CodecID(b.keyCodec); ca != cb {
		env.addErr(fmt.Errorf("%w: %s of streams keyed with different key codecs (%s and %s): equal keys would not meet on one subtask", ErrInvalidOption, what, ca, cb))
	}
}

// KeyedCoProcessFunction processes the records of two connected keyed
// streams with access to the current key, keyed state and timers, as
// Flink's KeyedCoProcessFunction. It may implement
// Open(*OperatorContext) error, Close() error and
// OnTimer(*KeyedContext[K], int64, Collector[OUT]) error.
type KeyedCoProcessFunction[K comparable, A, B, OUT any] = operators.KeyedCoProcessFunction[K, A, B, OUT]

// KeyedCoProcess runs fn on the records of both connected keyed streams:
// ProcessElement1 for the first, ProcessElement2 for the second, with the
// record's key current in keyed state and the timer service; its timers
// (event and processing time) fire OnTimer with their key. Its side
// outputs are taken with SideOutput.
//
//	enriched := sluice.KeyedCoProcess(sluice.ConnectKeyed(
//		sluice.KeyBy(orders, Order.CustomerID), sluice.KeyBy(customers, Customer.ID)),
//		&enrich{}, sluice.UID("enrich"))
func KeyedCoProcess[K comparable, A, B, OUT any](c *ConnectedKeyedStreams[K, A, B], fn KeyedCoProcessFunction[K, A, B, OUT], opts ...OpOption) *Stream[OUT] {
	env := c.a.stream.env
	n, _ := newNode[OUT](env, "KeyedCoProcess", opts, true)
	n.Keyed, n.KeyCodec = true, c.a.keyCodec
	env.bindQueryables(n, c.a.keyCodec)
	a, b := c.a, c.b
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewKeyedCoProcess(cloneFunction(fn), a.keyOf, b.keyOf, a.keyCodec, out.(operators.Output[OUT]))
		return op, []any{op.Input1(), op.Input2()}, nil
	}
	connect(a.stream, n, 0)
	connect(b.stream, n, 1)
	return newStream[OUT](env, n)
}
