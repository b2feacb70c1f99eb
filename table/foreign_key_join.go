package table

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// ForeignKeyJoin joins two tables on a foreign key: each key of the left
// table whose value references (through fk) a key of the right table that
// has a value gets fn(left, right) (Kafka Streams' foreign-key
// KTable-KTable inner join). The result is keyed as the left table. A
// change on either side updates the result: a left value that now
// references another key (a key that moves) is joined with that key's
// value, a right change reaches every left key that references it, and
// the result gets a tombstone when its left key is deleted or, inner, when
// the referenced right key has no value.
//
// The tables may be partitioned differently, as in Kafka Streams: the join
// is three keyed operators, named and identified (uid) by name plus
// "-subscribe" (keyed by the left key: remembers each left key's foreign
// key and sends subscriptions), "-lookup" (keyed by the right key: holds
// the right table and the left keys that reference each of its keys, and
// answers each subscription and each right change) and "-resolve" (keyed
// by the left key: keeps the newest answer per left key and emits the
// result); opts (parallelism and such) apply to all three. Answers carry
// the version of the left value they were made for, so an answer
// overtaken by a newer left change (the left key moved on) is dropped: the
// result converges to the join of both tables' latest values, and never
// goes back to an older version of either side. A deleted left key keeps
// its version (a few bytes) in the first and last operators' state, for
// answers to its earlier values that may still be on the way.
func ForeignKeyJoin[K comparable, L any, KR comparable, R, OUT any](name string, left *Table[K, L], right *Table[KR, R], fk func(L) KR, fn func(L, R) (OUT, error), opts ...sluice.OpOption) *Table[K, OUT] {
	return buildForeignKeyJoin(name, left, right, fk, true, func(l L, r *R) (OUT, error) { return fn(l, *r) }, opts)
}

// ForeignKeyLeftJoin is ForeignKeyJoin keeping every key of the left
// table: fn gets nil when the referenced right key has no value.
func ForeignKeyLeftJoin[K comparable, L any, KR comparable, R, OUT any](name string, left *Table[K, L], right *Table[KR, R], fk func(L) KR, fn func(L, *R) (OUT, error), opts ...sluice.OpOption) *Table[K, OUT] {
	return buildForeignKeyJoin(name, left, right, fk, false, fn, opts)
}

func buildForeignKeyJoin[K comparable, L any, KR comparable, R, OUT any](name string, left *Table[K, L], right *Table[KR, R], fk func(L) KR, inner bool, fn func(L, *R) (OUT, error), opts []sluice.OpOption) *Table[K, OUT] {
	with := func(suffix string) []sluice.OpOption {
		return append(append([]sluice.OpOption(nil), opts...), sluice.Name(name+suffix), sluice.UID(name+suffix))
	}
	subCodec := subscriptionCodec[K, KR, L]{k: left.keyCodec, kr: right.keyCodec, l: left.valueCodec}
	respCodec := responseCodec[K, L, R]{k: left.keyCodec, l: left.valueCodec, r: right.valueCodec}

	subscribe := &fkSubscribe[K, KR, L]{fk: fk, desc: state.ValueStateDescriptor[fkLeft[KR]]{Name: "foreign-key",
		Codec: fkLeftCodec[KR]{right.keyCodec}}}
	subs := sluice.Process(left.keyed(), sluice.KeyedProcessFunction[K, Change[K, L], subscription[K, KR, L]](subscribe),
		append(with("-subscribe"), sluice.WithCodec[subscription[K, KR, L]](subCodec))...)

	lookup := &fkLookup[K, KR, L, R]{
		rightDesc: state.ValueStateDescriptor[R]{Name: "right", Codec: right.valueCodec},
		subsDesc: state.MapStateDescriptor[K, subscriber[L]]{Name: "subscribers", KeyCodec: left.keyCodec,
			ValueCodec: subscriberCodec[L]{left.valueCodec}},
	}
	responses := sluice.KeyedCoProcess(
		sluice.ConnectKeyed(sluice.KeyByCodec(subs, func(s subscription[K, KR, L]) KR { return s.FK }, right.keyCodec), right.keyed()),
		sluice.KeyedCoProcessFunction[KR, subscription[K, KR, L], Change[KR, R], response[K, L, R]](lookup),
		append(with("-lookup"), sluice.WithCodec[response[K, L, R]](respCodec))...)

	resolve := &fkResolve[K, L, R, OUT]{inner: inner, fn: fn, desc: state.ValueStateDescriptor[fkResolved]{Name: "answered"}}
	out := sluice.Process(sluice.KeyByCodec(responses, func(r response[K, L, R]) K { return r.Key }, left.keyCodec),
		sluice.KeyedProcessFunction[K, response[K, L, R], Change[K, OUT]](resolve), with("-resolve")...)
	return derive(left, out)
}

// Subscription operations.
const (
	opSubscribe   uint8 = iota // the left key references FK with this value
	opUnsubscribe              // the left key no longer references FK
	opDelete                   // the left key is deleted (it referenced FK)
)

