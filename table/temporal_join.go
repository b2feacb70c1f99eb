package table

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// ErrNoTimestamp: a record reached an event-time join without a
// timestamp (its source has no timestamp assigner).
var ErrNoTimestamp = errors.New("record without a timestamp")

// VersionedTable is a table whose join keeps, per key, the versions of
// its value by event time (each change is valid from its timestamp to
// the next change's): Kafka Streams' versioned store, Flink's versioned
// table. Retention is how far behind the watermark a record may still be
// joined with the version valid at its timestamp (Kafka Streams' history
// retention): versions that ended longer ago are dropped.
type VersionedTable[K comparable, V any] struct {
	t         *Table[K, V]
	retention time.Duration
}

// Versioned returns t as a versioned table with the retention given (0:
// only what the watermark still needs, as Flink's temporal join).
func (t *Table[K, V]) Versioned(retention time.Duration) *VersionedTable[K, V] {
	return &VersionedTable[K, V]{t: t, retention: max(retention, 0)}
}

// lateTag and lateChangesTag are the side outputs of the records and
// table changes an event-time join could not use correctly.
const (
	lateTag        = "table-join-late"
	lateChangesTag = "table-join-late-changes"
)

// LateRecords is the side output of TemporalJoin and TemporalLeftJoin:
// the stream records that arrived too late to be joined with the version
// valid at their timestamp (below the watermark minus the table's
// retention). Take it with sluice.SideOutput(joined, table.LateRecords[S]());
// untaken, they are dropped.
func LateRecords[S any]() sluice.OutputTag[S] { return sluice.NewOutputTag[S](lateTag) }

// LateChanges is the other side output of TemporalJoin and
// TemporalLeftJoin: the table changes that arrived below the watermark
// minus the retention. They are not applied: the versions they would
// follow or precede may be gone (a delete after them among those), so
// applying them could bring a deleted key back.
func LateChanges[K comparable, V any]() sluice.OutputTag[Change[K, V]] {
	return sluice.NewOutputTag[Change[K, V]](lateChangesTag)
}

// TemporalJoin joins each record of s with the version of its key's
// value valid at the record's timestamp (Flink's event-time temporal join
// "FOR SYSTEM_TIME AS OF", Kafka Streams' stream-table join against a
// versioned table): inner, so a record whose key had no value (or was
// deleted) at its timestamp is dropped. Results carry the record's
// timestamp.
//
// The join runs on event time: a record waits in keyed state until the
// join's watermark (the smaller of the stream's and the table's) passes
// its timestamp, so every change of the table up to then has arrived. A
// table that changes seldom holds the stream back: give its source an
// idleness timeout (sluice.WithIdleness). A record already at or below
// the watermark is joined at once if its version is still retained
// (timestamp >= watermark - retention), else it is late: it joins nothing
// and goes to LateRecords. A table change at or below the watermark is
// applied for what comes after if it is within the retention (results
// already emitted are not revised), else it is late: dropped, to
// LateChanges.
func TemporalJoin[S any, K comparable, V, OUT any](s *sluice.Stream[S], keyOf func(S) K, vt *VersionedTable[K, V], fn func(S, V) (OUT, error), opts ...sluice.OpOption) *sluice.Stream[OUT] {
	return buildTemporalJoin(s, keyOf, vt, true, func(v S, tv *V) (OUT, error) { return fn(v, *tv) }, opts)
}

// TemporalLeftJoin is TemporalJoin keeping every record that is not
// late: fn gets nil when the key had no value at the record's timestamp.
func TemporalLeftJoin[S any, K comparable, V, OUT any](s *sluice.Stream[S], keyOf func(S) K, vt *VersionedTable[K, V], fn func(S, *V) (OUT, error), opts ...sluice.OpOption) *sluice.Stream[OUT] {
	return buildTemporalJoin(s, keyOf, vt, false, fn, opts)
}

func buildTemporalJoin[S any, K comparable, V, OUT any](s *sluice.Stream[S], keyOf func(S) K, vt *VersionedTable[K, V], inner bool, fn func(S, *V) (OUT, error), opts []sluice.OpOption) *sluice.Stream[OUT] {
	opts = append([]sluice.OpOption{sluice.Name("TemporalJoin")}, opts...)
	t := vt.t
	c := sluice.ConnectKeyed(sluice.KeyByCodec(s, keyOf, t.keyCodec), t.keyed())
	j := newTemporalJoin[K](codec.Default[S](), t.valueCodec, vt.retention, inner, fn)
	return sluice.KeyedCoProcess(c, sluice.KeyedCoProcessFunction[K, S, Change[K, V], OUT](j), opts...)
}

