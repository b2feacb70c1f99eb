package sluice

import (
	"fmt"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
)

// OutputTag names a side output of an operator and gives its type, as
// Flink's OutputTag: a process function, a process window function or a
// rich function (through its OperatorContext) emits to it with EmitSide, a window operator sends its late
// records to it (WindowedStream.SideOutputLateData), and SideOutput
// returns its records as a stream.
type OutputTag[T any] struct {
	name  string
	codec Codec[T]
}

// OutputTagOption configures an OutputTag.
type OutputTagOption[T any] func(*OutputTag[T])

// TagCodec sets the codec of the side output's records, used when they
// cross the network; the default is codec.Default for the type.
func TagCodec[T any](c Codec[T]) OutputTagOption[T] {
	return func(t *OutputTag[T]) { t.codec = c }
}

// NewOutputTag returns the tag of a side output named name, unique among
// the side outputs of an operator.
func NewOutputTag[T any](name string, opts ...OutputTagOption[T]) OutputTag[T] {
	t := OutputTag[T]{name: name}
	for _, o := range opts {
		o(&t)
	}
	return t
}

// Name returns the tag's name.
func (t OutputTag[T]) Name() string { return t.name }

func (t OutputTag[T]) codecOrDefault(env *Environment) Codec[T] {
	if t.codec == nil {
		return defaultCodec[T](env)
	}
	return t.codec
}

// SideOutput returns the records that the operator producing s emits to
// the side output tag, as Flink's getSideOutput. s must come straight from
// a keyed Process, a window function, a ProcessStream or a rich map, flat
// map or filter (not from a Union). Asking twice for
// the same tag gives the same records; a tag nobody asks for is dropped.
func SideOutput[T, X any](s *Stream[X], tag OutputTag[T]) *Stream[T] {
	env := s.env
	fail := func(format string, args ...any) *Stream[T] {
		env.addErr(fmt.Errorf("%w: side output %q: %s", ErrInvalidOption, tag.name, fmt.Sprintf(format, args...)))
		return &Stream[T]{env: env}
	}
	if tag.name == "" {
		return fail("an output tag needs a name")
	}
	if len(s.from) != 1 {
		return fail("take side outputs from each stream of a union, not from the union")
	}
	n := s.from[0]
	if n.IsSide() || n.IsSource() || n.Out == nil || n.Build == nil {
		return fail("operator %q does not emit side outputs", n.Name)
	}
	for _, sn := range n.Sides {
		if sn.Name != tag.name {
			continue
		}
		if _, ok := sn.Out.Codec().(codec.Codec[T]); !ok {
			return fail("already taken from operator %q with another type than %T", n.Name, *new(T))
		}
		return newStream[T](env, sn)
	}
	sn := env.plan.AddSide(n, tag.name, runtime.TypeOf(tag.codecOrDefault(env)))
	if prev, dup := env.uids[sn.UID]; dup {
		return fail("uid %q is already used by operator %q", sn.UID, prev)
	}
	env.uids[sn.UID] = sn.Name
	if n.BuildWithSides == nil {
		build := n.Build
		n.BuildWithSides = func(out any, sides []any) (operators.Operator, []any, error) {
			op, ins, err := build(out)
			if err != nil {
				return nil, nil, err
			}
			acc, ok := op.(operators.SideOutputAcceptor)
			if c, can := op.(interface{ AcceptsSideOutputs() bool }); can && !c.AcceptsSideOutputs() {
				ok = false
			}
			if !ok {
				return nil, nil, fmt.Errorf("side outputs: operator %q (%T) does not emit side outputs; process, window and rich functions do", n.Name, op)
			}
			names := make([]string, len(n.Sides))
			for i, sn := range n.Sides {
				names[i] = sn.Name
			}
			so, err := operators.NewSideOutputs(names, sides)
			if err != nil {
				return nil, nil, fmt.Errorf("side outputs of operator %q: %w", n.Name, err)
			}
			acc.SetSideOutputs(so)
			return op, ins, nil
		}
	}
	return newStream[T](env, sn)
}

// SideOutputContext is a function context that can emit to side outputs:
// *KeyedContext, *WindowContext, *ProcessContext and *OperatorContext.
type SideOutputContext interface {
	SideOutputs() *operators.SideOutputs
}

// EmitSide emits v to the side output tag of the operator running the
// function, as Flink's Context.output: v carries the timestamp of the
// record (or event-time timer, or window) being processed. Records to a
// tag that no SideOutput asked for are dropped. Like Collector.Collect it
// does not fail: an error fails the operator after the function returns.
func EmitSide[T any](ctx SideOutputContext, tag OutputTag[T], v T) {
	operators.EmitSide(ctx.SideOutputs(), tag.name, v)
}
