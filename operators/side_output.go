package operators

import (
	"errors"
	"fmt"
)

// ErrSideOutputType is returned (wrapped) when a record is emitted to a
// side output under a tag name whose side output carries another type.
var ErrSideOutputType = errors.New("side output of another type")

// SideOutputs are the side outputs of one operator instance (Flink's
// OutputTag outputs), by tag name. Records emitted to a name that no
// consumer asked for are dropped, as in Flink. The operator forwards its
// watermarks to every side output.
//
// Emitting never fails from the user's view: the first error is kept and
// returned by the operator after the user function returns.
type SideOutputs struct {
	byName map[string]any // operators.Output[T] as any
	all    []watermarkOutput
	// ts points at the timestamp of the operator's collector: side records
	// carry the timestamp a main-output record would carry at that moment.
	ts  *int64
	err error
}

type watermarkOutput interface {
	EmitWatermark(wm int64) error
}

// SideOutputAcceptor is implemented by operators that can emit side
// outputs: the runtime's builder hands them their side outputs before
// Open.
type SideOutputAcceptor interface {
	SetSideOutputs(s *SideOutputs)
}

// NewSideOutputs makes the side outputs named names[i] from outs[i], each
// an operators.Output[T] of the tag's type T.
func NewSideOutputs(names []string, outs []any) (*SideOutputs, error) {
	if len(names) != len(outs) {
		return nil, fmt.Errorf("%d side output names for %d outputs", len(names), len(outs))
	}
	s := &SideOutputs{byName: make(map[string]any, len(names))}
	for i, o := range outs {
		w, ok := o.(watermarkOutput)
		if !ok {
			return nil, fmt.Errorf("side output %q is %T, not an operators.Output", names[i], o)
		}
		if _, dup := s.byName[names[i]]; dup {
			return nil, fmt.Errorf("side output %q given twice", names[i])
		}
		s.byName[names[i]] = o
		s.all = append(s.all, w)
	}
	return s, nil
}

// EmitSide emits v to the side output named name, with the timestamp of
// the record (or event-time timer, or window) being processed. With no
// such side output it drops v; an error is kept and returned by the
// operator after the user function (see SideOutputs).
func EmitSide[T any](s *SideOutputs, name string, v T) {
	if s == nil || s.err != nil {
		return
	}
	o, ok := s.byName[name]
	if !ok {
		return
	}
	typed, ok := o.(Output[T])
	if !ok {
		s.err = fmt.Errorf("emit %T to side output %q: %w", v, name, ErrSideOutputType)
		return
	}
	ts := NoTimestamp
	if s.ts != nil {
		ts = *s.ts
	}
	s.err = typed.Collect(v, ts)
}

// take returns the kept error and resets it; nil-safe.
func (s *SideOutputs) take() error {
	if s == nil || s.err == nil {
		return nil
	}
	err := s.err
	s.err = nil
	return err
}

// emitWatermark forwards wm to every side output; nil-safe.
func (s *SideOutputs) emitWatermark(wm int64) error {
	if s == nil {
		return nil
	}
	for _, o := range s.all {
		if err := o.EmitWatermark(wm); err != nil {
			return err
		}
	}
	return nil
}

// SideOutputs returns the side outputs of the operator running the
// function, for EmitSide.
func (c *KeyedContext[K]) SideOutputs() *SideOutputs { return c.sides }

// SetSideOutputs implements SideOutputAcceptor: a keyed process function
// emits to them with EmitSide, with the timestamp of the record or of the
// event-time timer being processed.
func (p *KeyedProcess[K, IN, OUT]) SetSideOutputs(s *SideOutputs) {
	s.ts = &p.col.ts
	p.kctx.sides = s
}