// subscription goes from a left key to the right key it references.
type subscription[K comparable, KR comparable, L any] struct {
	FK      KR
	Key     K
	Version uint64
	Op      uint8
	Left    L // with opSubscribe
}

// response goes from a right key back to a left key that references it.
type response[K comparable, L, R any] struct {
	Key     K
	Version uint64
	Deleted bool // the left key is deleted
	Left    L
	Right   R
	Found   bool // the right key has a value
}

// fkLeft is what the subscribe side keeps per left key: its version
// (every change of the left key counts one) and its foreign key.
type fkLeft[KR comparable] struct {
	Version uint64
	Has     bool
	FK      KR
}

// fkSubscribe turns the left table's changes into subscriptions.
type fkSubscribe[K comparable, KR comparable, L any] struct {
	fk   func(L) KR
	desc state.ValueStateDescriptor[fkLeft[KR]]
	st   state.ValueState[fkLeft[KR]]
}

func (f *fkSubscribe[K, KR, L]) Open(ctx *sluice.OperatorContext) error {
	var err error
	f.st, err = state.GetValueState(ctx.KeyedState, f.desc)
	return err
}

func (f *fkSubscribe[K, KR, L]) ProcessElement(ctx *sluice.KeyedContext[K], c Change[K, L], out sluice.Collector[subscription[K, KR, L]]) error {
	prev, _, err := f.st.Value()
	if err != nil {
		return err
	}
	if c.Delete && !prev.Has {
		return nil
	}
	next := fkLeft[KR]{Version: prev.Version + 1}
	if c.Delete {
		out.Collect(subscription[K, KR, L]{FK: prev.FK, Key: ctx.Key(), Version: next.Version, Op: opDelete})
		return f.st.Update(next)
	}
	next.Has, next.FK = true, f.fk(c.Value)
	if prev.Has && prev.FK != next.FK {
		out.Collect(subscription[K, KR, L]{FK: prev.FK, Key: ctx.Key(), Version: next.Version, Op: opUnsubscribe})
	}
	out.Collect(subscription[K, KR, L]{FK: next.FK, Key: ctx.Key(), Version: next.Version, Op: opSubscribe, Left: c.Value})
	return f.st.Update(next)
}

// subscriber is a left key referencing a right key, with the left value.
type subscriber[L any] struct {
	Version uint64
	Left    L
}

// fkLookup holds the right table and, per right key, the left keys that
// reference it; it answers subscriptions and fans right changes out.
type fkLookup[K comparable, KR comparable, L, R any] struct {
	rightDesc state.ValueStateDescriptor[R]
	subsDesc  state.MapStateDescriptor[K, subscriber[L]]
	right     state.ValueState[R]
	subs      state.MapState[K, subscriber[L]]
}

func (f *fkLookup[K, KR, L, R]) Open(ctx *sluice.OperatorContext) error {
	var err error
	if f.right, err = state.GetValueState(ctx.KeyedState, f.rightDesc); err != nil {
		return err
	}
	f.subs, err = state.GetMapState(ctx.KeyedState, f.subsDesc)
	return err
}

// ProcessElement1 takes a subscription.
func (f *fkLookup[K, KR, L, R]) ProcessElement1(_ *sluice.KeyedContext[KR], s subscription[K, KR, L], out sluice.Collector[response[K, L, R]]) error {
	switch s.Op {
	case opUnsubscribe:
		return f.subs.Remove(s.Key)
	case opDelete:
		if err := f.subs.Remove(s.Key); err != nil {
			return err
		}
		out.Collect(response[K, L, R]{Key: s.Key, Version: s.Version, Deleted: true})
		return nil
	}
	if err := f.subs.Put(s.Key, subscriber[L]{Version: s.Version, Left: s.Left}); err != nil {
		return err
	}
	r, found, err := f.right.Value()
	if err != nil {
		return err
	}
	out.Collect(response[K, L, R]{Key: s.Key, Version: s.Version, Left: s.Left, Right: r, Found: found})
	return nil
}

// ProcessElement2 takes a change of the right table and answers every
// left key that references it.
func (f *fkLookup[K, KR, L, R]) ProcessElement2(_ *sluice.KeyedContext[KR], c Change[KR, R], out sluice.Collector[response[K, L, R]]) error {
	var err error
	if c.Delete {
		err = f.right.Clear()
	} else {
		err = f.right.Update(c.Value)
	}
	if err != nil {
		return err
	}
	return f.subs.Iterate(func(k K, s subscriber[L]) bool {
		out.Collect(response[K, L, R]{Key: k, Version: s.Version, Left: s.Left, Right: c.Value, Found: !c.Delete})
		return true
	})
}

// fkResolved is what the resolve side keeps per left key: the newest
// version answered, and whether the result has a row for the key.
type fkResolved struct {
	Version uint64
	Emitted bool
}

// fkResolve keeps the newest answer per left key and emits the result.
type fkResolve[K comparable, L, R, OUT any] struct {
	inner bool
	fn    func(L, *R) (OUT, error)
	desc  state.ValueStateDescriptor[fkResolved]
	st    state.ValueState[fkResolved]
}

