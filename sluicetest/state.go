package sluicetest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// TimeDomain says which clock a timer waits for.
type TimeDomain = operators.TimeDomain

// The time domains of timers.
const (
	EventTime      = operators.EventTime
	ProcessingTime = operators.ProcessingTime
)

// Timer is a timer an operator has registered: for a key, at a timestamp,
// in a time domain. A window operator's timers are those of its windows
// (the end - 1 of a window, its cleanup time with allowed lateness).
type Timer[K comparable] struct {
	Key       K
	Timestamp int64
	Domain    TimeDomain
}

// WithKeyedState calls fn with the keyed state backend of the subtask
// that owns key, with key current: fn reads (or writes) the key's state
// with the state package's functions as the operator's function does.
// Value, List and Map are shortcuts for the common reads.
func WithKeyedState[K comparable](h OperatorHarness, key K, fn func(b state.KeyedBackend) error) {
	c := h.harnessCore()
	c.tb.Helper()
	kc := keyCodec[K](c)
	kb, err := kc.Append(nil, key)
	c.check(fmt.Sprintf("encode key %v", key), err)
	kg := state.KeyGroupFor(kb, c.maxPar)
	b := c.subs[state.OperatorIndexFor(kg, c.maxPar, c.par)].oc.KeyedState
	b.SetCurrentKey(kb, kg)
	c.check(fmt.Sprintf("keyed state of key %v", key), fn(b))
}

// Value returns the value the keyed ValueState d describes holds for key,
// and whether it holds one. The operator must have registered the state.
func Value[K comparable, T any](h OperatorHarness, key K, d state.ValueStateDescriptor[T]) (v T, ok bool) {
	c := h.harnessCore()
	c.tb.Helper()
	requireState(c, d)
	WithKeyedState(h, key, func(b state.KeyedBackend) error {
		s, err := state.GetValueState(b, d)
		if err == nil {
			v, ok, err = s.Value()
		}
		return err
	})
	return v, ok
}

// List returns the elements the keyed ListState d describes holds for key.
func List[K comparable, T any](h OperatorHarness, key K, d state.ListStateDescriptor[T]) (vs []T) {
	c := h.harnessCore()
	c.tb.Helper()
	requireState(c, d)
	WithKeyedState(h, key, func(b state.KeyedBackend) error {
		s, err := state.GetListState(b, d)
		if err == nil {
			vs, err = s.Get()
		}
		return err
	})
	return vs
}

// Map returns the entries the keyed MapState d describes holds for key.
func Map[K comparable, MK comparable, V any](h OperatorHarness, key K, d state.MapStateDescriptor[MK, V]) map[MK]V {
	c := h.harnessCore()
	c.tb.Helper()
	requireState(c, d)
	m := map[MK]V{}
	WithKeyedState(h, key, func(b state.KeyedBackend) error {
		s, err := state.GetMapState(b, d)
		if err != nil {
			return err
		}
		return s.Iterate(func(k MK, v V) bool {
			m[k] = v
			return true
		})
	})
	return m
}

// Keys returns the keys that have state in the keyed state named
// stateName (of the default namespace: not a window's), over every
// subtask, ordered by their encoded bytes.
func Keys[K comparable](h OperatorHarness, stateName string) []K {
	c := h.harnessCore()
	c.tb.Helper()
	kc := keyCodec[K](c)
	var encoded [][]byte
	for _, s := range c.subs {
		err := s.oc.KeyedState.Keys(stateName, nil, func(key []byte, _ int) error {
			encoded = append(encoded, bytes.Clone(key))
			return nil
		})
		c.check(fmt.Sprintf("keys of state %q", stateName), err)
	}
	slices.SortFunc(encoded, bytes.Compare)
	keys := make([]K, len(encoded))
	for i, kb := range encoded {
		k, err := kc.Decode(kb)
		c.check(fmt.Sprintf("decode key %q of state %q", kb, stateName), err)
		keys[i] = k
	}
	return keys
}

