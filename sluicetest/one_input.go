package sluicetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// Harness runs one operator that reads one stream of IN and emits OUT
// (Flink's OneInputStreamOperatorTestHarness, and the keyed one when the
// input is keyed).
type Harness[IN, OUT any] struct {
	*core
	in     *input[IN]
	output *outputs[OUT]
}

// New builds the operator that build adds to its input stream, as the
// pipeline adds it, and opens it (restored from RestoreFrom's snapshot,
// if given). build must add exactly one operator that reads in and return
// its output; it may take side outputs of it with sluice.SideOutput
// (SideOutput reads them). The harness is closed when the test ends.
func New[IN, OUT any](tb testing.TB, build func(in *sluice.Stream[IN]) *sluice.Stream[OUT], opts ...Option) *Harness[IN, OUT] {
	tb.Helper()
	set := settingsOf(opts)
	h := &Harness[IN, OUT]{in: &input[IN]{index: 0}, output: &outputs[OUT]{}}
	h.core = newCore(tb, set, buildSpec{
		addOperator: func(env *sluice.Environment) []*runtime.Node {
			in := placeholder[IN](env, 0)
			build(in)
			return []*runtime.Node{h.in.bind(env)}
		},
		checkOutput: checkOutput[OUT],
		output:      h.output.make,
	})
	h.in.core = h.core
	return h
}

// KeyedProcess is New for a keyed process function: fn runs on the input
// keyed by keyOf (Flink's KeyedOneInputStreamOperatorTestHarness of a
// KeyedProcessOperator). WithOperatorOptions gives the operator its uid.
func KeyedProcess[K comparable, IN, OUT any](tb testing.TB, keyOf func(IN) K, fn sluice.KeyedProcessFunction[K, IN, OUT], opts ...Option) *Harness[IN, OUT] {
	tb.Helper()
	opOpts := settingsOf(opts).opOptions
	return New(tb, func(in *sluice.Stream[IN]) *sluice.Stream[OUT] {
		return sluice.Process(sluice.KeyBy(in, keyOf), fn, opOpts...)
	}, opts...)
}

// ProcessElement feeds v with event timestamp ts (NoTimestamp for none)
// to the subtask the job would route it to; a failure of the operator
// fails the test.
func (h *Harness[IN, OUT]) ProcessElement(v IN, ts int64) {
	h.tb.Helper()
	h.check(fmt.Sprintf("process %v at %d", v, ts), h.in.process(v, ts))
}

// ProcessElementErr is ProcessElement for a test that expects the
// operator to fail: it returns the operator's error.
func (h *Harness[IN, OUT]) ProcessElementErr(v IN, ts int64) error {
	h.tb.Helper()
	return h.in.process(v, ts)
}

// ProcessWatermark advances the input's event time to wm: event-time
// timers and windows due fire, and the operator forwards the watermark.
func (h *Harness[IN, OUT]) ProcessWatermark(wm int64) {
	h.tb.Helper()
	h.watermark(0, wm)
}

// Output returns the records the operator emitted so far (every
// subtask's, in the order they were emitted).
func (h *Harness[IN, OUT]) Output() []Record[OUT] { return slices.Clone(h.output.records) }

// Values returns the values of Output.
func (h *Harness[IN, OUT]) Values() []OUT { return h.output.values() }

// TakeOutput returns Output and forgets it: the next call returns what
// was emitted after this one.
func (h *Harness[IN, OUT]) TakeOutput() []Record[OUT] { return h.output.take() }

// Watermarks returns the watermarks the operator emitted, as an operator
// downstream would see them: each time the minimum over the subtasks
// advanced.
func (h *Harness[IN, OUT]) Watermarks() []int64 { return slices.Clone(h.watermarks) }

// WaitForOutput runs the operator's mails (async calls completing) until
// it has emitted at least n records in all, under the safety net.
func (h *Harness[IN, OUT]) WaitForOutput(n int) {
	h.tb.Helper()
	h.waitForOutput(n, func() int { return len(h.output.records) })
}

