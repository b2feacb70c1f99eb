package table

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/state"
)

// joinKind is which rows a table-table join keeps.
type joinKind uint8

const (
	innerJoin joinKind = iota // both sides have a value
	leftJoin                  // the left side has a value
	outerJoin                 // either side has one
)

func (k joinKind) has(left, right bool) bool {
	switch k {
	case innerJoin:
		return left && right
	case leftJoin:
		return left
	}
	return left || right
}

// Join joins two tables on their key (Kafka Streams' KTable-KTable inner
// join): the result is a table whose key has fn(left, right) while both
// tables have a value for it. A change on either side updates the result
// (an upsert with the new joined value, or a tombstone when the key no
// longer has both sides); a delete of a key the result never had emits
// nothing. Both tables must encode their keys the same way. The join keeps
// both tables in its keyed state; it runs in processing order: the
// result converges to the join of both tables' latest values, and each
// result it emits joins a version of the left value with a version of the
// right value.
func Join[K comparable, L, R, OUT any](left *Table[K, L], right *Table[K, R], fn func(L, R) (OUT, error), opts ...sluice.OpOption) *Table[K, OUT] {
	return buildTableJoin(left, right, innerJoin, func(l *L, r *R) (OUT, error) { return fn(*l, *r) }, opts)
}

// LeftJoin is Join keeping every key of the left table: fn gets nil
// while the right table has no value for the key.
func LeftJoin[K comparable, L, R, OUT any](left *Table[K, L], right *Table[K, R], fn func(L, *R) (OUT, error), opts ...sluice.OpOption) *Table[K, OUT] {
	return buildTableJoin(left, right, leftJoin, func(l *L, r *R) (OUT, error) { return fn(*l, r) }, opts)
}

// OuterJoin is Join keeping every key of either table: fn gets nil for
// the side that has no value (never for both).
func OuterJoin[K comparable, L, R, OUT any](left *Table[K, L], right *Table[K, R], fn func(*L, *R) (OUT, error), opts ...sluice.OpOption) *Table[K, OUT] {
	return buildTableJoin(left, right, outerJoin, fn, opts)
}

func buildTableJoin[K comparable, L, R, OUT any](left *Table[K, L], right *Table[K, R], kind joinKind, fn func(*L, *R) (OUT, error), opts []sluice.OpOption) *Table[K, OUT] {
	opts = append([]sluice.OpOption{sluice.Name("TableJoin")}, opts...)
	j := &tableTableJoin[K, L, R, OUT]{
		leftDesc:  state.ValueStateDescriptor[L]{Name: "left", Codec: left.valueCodec},
		rightDesc: state.ValueStateDescriptor[R]{Name: "right", Codec: right.valueCodec},
		kind:      kind, fn: fn,
	}
	out := sluice.KeyedCoProcess(sluice.ConnectKeyed(left.keyed(), right.keyed()),
		sluice.KeyedCoProcessFunction[K, Change[K, L], Change[K, R], Change[K, OUT]](j), opts...)
	return derive(left, out)
}

// tableTableJoin keeps both sides' latest value per key.
type tableTableJoin[K comparable, L, R, OUT any] struct {
	leftDesc  state.ValueStateDescriptor[L]
	rightDesc state.ValueStateDescriptor[R]
	kind      joinKind
	fn        func(*L, *R) (OUT, error)
	left      state.ValueState[L]
	right     state.ValueState[R]
}

func (j *tableTableJoin[K, L, R, OUT]) Open(ctx *sluice.OperatorContext) error {
	var err error
	if j.left, err = state.GetValueState(ctx.KeyedState, j.leftDesc); err != nil {
		return err
	}
	j.right, err = state.GetValueState(ctx.KeyedState, j.rightDesc)
	return err
}

func (j *tableTableJoin[K, L, R, OUT]) ProcessElement1(ctx *sluice.KeyedContext[K], c Change[K, L], out sluice.Collector[Change[K, OUT]]) error {
	return j.update(ctx.Key(), out, func(r *row[L, R]) error { return apply(j.left, c, &r.l, &r.lok) })
}

func (j *tableTableJoin[K, L, R, OUT]) ProcessElement2(ctx *sluice.KeyedContext[K], c Change[K, R], out sluice.Collector[Change[K, OUT]]) error {
	return j.update(ctx.Key(), out, func(r *row[L, R]) error { return apply(j.right, c, &r.r, &r.rok) })
}

// row is both sides of one key.
type row[L, R any] struct {
	l        L
	r        R
	lok, rok bool
}

// update reads both sides of the key, applies a change to one of them
// and emits what that changed in the result.
func (j *tableTableJoin[K, L, R, OUT]) update(key K, out sluice.Collector[Change[K, OUT]], change func(*row[L, R]) error) error {
	var rw row[L, R]
	var err error
	if rw.l, rw.lok, err = j.left.Value(); err != nil {
		return err
	}
	if rw.r, rw.rok, err = j.right.Value(); err != nil {
		return err
	}
	had := j.kind.has(rw.lok, rw.rok)
	if err := change(&rw); err != nil {
		return err
	}
	switch {
	case j.kind.has(rw.lok, rw.rok):
		res, err := j.fn(ptr(rw.l, rw.lok), ptr(rw.r, rw.rok))
		if err != nil {
			return err
		}
		out.Collect(Upsert(key, res))
	case had:
		out.Collect(Tombstone[K, OUT](key))
	}
	return nil
}

// apply writes change c to one side's state and to its value as read.
func apply[K comparable, V any](s state.ValueState[V], c Change[K, V], v *V, ok *bool) error {
	if c.Delete {
		var zero V
		*v, *ok = zero, false
		return s.Clear()
	}
	*v, *ok = c.Value, true
	return s.Update(c.Value)
}