func (f *fkResolve[K, L, R, OUT]) Open(ctx *sluice.OperatorContext) error {
	var err error
	f.st, err = state.GetValueState(ctx.KeyedState, f.desc)
	return err
}

func (f *fkResolve[K, L, R, OUT]) ProcessElement(ctx *sluice.KeyedContext[K], r response[K, L, R], out sluice.Collector[Change[K, OUT]]) error {
	st, _, err := f.st.Value()
	if err != nil {
		return err
	}
	if r.Version < st.Version {
		return nil // an answer for an older value of the left key
	}
	st.Version = r.Version
	switch {
	case !r.Deleted && (r.Found || !f.inner):
		res, err := f.fn(r.Left, ptr(r.Right, r.Found))
		if err != nil {
			return err
		}
		out.Collect(Upsert(ctx.Key(), res))
		st.Emitted = true
	case st.Emitted:
		out.Collect(Tombstone[K, OUT](ctx.Key()))
		st.Emitted = false
	}
	return f.st.Update(st)
}

// The codecs of the join's messages and state: built from the tables'
// codecs, each field length-prefixed.

type subscriptionCodec[K comparable, KR comparable, L any] struct {
	k  codec.Codec[K]
	kr codec.Codec[KR]
	l  codec.Codec[L]
}

func (c subscriptionCodec[K, KR, L]) Append(dst []byte, s subscription[K, KR, L]) ([]byte, error) {
	w := fieldWriter{dst: dst}
	appendField(&w, c.kr, s.FK)
	appendField(&w, c.k, s.Key)
	w.uvarint(s.Version)
	w.byte(s.Op)
	if s.Op == opSubscribe {
		appendField(&w, c.l, s.Left)
	}
	return w.dst, w.err
}

func (c subscriptionCodec[K, KR, L]) Decode(src []byte) (subscription[K, KR, L], error) {
	r := newFieldReader(src, "foreign-key subscription")
	var s subscription[K, KR, L]
	s.FK = readField(&r, c.kr)
	s.Key = readField(&r, c.k)
	s.Version = r.uvarint()
	s.Op = r.byte()
	if s.Op == opSubscribe {
		s.Left = readField(&r, c.l)
	}
	return s, r.done()
}

type responseCodec[K comparable, L, R any] struct {
	k codec.Codec[K]
	l codec.Codec[L]
	r codec.Codec[R]
}

func (c responseCodec[K, L, R]) Append(dst []byte, s response[K, L, R]) ([]byte, error) {
	w := fieldWriter{dst: dst}
	appendField(&w, c.k, s.Key)
	w.uvarint(s.Version)
	flags := byte(0)
	if s.Deleted {
		flags |= 1
	}
	if s.Found {
		flags |= 2
	}
	w.byte(flags)
	if !s.Deleted {
		appendField(&w, c.l, s.Left)
		if s.Found {
			appendField(&w, c.r, s.Right)
		}
	}
	return w.dst, w.err
}

func (c responseCodec[K, L, R]) Decode(src []byte) (response[K, L, R], error) {
	rd := newFieldReader(src, "foreign-key answer")
	var s response[K, L, R]
	s.Key = readField(&rd, c.k)
	s.Version = rd.uvarint()
	flags := rd.byte()
	s.Deleted, s.Found = flags&1 != 0, flags&2 != 0
	if !s.Deleted {
		s.Left = readField(&rd, c.l)
		if s.Found {
			s.Right = readField(&rd, c.r)
		}
	}
	return s, rd.done()
}

type fkLeftCodec[KR comparable] struct{ kr codec.Codec[KR] }

func (c fkLeftCodec[KR]) Append(dst []byte, v fkLeft[KR]) ([]byte, error) {
	w := fieldWriter{dst: dst}
	w.uvarint(v.Version)
	if !v.Has {
		w.byte(0)
		return w.dst, w.err
	}
	w.byte(1)
	appendField(&w, c.kr, v.FK)
	return w.dst, w.err
}

func (c fkLeftCodec[KR]) Decode(src []byte) (fkLeft[KR], error) {
	r := newFieldReader(src, "foreign-key state")
	var v fkLeft[KR]
	v.Version = r.uvarint()
	if v.Has = r.byte() == 1; v.Has {
		v.FK = readField(&r, c.kr)
	}
	return v, r.done()
}

type subscriberCodec[L any] struct{ l codec.Codec[L] }

func (c subscriberCodec[L]) Append(dst []byte, v subscriber[L]) ([]byte, error) {
	w := fieldWriter{dst: dst}
	w.uvarint(v.Version)
	appendField(&w, c.l, v.Left)
	return w.dst, w.err
}

func (c subscriberCodec[L]) Decode(src []byte) (subscriber[L], error) {
	r := newFieldReader(src, "foreign-key subscriber")
	var v subscriber[L]
	v.Version = r.uvarint()
	v.Left = readField(&r, c.l)
	return v, r.done()
}
