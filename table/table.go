package table

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// Table is a changelog stream keyed by K: per key, the upserts and
// deletes in the order they happened. It holds no state itself: each
// operator that consumes it (a join, Materialize) keeps the rows it needs
// in its keyed state.
//
// The changes of one key must come in order, which they do from one
// Kafka partition (a compacted topic keyed by K), from a keyed operator
// (an aggregate, a join) or from one source subtask. The key codec
// decides where a key lives (its key group): two tables or a stream and a
// table meet only if they encode keys the same way.
type Table[K comparable, V any] struct {
	changes    *sluice.Stream[Change[K, V]]
	keyCodec   codec.Codec[K]
	valueCodec codec.Codec[V]
}

// FromChangelog makes a table of a changelog stream, its keys encoded
// with the default key codec of K (codec.DefaultKey, as sluice.KeyBy).
func FromChangelog[K comparable, V any](changes *sluice.Stream[Change[K, V]]) *Table[K, V] {
	return FromChangelogCodec(changes, codec.DefaultKey[K]())
}

// FromChangelogCodec is FromChangelog with the key codec given (as
// sluice.KeyByCodec).
func FromChangelogCodec[K comparable, V any](changes *sluice.Stream[Change[K, V]], kc codec.Codec[K]) *Table[K, V] {
	return &Table[K, V]{changes: changes, keyCodec: kc, valueCodec: codec.Default[V]()}
}

// FromStream makes a table of a stream in which every record is the new
// value of its key (an upsert stream: the latest reading of a sensor, the
// latest state of an order); it has no deletes.
func FromStream[T any, K comparable](s *sluice.Stream[T], keyOf func(T) K, opts ...sluice.OpOption) *Table[K, T] {
	opts = append([]sluice.OpOption{sluice.Name("ToChangelog")}, opts...)
	changes := sluice.Map(s, func(v T) (Change[K, T], error) { return Upsert(keyOf(v), v), nil }, opts...)
	return FromChangelog(changes)
}

// WithValueCodec returns the table with the codec its values are kept
// with in state (codec.Default of V unless given).
func (t *Table[K, V]) WithValueCodec(c codec.Codec[V]) *Table[K, V] {
	n := *t
	n.valueCodec = c
	return &n
}

// Changes returns the table's changelog: to write it out (see
// table/kafkatable's NewSink), or to process it as a stream.
func (t *Table[K, V]) Changes() *sluice.Stream[Change[K, V]] { return t.changes }

// KeyCodec and ValueCodec return the table's codecs.
func (t *Table[K, V]) KeyCodec() codec.Codec[K]   { return t.keyCodec }
func (t *Table[K, V]) ValueCodec() codec.Codec[V] { return t.valueCodec }

// keyed is the changelog partitioned by the table's key.
func (t *Table[K, V]) keyed() *sluice.KeyedStream[K, Change[K, V]] {
	return sluice.KeyByCodec(t.changes, changeKey[K, V], t.keyCodec)
}

// derive is a table of changes keyed as t.
func derive[K comparable, V, W any](t *Table[K, V], changes *sluice.Stream[Change[K, W]]) *Table[K, W] {
	return &Table[K, W]{changes: changes, keyCodec: t.keyCodec, valueCodec: codec.Default[W]()}
}

// StateName is the keyed value state in which Materialize keeps a
// table's rows (one value per key).
const StateName = "table"

// Materialize keeps the table in the keyed state of an operator of its
// own, named and identified (uid) by name unless opts say otherwise, and
// makes it queryable under name while the job runs: Job.QueryState, GET
// /jobs/:jobid/queryable-state/:name?key=..., api.Client.QueryState
// answer a key's current value. It passes on the changes that change the
// table (a delete of a key it does not hold is dropped), so the table it
// returns is the same one, materialized.
func Materialize[K comparable, V any](t *Table[K, V], name string, opts ...sluice.OpOption) *Table[K, V] {
	d := state.ValueStateDescriptor[V]{Name: StateName, Codec: t.valueCodec}
	opts = append([]sluice.OpOption{sluice.Name(name), sluice.UID(name), sluice.QueryableValueState[K](name, d)}, opts...)
	out := sluice.Process(t.keyed(), sluice.KeyedProcessFunction[K, Change[K, V], Change[K, V]](&materializer[K, V]{desc: d}), opts...)
	return &Table[K, V]{changes: out, keyCodec: t.keyCodec, valueCodec: t.valueCodec}
}

// materializer keeps each key's latest value.
type materializer[K comparable, V any] struct {
	desc  state.ValueStateDescriptor[V]
	value state.ValueState[V]
}

func (m *materializer[K, V]) Open(ctx *sluice.OperatorContext) error {
	var err error
	m.value, err = state.GetValueState(ctx.KeyedState, m.desc)
	return err
}

func (m *materializer[K, V]) ProcessElement(_ *sluice.KeyedContext[K], c Change[K, V], out sluice.Collector[Change[K, V]]) error {
	if c.Delete {
		_, ok, err := m.value.Value()
		if err != nil || !ok {
			return err
		}
		if err := m.value.Clear(); err != nil {
			return err
		}
		out.Collect(c)
		return nil
	}
	if err := m.value.Update(c.Value); err != nil {
		return err
	}
	out.Collect(c)
	return nil
}
