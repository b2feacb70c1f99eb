package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/source"
)

// WatermarkStrategy says how a source assigns event timestamps and
// generates watermarks, as Flink's WatermarkStrategy. FromSource applies
// it per split of a source whose reader has splits (the partitions of a
// Kafka source), as Flink's sources do: each split gets its own
// timestamps, watermark and idleness, and a subtask's watermark is the
// smallest over its splits that are not idle.
type WatermarkStrategy[T any] struct {
	periodic       bool
	outOfOrderness time.Duration
	timestamps     func(v T, sourceTs int64) int64
	idleness       time.Duration
}

// NoWatermarks keeps the source's timestamps and emits no periodic
// watermarks (a bounded source still ends with the maximum watermark).
func NoWatermarks[T any]() WatermarkStrategy[T] { return WatermarkStrategy[T]{} }

// ForBoundedOutOfOrderness emits, every auto-watermark interval, the
// watermark max timestamp seen - d - 1 ms: records may be up to d late.
func ForBoundedOutOfOrderness[T any](d time.Duration) WatermarkStrategy[T] {
	return WatermarkStrategy[T]{periodic: true, outOfOrderness: d}
}

// ForMonotonousTimestamps is ForBoundedOutOfOrderness(0).
func ForMonotonousTimestamps[T any]() WatermarkStrategy[T] { return ForBoundedOutOfOrderness[T](0) }

// WithTimestampAssigner sets the function that gives a record its event
// timestamp (Unix ms); sourceTs is the timestamp the source attached.
func (w WatermarkStrategy[T]) WithTimestampAssigner(fn func(v T, sourceTs int64) int64) WatermarkStrategy[T] {
	w.timestamps = fn
	return w
}

// WithIdleness marks a split (the source subtask, for a source without
// splits) idle when it has emitted nothing for d, so that watermarks do
// not wait for it; a subtask whose splits are all idle is idle
// downstream.
func (w WatermarkStrategy[T]) WithIdleness(d time.Duration) WatermarkStrategy[T] {
	w.idleness = d
	return w
}

// FromSource adds a parallel source to the job, with the watermark
// strategy ws applied per split (Flink's fromSource): for a Kafka source,
// per partition, with the timestamps of ws's assigner, or the Kafka
// record timestamps when it has none.
func FromSource[T any](env *Environment, src source.Source[T], ws WatermarkStrategy[T], name string, opts ...OpOption) *Stream[T] {
	opts = append([]OpOption{Name(name)}, opts...)
	n, _ := newNode[T](env, "Source", opts, true)
	if ws.outOfOrderness < 0 || ws.idleness < 0 {
		env.addErr(fmt.Errorf("%w: source %q: watermark strategy with out-of-orderness %v and idleness %v: neither may be negative",
			ErrInvalidOption, name, ws.outOfOrderness, ws.idleness))
	}
	strategy := operators.WatermarkStrategy[T]{
		Periodic: ws.periodic, OutOfOrderness: ws.outOfOrderness, Timestamps: ws.timestamps,
		Idleness: ws.idleness, Interval: env.cfg.AutoWatermarkInterval,
	}
	n.BuildSource = func(sc *runtime.SourceContext, out any) (runtime.SourceDriver, error) {
		return operators.NewSource(src, strategy, sc, out.(operators.Output[T]))
	}
	if p, ok := src.(source.Partitioned); ok {
		n.Partitions = p.Partitions
	}
	return newStream[T](env, n)
}
