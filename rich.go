package sluice

import "github.com/sluicehq/sluice/operators"

// MapFunction is a rich map function (Flink's RichMapFunction): besides
// Map it may implement Open(*OperatorContext) error, which receives the
// runtime context (subtask index, parallelism, max parallelism, task
// name, attempt number, the metric group, side outputs for EmitSide),
// Close() error, SnapshotState(checkpointID) error and the checkpoint
// notifications. A function held by a struct pointer is copied for every
// subtask. Map (a plain func) stays the short form.
type MapFunction[T, U any] = operators.MapFunction[T, U]

// FlatMapFunction is a rich flat-map function (Flink's
// RichFlatMapFunction); see MapFunction.
type FlatMapFunction[T, U any] = operators.FlatMapFunction[T, U]

// FilterFunction is a rich filter function (Flink's RichFilterFunction);
// see MapFunction.
type FilterFunction[T any] = operators.FilterFunction[T]

// ProcessFunction processes the records of a non-keyed stream (Flink's
// ProcessFunction on a DataStream): each record with its timestamp, the
// clocks and side outputs; no keyed state or timers (KeyBy and Process
// for those). It may implement the same hooks as MapFunction.
type ProcessFunction[IN, OUT any] = operators.ProcessFunction[IN, OUT]

// ProcessFunctionFunc adapts a function to a ProcessFunction.
type ProcessFunctionFunc[IN, OUT any] = operators.ProcessFunctionFunc[IN, OUT]

// ProcessContext is the context of a ProcessFunction.
type ProcessContext = operators.ProcessContext

// MetricGroup holds an operator's user-defined metrics
// (OperatorContext.Metrics): Counter, Gauge, Histogram, Meter. They are
// reported with the task's metrics (Job.Metrics, the REST API, and
// Prometheus as sluice_user_counter, _gauge, _histogram, _meter_rate and
// _meter_count, labelled by operator and name).
type MetricGroup = operators.MetricGroup

// Counter, Histogram and Meter are the user-defined metrics of a
// MetricGroup.
type (
	Counter   = operators.Counter
	Histogram = operators.Histogram
	Meter     = operators.Meter
)

// UserMetric is one user-defined metric as reported in TaskMetrics.User.
type UserMetric = operators.UserMetric

// RichMap applies a rich map function to every record.
func RichMap[T, U any](s *Stream[T], fn MapFunction[T, U], opts ...OpOption) *Stream[U] {
	n, _ := newNode[U](s.env, "Map", opts, true)
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewRichMap(cloneFunction(fn), out.(operators.Output[U]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[U](s.env, n)
}

// RichFlatMap applies a rich flat-map function to every record.
func RichFlatMap[T, U any](s *Stream[T], fn FlatMapFunction[T, U], opts ...OpOption) *Stream[U] {
	n, _ := newNode[U](s.env, "FlatMap", opts, true)
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewRichFlatMap(cloneFunction(fn), out.(operators.Output[U]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[U](s.env, n)
}

// RichFilter keeps the records for which a rich filter function returns
// true.
func RichFilter[T any](s *Stream[T], fn FilterFunction[T], opts ...OpOption) *Stream[T] {
	n, _ := newNode[T](s.env, "Filter", opts, true)
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewRichFilter(cloneFunction(fn), out.(operators.Output[T]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[T](s.env, n)
}

// ProcessStream runs a ProcessFunction on every record of a non-keyed
// stream (Flink's DataStream.process).
func ProcessStream[IN, OUT any](s *Stream[IN], fn ProcessFunction[IN, OUT], opts ...OpOption) *Stream[OUT] {
	n, _ := newNode[OUT](s.env, "Process", opts, true)
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewProcess(cloneFunction(fn), out.(operators.Output[OUT]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[OUT](s.env, n)
}
