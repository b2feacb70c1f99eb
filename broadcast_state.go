package sluice

import (
	"fmt"

	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// BroadcastStateDeclaration is one broadcast state of a broadcast stream,
// made by DeclareBroadcastState.
type BroadcastStateDeclaration = operators.BroadcastStateDeclaration

// DeclareBroadcastState declares the broadcast state d describes: a map
// that every subtask of the operator processing the broadcast stream holds
// a copy of.
func DeclareBroadcastState[K comparable, V any](d state.MapStateDescriptor[K, V]) BroadcastStateDeclaration {
	return operators.DeclareBroadcastState(d)
}

// BroadcastStream is a stream whose every record goes to every subtask of
// the operator it is connected with, together with the broadcast states
// that operator holds, as Flink's BroadcastStream.
type BroadcastStream[T any] struct {
	stream *Stream[T]
	decls  []BroadcastStateDeclaration
}

// NewBroadcastStream makes s a broadcast stream with the broadcast states
// states (Flink's stream.broadcast(descriptors...)); process it with
// ProcessBroadcast or ProcessKeyedBroadcast.
//
//	rulesDesc := state.MapStateDescriptor[string, Rule]{Name: "rules"}
//	rules := sluice.NewBroadcastStream(ruleUpdates, sluice.DeclareBroadcastState(rulesDesc))
//	alerts := sluice.ProcessKeyedBroadcast(sluice.KeyBy(events, Event.User), rules, &matchRules{}, sluice.UID("match"))
func NewBroadcastStream[T any](s *Stream[T], states ...BroadcastStateDeclaration) *BroadcastStream[T] {
	seen := map[string]bool{}
	for _, d := range states {
		if d.Name == "" || seen[d.Name] {
			s.env.addErr(fmt.Errorf("%w: broadcast stream: broadcast state names must be given and unique, got %q", ErrInvalidOption, d.Name))
		}
		seen[d.Name] = true
	}
	if len(states) == 0 {
		s.env.addErr(fmt.Errorf("%w: broadcast stream without a broadcast state", ErrInvalidOption))
	}
	return &BroadcastStream[T]{stream: s.Broadcast(), decls: states}
}

// BroadcastProcessFunction processes a non-keyed stream connected with a
// broadcast stream, as Flink's BroadcastProcessFunction.
type BroadcastProcessFunction[IN, BC, OUT any] = operators.BroadcastProcessFunction[IN, BC, OUT]

// KeyedBroadcastProcessFunction processes a keyed stream connected with a
// broadcast stream, as Flink's KeyedBroadcastProcessFunction; it may
// implement OnTimer(*KeyedReadOnlyBroadcastContext[K], int64,
// Collector[OUT]) error.
type KeyedBroadcastProcessFunction[K comparable, IN, BC, OUT any] = operators.KeyedBroadcastProcessFunction[K, IN, BC, OUT]

// The contexts of broadcast process functions: read-only broadcast state
// on the non-broadcast side, writable on the broadcast side.
type (
	ReadOnlyBroadcastContext                    = operators.ReadOnlyBroadcastContext
	BroadcastContext                            = operators.BroadcastContext
	KeyedReadOnlyBroadcastContext[K comparable] = operators.KeyedReadOnlyBroadcastContext[K]
	KeyedBroadcastContext[K comparable]         = operators.KeyedBroadcastContext[K]
)

// GetBroadcastState returns the broadcast state d describes for writing,
// from a broadcast side's context (*BroadcastContext,
// *KeyedBroadcastContext). d must be one the broadcast stream declared.
func GetBroadcastState[K comparable, V any](ctx operators.BroadcastWriter, d state.MapStateDescriptor[K, V]) (state.BroadcastState[K, V], error) {
	return operators.GetBroadcastState(ctx, d)
}

// GetReadOnlyBroadcastState returns the broadcast state d describes,
// read-only, from any context of a broadcast process function.
func GetReadOnlyBroadcastState[K comparable, V any](ctx operators.BroadcastReader, d state.MapStateDescriptor[K, V]) (state.ReadOnlyBroadcastState[K, V], error) {
	return operators.GetReadOnlyBroadcastState(ctx, d)
}

// ProcessBroadcast runs fn on a non-keyed stream (ProcessElement) and a
// broadcast stream (ProcessBroadcastElement), as Flink's
// BroadcastConnectedStream.process. Every subtask checkpoints its copy of
// the broadcast states; restored with another parallelism, subtask i
// gets the copy of old subtask i mod the old parallelism.
func ProcessBroadcast[IN, BC, OUT any](s *Stream[IN], b *BroadcastStream[BC], fn BroadcastProcessFunction[IN, BC, OUT], opts ...OpOption) *Stream[OUT] {
	env := s.env
	if b.stream.env != env {
		env.addErr(fmt.Errorf("%w: ProcessBroadcast of streams from different environments", ErrInvalidOption))
	}
	n, _ := newNode[OUT](env, "BroadcastProcess", opts, true)
	decls := b.decls
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewBroadcastProcess(cloneFunction(fn), decls, out.(operators.Output[OUT]))
		return op, []any{op.Input1(), op.Input2()}, nil
	}
	connect(s, n, 0)
	connect(b.stream, n, 1)
	return newStream[OUT](env, n)
}

// ProcessKeyedBroadcast runs fn on a keyed stream (ProcessElement, with
// keyed state and timers, broadcast state read-only) and a broadcast
// stream (ProcessBroadcastElement, broadcast state writable,
// ApplyToKeyedState), as Flink's keyed BroadcastConnectedStream.process.
// Broadcast state is checkpointed and rescaled as ProcessBroadcast's,
// keyed state and timers as any keyed operator's.
func ProcessKeyedBroadcast[K comparable, IN, BC, OUT any](ks *KeyedStream[K, IN], b *BroadcastStream[BC], fn KeyedBroadcastProcessFunction[K, IN, BC, OUT], opts ...OpOption) *Stream[OUT] {
	env := ks.stream.env
	if b.stream.env != env {
		env.addErr(fmt.Errorf("%w: ProcessKeyedBroadcast of streams from different environments", ErrInvalidOption))
	}
	n, _ := newNode[OUT](env, "KeyedBroadcastProcess", opts, true)
	n.Keyed, n.KeyCodec = true, ks.keyCodec
	env.bindQueryables(n, ks.keyCodec)
	decls := b.decls
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewKeyedBroadcastProcess(cloneFunction(fn), ks.keyOf, ks.keyCodec, decls, out.(operators.Output[OUT]))
		return op, []any{op.Input1(), op.Input2()}, nil
	}
	connect(ks.stream, n, 0)
	connect(b.stream, n, 1)
	return newStream[OUT](env, n)
}
