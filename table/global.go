package table

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/state"
)

// GlobalTable is a table of which every subtask of a join holds the
// whole (Kafka Streams' GlobalKTable): the stream it is joined with is not
// repartitioned, and its lookup key may be anything computed from the
// record. Its changes are broadcast to every subtask, which keeps them in
// broadcast state: on the heap, checkpointed by every subtask (a restore
// with another parallelism gives each new subtask a whole copy). Fit for
// tables that fit in memory many times over: reference data, not a
// customer base of millions.
type GlobalTable[K comparable, V any] struct {
	t *Table[K, V]
}

// Global returns t as a global table.
func Global[K comparable, V any](t *Table[K, V]) *GlobalTable[K, V] { return &GlobalTable[K, V]{t: t} }

// GlobalJoin joins each record of s with the current value of the key
// keyOf gives in the global table (KStream-GlobalKTable inner join,
// processing time): a record whose key has no value is dropped. Records
// stay on their subtask. As StreamJoin, which table changes a record sees
// depends on how the inputs interleave.
func GlobalJoin[S any, K comparable, V, OUT any](s *sluice.Stream[S], keyOf func(S) K, g *GlobalTable[K, V], fn func(S, V) (OUT, error), opts ...sluice.OpOption) *sluice.Stream[OUT] {
	return buildGlobalJoin(s, keyOf, g, true, func(v S, tv *V) (OUT, error) { return fn(v, *tv) }, opts)
}

// GlobalLeftJoin is GlobalJoin keeping every record: fn gets nil when the
// key has no value.
func GlobalLeftJoin[S any, K comparable, V, OUT any](s *sluice.Stream[S], keyOf func(S) K, g *GlobalTable[K, V], fn func(S, *V) (OUT, error), opts ...sluice.OpOption) *sluice.Stream[OUT] {
	return buildGlobalJoin(s, keyOf, g, false, fn, opts)
}

func buildGlobalJoin[S any, K comparable, V, OUT any](s *sluice.Stream[S], keyOf func(S) K, g *GlobalTable[K, V], inner bool, fn func(S, *V) (OUT, error), opts []sluice.OpOption) *sluice.Stream[OUT] {
	opts = append([]sluice.OpOption{sluice.Name("GlobalTableJoin")}, opts...)
	d := state.MapStateDescriptor[K, V]{Name: "global-table", KeyCodec: g.t.keyCodec, ValueCodec: g.t.valueCodec}
	b := sluice.NewBroadcastStream(g.t.changes, sluice.DeclareBroadcastState(d))
	j := &globalJoin[K, S, V, OUT]{desc: d, keyOf: keyOf, inner: inner, fn: fn}
	return sluice.ProcessBroadcast(s, b, sluice.BroadcastProcessFunction[S, Change[K, V], OUT](j), opts...)
}

// globalJoin looks records up in its subtask's copy of the table.
type globalJoin[K comparable, S, V, OUT any] struct {
	desc  state.MapStateDescriptor[K, V]
	keyOf func(S) K
	inner bool
	fn    func(S, *V) (OUT, error)
	// ro and rw are the subtask's table, looked up once.
	ro state.ReadOnlyBroadcastState[K, V]
	rw state.BroadcastState[K, V]
}

func (j *globalJoin[K, S, V, OUT]) ProcessElement(ctx *sluice.ReadOnlyBroadcastContext, v S, out sluice.Collector[OUT]) error {
	if j.ro == nil {
		t, err := sluice.GetReadOnlyBroadcastState(ctx, j.desc)
		if err != nil {
			return err
		}
		j.ro = t
	}
	tv, ok, err := j.ro.Get(j.keyOf(v))
	if err != nil || (!ok && j.inner) {
		return err
	}
	res, err := j.fn(v, ptr(tv, ok))
	if err != nil {
		return err
	}
	out.Collect(res)
	return nil
}

func (j *globalJoin[K, S, V, OUT]) ProcessBroadcastElement(ctx *sluice.BroadcastContext, c Change[K, V], _ sluice.Collector[OUT]) error {
	if j.rw == nil {
		t, err := sluice.GetBroadcastState(ctx, j.desc)
		if err != nil {
			return err
		}
		j.rw = t
	}
	if c.Delete {
		return j.rw.Remove(c.Key)
	}
	return j.rw.Put(c.Key, c.Value)
}
