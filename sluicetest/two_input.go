package sluicetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/runtime"
)

// TwoInputHarness runs one operator that reads two streams (Flink's
// TwoInputStreamOperatorTestHarness, and KeyedBroadcastOperatorTestHarness
// when the second is a broadcast stream): CoProcess, KeyedCoProcess,
// interval joins, broadcast functions.
type TwoInputHarness[IN1, IN2, OUT any] struct {
	*core
	in1    *input[IN1]
	in2    *input[IN2]
	output *outputs[OUT]
}

// NewTwoInput builds the operator that build adds to its two input
// streams and opens it; see New. A broadcast input (build makes it a
// sluice.NewBroadcastStream) sends every record to every subtask.
func NewTwoInput[IN1, IN2, OUT any](tb testing.TB, build func(in1 *sluice.Stream[IN1], in2 *sluice.Stream[IN2]) *sluice.Stream[OUT], opts ...Option) *TwoInputHarness[IN1, IN2, OUT] {
	tb.Helper()
	h := &TwoInputHarness[IN1, IN2, OUT]{in1: &input[IN1]{index: 0}, in2: &input[IN2]{index: 1}, output: &outputs[OUT]{}}
	h.core = newCore(tb, settingsOf(opts), buildSpec{
		addOperator: func(env *sluice.Environment) []*runtime.Node {
			a, b := placeholder[IN1](env, 0), placeholder[IN2](env, 1)
			build(a, b)
			return []*runtime.Node{h.in1.bind(env), h.in2.bind(env)}
		},
		checkOutput: checkOutput[OUT],
		output:      h.output.make,
	})
	h.in1.core, h.in2.core = h.core, h.core
	return h
}

// KeyedCoProcess is NewTwoInput for a keyed two-input function: the
// inputs keyed by keyOf1 and keyOf2 (with the same key codec), connected.
func KeyedCoProcess[K comparable, IN1, IN2, OUT any](tb testing.TB, keyOf1 func(IN1) K, keyOf2 func(IN2) K, fn sluice.KeyedCoProcessFunction[K, IN1, IN2, OUT], opts ...Option) *TwoInputHarness[IN1, IN2, OUT] {
	tb.Helper()
	opOpts := settingsOf(opts).opOptions
	return NewTwoInput(tb, func(a *sluice.Stream[IN1], b *sluice.Stream[IN2]) *sluice.Stream[OUT] {
		return sluice.KeyedCoProcess(sluice.ConnectKeyed(sluice.KeyBy(a, keyOf1), sluice.KeyBy(b, keyOf2)), fn, opOpts...)
	}, opts...)
}

// KeyedBroadcastProcess is NewTwoInput for a keyed broadcast function
// (Flink's KeyedBroadcastOperatorTestHarness): the first input keyed by
// keyOf, the second broadcast to every subtask with the broadcast states
// declared.
func KeyedBroadcastProcess[K comparable, IN, BC, OUT any](tb testing.TB, keyOf func(IN) K, fn sluice.KeyedBroadcastProcessFunction[K, IN, BC, OUT], states []sluice.BroadcastStateDeclaration, opts ...Option) *TwoInputHarness[IN, BC, OUT] {
	tb.Helper()
	opOpts := settingsOf(opts).opOptions
	return NewTwoInput(tb, func(a *sluice.Stream[IN], b *sluice.Stream[BC]) *sluice.Stream[OUT] {
		return sluice.ProcessKeyedBroadcast(sluice.KeyBy(a, keyOf), sluice.NewBroadcastStream(b, states...), fn, opOpts...)
	}, opts...)
}

// BroadcastProcess is NewTwoInput for a non-keyed broadcast function
// (Flink's BroadcastOperatorTestHarness).
func BroadcastProcess[IN, BC, OUT any](tb testing.TB, fn sluice.BroadcastProcessFunction[IN, BC, OUT], states []sluice.BroadcastStateDeclaration, opts ...Option) *TwoInputHarness[IN, BC, OUT] {
	tb.Helper()
	opOpts := settingsOf(opts).opOptions
	return NewTwoInput(tb, func(a *sluice.Stream[IN], b *sluice.Stream[BC]) *sluice.Stream[OUT] {
		return sluice.ProcessBroadcast(a, sluice.NewBroadcastStream(b, states...), fn, opOpts...)
	}, opts...)
}

// ProcessElement1 feeds v with event timestamp ts to the first input.
func (h *TwoInputHarness[IN1, IN2, OUT]) ProcessElement1(v IN1, ts int64) {
	h.tb.Helper()
	h.check(fmt.Sprintf("process %v at %d on input 1", v, ts), h.in1.process(v, ts))
}

// ProcessElement2 feeds v with event timestamp ts to the second input.
func (h *TwoInputHarness[IN1, IN2, OUT]) ProcessElement2(v IN2, ts int64) {
	h.tb.Helper()
	h.check(fmt.Sprintf("process %v at %d on input 2", v, ts), h.in2.process(v, ts))
}

// ProcessElement1Err and ProcessElement2Err return the operator's error
// instead of failing the test.
func (h *TwoInputHarness[IN1, IN2, OUT]) ProcessElement1Err(v IN1, ts int64) error {
	return h.in1.process(v, ts)
}

func (h *TwoInputHarness[IN1, IN2, OUT]) ProcessElement2Err(v IN2, ts int64) error {
	return h.in2.process(v, ts)
}

// ProcessWatermark1 and ProcessWatermark2 advance one input's event
// time; the operator's is the minimum of the two, as the task combines
// its inputs.
func (h *TwoInputHarness[IN1, IN2, OUT]) ProcessWatermark1(wm int64) {
	h.tb.Helper()
	h.watermark(0, wm)
}

func (h *TwoInputHarness[IN1, IN2, OUT]) ProcessWatermark2(wm int64) {
	h.tb.Helper()
	h.watermark(1, wm)
}

// ProcessBothWatermarks advances both inputs' event time to wm.
func (h *TwoInputHarness[IN1, IN2, OUT]) ProcessBothWatermarks(wm int64) {
	h.tb.Helper()
	h.watermark(0, wm)
	h.watermark(1, wm)
}

// Output, Values, TakeOutput, Watermarks and WaitForOutput are those of
// Harness.
func (h *TwoInputHarness[IN1, IN2, OUT]) Output() []Record[OUT] {
	return slices.Clone(h.output.records)
}

func (h *TwoInputHarness[IN1, IN2, OUT]) Values() []OUT             { return h.output.values() }
func (h *TwoInputHarness[IN1, IN2, OUT]) TakeOutput() []Record[OUT] { return h.output.take() }
func (h *TwoInputHarness[IN1, IN2, OUT]) Watermarks() []int64       { return slices.Clone(h.watermarks) }

func (h *TwoInputHarness[IN1, IN2, OUT]) WaitForOutput(n int) {
	h.tb.Helper()
	h.waitForOutput(n, func() int { return len(h.output.records) })
}
