package table

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/state"
)

// StreamJoin joins each record of s with the current value of its key
// in t (Kafka Streams' KStream-KTable inner join, processing time): the
// table's changes update the join's copy of the table as they arrive, and
// a record is joined with the value its key has when the record arrives;
// a record whose key has no value is dropped. Table changes produce no
// output. The stream is repartitioned by keyOf (encoded with t's key
// codec), so the join's state holds the table partitioned the same way.
//
// Which table changes a record sees depends on how the two inputs
// interleave at the join, which nothing orders: at the start the table
// may not have arrived yet. A join that must be repeatable (the same
// results after a failure, in a backfill) is TemporalJoin's.
func StreamJoin[S any, K comparable, V, OUT any](s *sluice.Stream[S], keyOf func(S) K, t *Table[K, V], fn func(S, V) (OUT, error), opts ...sluice.OpOption) *sluice.Stream[OUT] {
	return buildStreamJoin(s, keyOf, t, &streamTableJoin[K, S, V, OUT]{inner: fn}, opts)
}

// StreamLeftJoin is StreamJoin keeping every record: fn gets nil when
// the record's key has no value in the table (KStream-KTable left join).
func StreamLeftJoin[S any, K comparable, V, OUT any](s *sluice.Stream[S], keyOf func(S) K, t *Table[K, V], fn func(S, *V) (OUT, error), opts ...sluice.OpOption) *sluice.Stream[OUT] {
	return buildStreamJoin(s, keyOf, t, &streamTableJoin[K, S, V, OUT]{left: fn}, opts)
}

func buildStreamJoin[S any, K comparable, V, OUT any](s *sluice.Stream[S], keyOf func(S) K, t *Table[K, V], j *streamTableJoin[K, S, V, OUT], opts []sluice.OpOption) *sluice.Stream[OUT] {
	opts = append([]sluice.OpOption{sluice.Name("StreamTableJoin")}, opts...)
	c := sluice.ConnectKeyed(sluice.KeyByCodec(s, keyOf, t.keyCodec), t.keyed())
	j.desc = state.ValueStateDescriptor[V]{Name: "table", Codec: t.valueCodec}
	return sluice.KeyedCoProcess(c, sluice.KeyedCoProcessFunction[K, S, Change[K, V], OUT](j), opts...)
}

// streamTableJoin keeps each key's current table value and joins the
// stream's records with it: inner (fn of the record and the value) or,
// without it, left.
type streamTableJoin[K comparable, S, V, OUT any] struct {
	desc  state.ValueStateDescriptor[V]
	inner func(S, V) (OUT, error)
	left  func(S, *V) (OUT, error)
	table state.ValueState[V]
}

func (j *streamTableJoin[K, S, V, OUT]) Open(ctx *sluice.OperatorContext) error {
	var err error
	j.table, err = state.GetValueState(ctx.KeyedState, j.desc)
	return err
}

// ProcessElement1 joins a record of the stream.
func (j *streamTableJoin[K, S, V, OUT]) ProcessElement1(_ *sluice.KeyedContext[K], v S, out sluice.Collector[OUT]) error {
	tv, ok, err := j.table.Value()
	if err != nil || (!ok && j.inner != nil) {
		return err
	}
	var res OUT
	if j.inner != nil {
		res, err = j.inner(v, tv)
	} else {
		res, err = j.left(v, ptr(tv, ok))
	}
	if err != nil {
		return err
	}
	out.Collect(res)
	return nil
}

// ProcessElement2 applies a change of the table.
func (j *streamTableJoin[K, S, V, OUT]) ProcessElement2(_ *sluice.KeyedContext[K], c Change[K, V], _ sluice.Collector[OUT]) error {
	if c.Delete {
		return j.table.Clear()
	}
	return j.table.Update(c.Value)
}