// settingsOf applies the options.
func settingsOf(opts []Option) settings {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	return s
}

// input is one input of a harness: its placeholder node and how its
// records are routed.
type input[T any] struct {
	index   int
	core    *core
	node    *runtime.Node
	keyBuf  []byte
	keyHash func(T, []byte) (uint32, []byte)
}

// placeholderSource is the source node standing for a harness's input:
// the test feeds it, it is never read.
type placeholderSource[T any] struct{}

func (placeholderSource[T]) Bounded() bool { return false }
func (placeholderSource[T]) NewReader(source.ReaderContext) (source.Reader[T], error) {
	return nil, errors.New("sluicetest: a harness's input is fed by the test, never read")
}

// placeholderName names input index's node.
func placeholderName(index int) string { return fmt.Sprintf("sluicetest-input-%d", index+1) }

// placeholder adds the source node of input index.
func placeholder[T any](env *sluice.Environment, index int) *sluice.Stream[T] {
	return sluice.FromSource(env, placeholderSource[T]{}, sluice.NoWatermarks[T](), placeholderName(index),
		sluice.UID(placeholderName(index)))
}

// bind finds the input's placeholder node in env's plan.
func (in *input[T]) bind(env *sluice.Environment) *runtime.Node {
	for _, n := range env.Plan().Nodes {
		if n.IsSource() && n.UID == placeholderName(in.index) {
			in.node = n
			for _, m := range env.Plan().Nodes {
				for _, e := range m.Inputs {
					if e.From == n && e.Partitioner == runtime.PartitionHash {
						in.keyHash, _ = e.KeyHash.(func(T, []byte) (uint32, []byte))
					}
				}
			}
			return n
		}
	}
	panic("sluicetest: input placeholder not in the plan")
}

// process routes v to its subtask(s) and feeds it.
func (in *input[T]) process(v T, ts int64) error {
	c := in.core
	kg := -1
	if in.keyHash != nil && c.inputs[in.index].Partitioner == runtime.PartitionHash {
		var h uint32
		h, in.keyBuf = in.keyHash(v, in.keyBuf[:0])
		kg = state.KeyGroupForHash(h, c.maxPar)
	}
	return c.element(in.index, kg, func(s *subtask) error {
		target, ok := s.ins[in.index].(operators.Input[T])
		if !ok {
			return fmt.Errorf("input %d of subtask %d is %T, not an operators.Input[%T]", in.index+1, s.index, s.ins[in.index], *new(T))
		}
		return target.ProcessElement(v, ts)
	})
}

// outputs records the main output of every subtask.
type outputs[T any] struct {
	records []Record[T]
}

func (o *outputs[T]) make(sub int, wm func(int64)) any {
	return &recorder[T]{o: o, sub: sub, wm: wm}
}

func (o *outputs[T]) values() []T {
	vs := make([]T, len(o.records))
	for i, r := range o.records {
		vs[i] = r.Value
	}
	return vs
}

func (o *outputs[T]) take() []Record[T] {
	r := o.records
	o.records = nil
	return r
}

// recorder is the operators.Output of one subtask.
type recorder[T any] struct {
	o   *outputs[T]
	sub int
	wm  func(int64)
}

func (r *recorder[T]) Collect(v T, ts int64) error {
	r.o.records = append(r.o.records, Record[T]{Value: v, Timestamp: ts, Subtask: r.sub})
	return nil
}

func (r *recorder[T]) EmitWatermark(wm int64) error {
	r.wm(wm)
	return nil
}

// checkOutput refuses an operator whose output is not of type T: the
// build function returned another stream than the operator's.
func checkOutput[T any](n *runtime.Node) error {
	if _, ok := n.Out.Codec().(codec.Codec[T]); !ok {
		return fmt.Errorf("operator %q emits %T records, the harness expects %T: the build function must return the operator's own output", n.Name, n.Out.Codec(), *new(T))
	}
	return nil
}