// version is one version of a key's value: valid from Ts to the next
// version's Ts.
type version[V any] struct {
	Ts      int64
	Value   V
	Deleted bool
}

// temporalJoin keeps each key's versions (sorted by time) and the stream
// records waiting for the watermark (by timestamp), joined from an
// event-time timer at their timestamp.
type temporalJoin[K comparable, S, V, OUT any] struct {
	versionsDesc state.ValueStateDescriptor[[]version[V]]
	waitingDesc  state.MapStateDescriptor[int64, []S]
	retention    int64 // ms
	inner        bool
	fn           func(S, *V) (OUT, error)
	late         sluice.OutputTag[S]
	lateChanges  sluice.OutputTag[Change[K, V]]

	versions state.ValueState[[]version[V]]
	waiting  state.MapState[int64, []S]
}

func newTemporalJoin[K comparable, S, V, OUT any](sc codec.Codec[S], vc codec.Codec[V], retention time.Duration, inner bool, fn func(S, *V) (OUT, error)) *temporalJoin[K, S, V, OUT] {
	return &temporalJoin[K, S, V, OUT]{
		versionsDesc: state.ValueStateDescriptor[[]version[V]]{Name: "versions", Codec: versionsCodec[V]{vc}},
		waitingDesc: state.MapStateDescriptor[int64, []S]{Name: "waiting", KeyCodec: codec.Int[int64]{},
			ValueCodec: operators.ListCodec[S]{Elem: sc}},
		retention: retention.Milliseconds(), inner: inner, fn: fn, late: LateRecords[S](), lateChanges: LateChanges[K, V](),
	}
}

func (j *temporalJoin[K, S, V, OUT]) Open(ctx *sluice.OperatorContext) error {
	var err error
	if j.versions, err = state.GetValueState(ctx.KeyedState, j.versionsDesc); err != nil {
		return err
	}
	j.waiting, err = state.GetMapState(ctx.KeyedState, j.waitingDesc)
	return err
}

// horizon is the oldest time whose version is still retained: every
// version that ended at or before it may be gone.
func (j *temporalJoin[K, S, V, OUT]) horizon(wm int64) int64 {
	if wm < math.MinInt64+j.retention {
		return math.MinInt64
	}
	return wm - j.retention
}

// ProcessElement1 takes a stream record: joined now if the table is
// complete up to its timestamp, else kept until the watermark gets there.
func (j *temporalJoin[K, S, V, OUT]) ProcessElement1(ctx *sluice.KeyedContext[K], v S, out sluice.Collector[OUT]) error {
	ts := ctx.Timestamp()
	if ts == operators.NoTimestamp {
		return fmt.Errorf("temporal join: key %v: %w (event-time joins need a watermark strategy with timestamps on both inputs)", ctx.Key(), ErrNoTimestamp)
	}
	wm := ctx.Timers().CurrentWatermark()
	switch {
	case ts > wm:
		vs, _, err := j.waiting.Get(ts)
		if err != nil {
			return err
		}
		if err := j.waiting.Put(ts, append(slices.Clip(vs), v)); err != nil {
			return err
		}
		ctx.Timers().RegisterEventTimeTimer(ts)
		return nil
	case ts >= j.horizon(wm):
		vers, _, err := j.versions.Value()
		if err != nil {
			return err
		}
		return j.join(v, ts, vers, out)
	default:
		sluice.EmitSide(ctx, j.late, v)
		return nil
	}
}