// Timers returns the timers the operator has registered, over every
// subtask: what a checkpoint would hold. They are ordered by domain
// (event time first), timestamp and encoded key.
func Timers[K comparable](h OperatorHarness) []Timer[K] {
	c := h.harnessCore()
	c.tb.Helper()
	kc := keyCodec[K](c)
	type raw struct {
		key []byte
		t   Timer[K]
	}
	var all []raw
	for _, s := range c.subs {
		c.check(fmt.Sprintf("flush the timers of subtask %d", s.index), s.oc.FlushKeyedState())
		err := operators.RegisteredTimers(s.oc.KeyedState, func(key []byte, d operators.TimeDomain, ts int64, _ []byte) error {
			k, err := kc.Decode(key)
			if err != nil {
				return fmt.Errorf("decode the key %q of a timer: %w", key, err)
			}
			all = append(all, raw{key: bytes.Clone(key), t: Timer[K]{Key: k, Timestamp: ts, Domain: d}})
			return nil
		})
		c.check(fmt.Sprintf("timers of subtask %d", s.index), err)
	}
	slices.SortFunc(all, func(a, b raw) int {
		if a.t.Domain != b.t.Domain {
			return int(a.t.Domain) - int(b.t.Domain)
		}
		if a.t.Timestamp != b.t.Timestamp {
			if a.t.Timestamp < b.t.Timestamp {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.key, b.key)
	})
	ts := make([]Timer[K], len(all))
	for i, r := range all {
		ts[i] = r.t
	}
	return ts
}

// SideOutput returns the records the operator emitted to the side output
// tag, in the order they were emitted. The build function must have taken
// that side output (sluice.SideOutput on the operator's output), as the
// job must: records to a tag nobody takes are dropped.
func SideOutput[T any](h OperatorHarness, tag sluice.OutputTag[T]) []Record[T] {
	c := h.harnessCore()
	c.tb.Helper()
	so, ok := c.sides[tag.Name()]
	if !ok {
		names := make([]string, 0, len(c.sides))
		for n := range c.sides {
			names = append(names, n)
		}
		slices.Sort(names)
		c.fail("no side output %q (taken: %s): take it in the build function with sluice.SideOutput(out, tag)", tag.Name(), quoteAll(names))
	}
	out := make([]Record[T], len(so.records))
	for i, r := range so.records {
		v, ok := r.Value.(T)
		if !ok {
			c.fail("side output %q carries %T records, not %T", tag.Name(), r.Value, *new(T))
		}
		out[i] = Record[T]{Value: v, Timestamp: r.Timestamp, Subtask: r.Subtask}
	}
	return out
}

// keyCodec is the operator's key codec, as a codec of K.
func keyCodec[K comparable](c *core) codec.Codec[K] {
	c.tb.Helper()
	if !c.node.Keyed || c.node.KeyCodec == nil {
		c.fail("the operator is not keyed: it has no keyed state or timers")
	}
	kc, ok := c.node.KeyCodec.(codec.Codec[K])
	if !ok {
		c.fail("the operator's keys are encoded by %T, not by a codec of %T: read them with the key type the stream is keyed by", c.node.KeyCodec, *new(K))
	}
	return kc
}

// requireState fails the test unless the operator registered the state d
// describes: reading one it never made would make it (and put it into
// every snapshot), and find nothing.
func requireState(c *core, d state.Descriptor) {
	c.tb.Helper()
	m, err := d.Meta()
	c.check("state descriptor", err)
	if !c.node.Keyed {
		c.fail("the operator is not keyed: it has no keyed state %q", m.Name)
	}
	var names []string
	for _, s := range c.subs {
		for _, sm := range s.oc.KeyedState.States() {
			if sm.Name == m.Name {
				return
			}
			if !slices.Contains(names, sm.Name) && !strings.HasPrefix(sm.Name, "_") {
				names = append(names, sm.Name)
			}
		}
	}
	slices.Sort(names)
	c.fail("no keyed state %q (the operator has %s)", m.Name, quoteAll(names))
}

// BroadcastState returns the entries of the broadcast state d describes
// as subtask holds them (every subtask holds a copy). d must be one the
// broadcast stream declared.
func BroadcastState[K comparable, V any](h OperatorHarness, d state.MapStateDescriptor[K, V], subtask int) map[K]V {
	c := h.harnessCore()
	c.tb.Helper()
	if subtask < 0 || subtask >= c.par {
		c.fail("no subtask %d: the operator has %d", subtask, c.par)
	}
	bs, err := state.GetBroadcastState(c.subs[subtask].oc.OperatorState, d)
	c.check(fmt.Sprintf("broadcast state %q", d.Name), err)
	m := map[K]V{}
	c.check(fmt.Sprintf("broadcast state %q", d.Name), bs.Iterate(func(k K, v V) bool {
		m[k] = v
		return true
	}))
	return m
}