// ProcessElement2 takes a change of the table: a new version from its
// timestamp.
func (j *temporalJoin[K, S, V, OUT]) ProcessElement2(ctx *sluice.KeyedContext[K], c Change[K, V], _ sluice.Collector[OUT]) error {
	ts := ctx.Timestamp()
	if ts == operators.NoTimestamp {
		return fmt.Errorf("temporal join: table change of key %v: %w (event-time joins need a watermark strategy with timestamps on both inputs)", ctx.Key(), ErrNoTimestamp)
	}
	wm := ctx.Timers().CurrentWatermark()
	if ts < j.horizon(wm) {
		// The versions it would replace may be gone (a delete after it,
		// dropped): applying it could bring back a deleted key.
		sluice.EmitSide(ctx, j.lateChanges, c)
		return nil
	}
	vers, _, err := j.versions.Value()
	if err != nil {
		return err
	}
	i, found := slices.BinarySearchFunc(vers, ts, func(v version[V], t int64) int { return cmpInt(v.Ts, t) })
	nv := version[V]{Ts: ts, Value: c.Value, Deleted: c.Delete}
	vers = slices.Clip(vers) // the slice may share its array with a snapshot's view
	if found {
		vers = slices.Concat(vers[:i], []version[V]{nv}, vers[i+1:])
	} else {
		vers = slices.Insert(vers, i, nv)
	}
	return j.store(j.prune(vers, wm))
}

// OnTimer joins the records waiting at ts: the watermark has passed it.
func (j *temporalJoin[K, S, V, OUT]) OnTimer(_ *sluice.KeyedContext[K], ts int64, out sluice.Collector[OUT]) error {
	waiting, ok, err := j.waiting.Get(ts)
	if err != nil || !ok {
		return err
	}
	vers, _, err := j.versions.Value()
	if err != nil {
		return err
	}
	for _, v := range waiting {
		if err := j.join(v, ts, vers, out); err != nil {
			return err
		}
	}
	if err := j.waiting.Remove(ts); err != nil {
		return err
	}
	// Prune by the timer's time, not the watermark: the timers due at
	// this watermark fire in time order, and the later ones still need
	// the versions valid at their own times.
	pruned := j.prune(vers, ts)
	if len(pruned) != len(vers) {
		return j.store(pruned)
	}
	return nil
}

// join emits v joined with the version valid at ts.
func (j *temporalJoin[K, S, V, OUT]) join(v S, ts int64, vers []version[V], out sluice.Collector[OUT]) error {
	var tv *V
	if i := validAt(vers, ts); i >= 0 && !vers[i].Deleted {
		val := vers[i].Value // the function's own copy, not the state's
		tv = &val
	}
	if tv == nil && j.inner {
		return nil
	}
	res, err := j.fn(v, tv)
	if err != nil {
		return err
	}
	out.Collect(res)
	return nil
}

// validAt is the index of the version valid at ts, -1 if none.
func validAt[V any](vers []version[V], ts int64) int {
	i, found := slices.BinarySearchFunc(vers, ts, func(v version[V], t int64) int { return cmpInt(v.Ts, t) })
	if found {
		return i
	}
	return i - 1
}

// prune drops the versions that ended at or before the horizon: no
// record that may still be joined needs them. A key left with one
// deleted version before the horizon is gone.
func (j *temporalJoin[K, S, V, OUT]) prune(vers []version[V], wm int64) []version[V] {
	h := j.horizon(wm)
	drop := 0
	for drop+1 < len(vers) && vers[drop+1].Ts <= h {
		drop++
	}
	vers = vers[drop:]
	if len(vers) == 1 && vers[0].Deleted && vers[0].Ts <= h {
		return nil
	}
	return vers
}

func (j *temporalJoin[K, S, V, OUT]) store(vers []version[V]) error {
	if len(vers) == 0 {
		return j.versions.Clear()
	}
	return j.versions.Update(vers)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// versionsCodec encodes a key's versions: their count, then each one's
// timestamp, whether it is a delete, and its value.
type versionsCodec[V any] struct{ vc codec.Codec[V] }

func (c versionsCodec[V]) Append(dst []byte, vs []version[V]) ([]byte, error) {
	w := fieldWriter{dst: dst}
	w.uvarint(uint64(len(vs)))
	for _, v := range vs {
		w.varint(v.Ts)
		if v.Deleted {
			w.byte(1)
			continue
		}
		w.byte(0)
		appendField(&w, c.vc, v.Value)
	}
	return w.dst, w.err
}

func (c versionsCodec[V]) Decode(src []byte) ([]version[V], error) {
	r := newFieldReader(src, "table versions")
	n := r.uvarint()
	if n > uint64(len(src)) {
		r.fail("count")
	}
	var out []version[V]
	for i := uint64(0); i < n && r.ok(); i++ {
		v := version[V]{Ts: r.varint(), Deleted: r.byte() == 1}
		if !v.Deleted {
			v.Value = readField(&r, c.vc)
		}
		out = append(out, v)
	}
	return out, r.done()
}
