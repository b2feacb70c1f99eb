package sluicetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// NoTimestamp is the timestamp of a record that carries none.
const NoTimestamp = source.NoTimestamp

// MaxWatermark is the watermark of the end of event time: a bounded
// source emits it after its last record.
const MaxWatermark = source.MaxWatermark

// SafetyNet bounds every wait of the kit (a mail of an async operator, a
// job that should finish): a passing test never reaches it, it turns a
// hang into a failure naming what was awaited.
const SafetyNet = 60 * time.Second

// Record is a record an operator emitted (or a test feeds it): its value,
// its event timestamp (NoTimestamp if none) and the subtask that emitted
// it.
type Record[T any] struct {
	Value     T
	Timestamp int64
	Subtask   int
}

// OperatorHarness is what every harness is: the functions that read an
// operator's state and side outputs (Value, Timers, SideOutput, ...) take
// one.
type OperatorHarness interface {
	SetProcessingTime(ms int64)
	ProcessingTime() int64
	EndInput()
	Snapshot() *Snapshot
	NotifyCheckpointComplete(id int64)
	Parallelism() int
	harnessCore() *core
}

// core runs the subtasks of one operator: the untyped part every harness
// shares.
type core struct {
	tb     testing.TB
	node   *runtime.Node
	inputs []*runtime.Edge // by input index
	par    int
	maxPar int
	subs   []*subtask
	clock  *manualClock
	mails  mailQueue
	ctx    context.Context
	cancel context.CancelFunc
	// rr is the next subtask of each input that is neither keyed nor
	// broadcast (records go to the subtasks in turn).
	rr []int
	// outWM is the output watermark over the subtasks (what an operator
	// downstream would see); watermarks every value it took.
	outWM      int64
	watermarks []int64
	sides      map[string]*sideOutput
	snaps      snapshotter
	closed     bool
}

// subtask is one parallel instance of the operator.
type subtask struct {
	index int
	oc    *operators.Context
	op    operators.Operator
	ins   []any // operators.Input[T] of each input index
	inWM  []int64
	wm    int64 // the combined input watermark
	outWM int64
	gate  operators.InputAvailability
}

// sideOutput holds the records of one side output of the operator.
type sideOutput struct {
	node    *runtime.Node
	records []Record[any]
}

// buildSpec is what a typed harness hands the core: how to put its input
// placeholders and the test's operator into an environment, and how to
// make the operator's main output for a subtask.
type buildSpec struct {
	// addOperator adds the placeholders of the inputs and calls the
	// test's build function.
	addOperator func(env *sluice.Environment) (placeholders []*runtime.Node)
	// checkOutput says whether the operator's output codec is of the
	// harness's output type.
	checkOutput func(n *runtime.Node) error
	// output makes subtask sub's main output (an operators.Output[OUT]),
	// reporting its watermarks to wm.
	output func(sub int, wm func(int64)) any
}

// newCore builds the operator in an environment of its own and opens its
// subtasks, restored from the snapshot the settings name.
func newCore(tb testing.TB, set settings, spec buildSpec) *core {
	tb.Helper()
	if set.parallelism < 0 || set.maxParallelism < 0 {
		tb.Fatalf("sluicetest: parallelism %d, max parallelism %d: must not be negative", set.parallelism, set.maxParallelism)
	}
	envOpts := []sluice.Option{sluice.WithLogger(discardLogger())}
	if set.parallelism > 0 {
		envOpts = append(envOpts, sluice.WithParallelism(set.parallelism))
	}
	if set.maxParallelism > 0 {
		envOpts = append(envOpts, sluice.WithMaxParallelism(set.maxParallelism))
	}
	env := sluice.NewEnvironment(append(envOpts, set.envOptions...)...)
	placeholders := spec.addOperator(env)
	if err := env.Err(); err != nil {
		tb.Fatalf("sluicetest: the operator's options: %v", err)
	}
	node, err := operatorOf(env.Plan(), placeholders)
	if err != nil {
		tb.Fatalf("sluicetest: %v", err)
	}
	if err := spec.checkOutput(node); err != nil {
		tb.Fatalf("sluicetest: %v", err)
	}
	cfg := env.Config()
	c := &core{tb: tb, node: node, par: cfg.Parallelism, maxPar: cfg.MaxParallelism,
		clock: &manualClock{now: set.processingTime}, outWM: operators.MinWatermark, sides: map[string]*sideOutput{}}
	if node.Parallelism > 0 {
		c.par = node.Parallelism
	}
	if node.MaxParallelism > 0 {
		c.maxPar = node.MaxParallelism
	}
	if c.par > c.maxPar {
		tb.Fatalf("sluicetest: parallelism %d above the max parallelism %d", c.par, c.maxPar)
	}
	c.inputs = make([]*runtime.Edge, len(placeholders))
	for _, e := range node.Inputs {
		c.inputs[e.InputIndex] = e
	}
	c.rr = make([]int, len(c.inputs))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mails.init()
	tb.Cleanup(c.close)
	snap := c.snaps.load(tb, set.restoreFrom, node)
	logger := set.logger
	if logger == nil {
		logger = testLogger(tb, slog.LevelWarn)
	}
	for _, sn := range node.Sides {
		c.sides[sn.Name] = &sideOutput{node: sn}
	}
	for i := range c.par {
		s := &subtask{index: i, wm: operators.MinWatermark, outWM: operators.MinWatermark, inWM: make([]int64, len(c.inputs))}
		for k := range s.inWM {
			s.inWM[k] = operators.MinWatermark
		}
		s.oc = &operators.Context{
			OperatorName: node.Name, UID: node.UID, Subtask: i, Parallelism: c.par, MaxParallelism: c.maxPar,
			TaskName: fmt.Sprintf("%s (%d/%d)", node.Name, i+1, c.par), Metrics: operators.NewMetricGroup(),
			ProcessingTime: c.clock, Logger: logger.With("operator", node.Name, "subtask", i), Ctx: c.ctx,
			PostMail: c.mails.put,
		}
		if err := runtime.InitOperatorState(node, s.oc, set.backend, "sluicetest", snap); err != nil {
			tb.Fatalf("sluicetest: state of operator %q subtask %d: %v", node.Name, i, err)
		}
		c.subs = append(c.subs, s)
		out := spec.output(i, func(wm int64) { c.subtaskWatermark(s, wm) })
		var op operators.Operator
		var ins []any
		if node.BuildWithSides != nil {
			sides := make([]any, len(node.Sides))
			for k, sn := range node.Sides {
				so := c.sides[sn.Name]
				sides[k] = sn.Out.Observe(nil, func(v any, ts int64) error {
					so.records = append(so.records, Record[any]{Value: v, Timestamp: ts, Subtask: s.index})
					return nil
				}, nil)
			}
			op, ins, err = node.BuildWithSides(out, sides)
		} else {
			op, ins, err = node.Build(out)
		}
		if err != nil {
			tb.Fatalf("sluicetest: build operator %q subtask %d: %v", node.Name, i, err)
		}
		if len(ins) < len(c.inputs) {
			tb.Fatalf("sluicetest: operator %q has %d inputs, the harness feeds %d", node.Name, len(ins), len(c.inputs))
		}
		s.op, s.ins = op, ins
		s.gate, _ = op.(operators.InputAvailability)
		if err := op.Open(s.oc); err != nil {
			s.op = nil // not opened: not closed
			tb.Fatalf("sluicetest: open operator %q subtask %d: %v", node.Name, i, operators.Wrap(s.oc, err))
		}
	}
	return c
}

// operatorOf finds the one operator the test's build function added
// after the placeholders, and checks that it reads only them.
func operatorOf(plan *runtime.Plan, placeholders []*runtime.Node) (*runtime.Node, error) {
	var ops []*runtime.Node
	for _, n := range plan.Nodes {
		if slices.Contains(placeholders, n) || n.IsSide() {
			continue
		}
		ops = append(ops, n)
	}
	if len(ops) != 1 {
		names := make([]string, len(ops))
		for i, n := range ops {
			names[i] = fmt.Sprintf("%q", n.Name)
		}
		return nil, fmt.Errorf("the build function added %d operators (%s); a harness runs one: give each its own harness, or test them together with RunJob",
			len(ops), strings.Join(names, ", "))
	}
	n := ops[0]
	if n.IsSource() || n.Out == nil {
		return nil, fmt.Errorf("operator %q is a source or a sink; a harness runs an operator between them", n.Name)
	}
	seen := make([]bool, len(placeholders))
	for _, e := range n.Inputs {
		if !slices.Contains(placeholders, e.From) || e.InputIndex >= len(placeholders) {
			return nil, fmt.Errorf("operator %q reads a stream that is not the harness's input", n.Name)
		}
		if seen[e.InputIndex] {
			return nil, fmt.Errorf("operator %q reads its input %d twice (a union of the input with itself?)", n.Name, e.InputIndex)
		}
		seen[e.InputIndex] = true
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("operator %q does not read the harness's input %d", n.Name, i+1)
		}
	}
	return n, nil
}

func (c *core) harnessCore() *core { return c }

// Parallelism is the number of the operator's subtasks.
func (c *core) Parallelism() int { return c.par }

// fail fails the test with a message prefixed by the operator's name.
func (c *core) fail(format string, args ...any) {
	c.tb.Helper()
	c.tb.Fatalf("sluicetest: operator %q: %s", c.node.Name, fmt.Sprintf(format, args...))
}

// check fails the test on err.
func (c *core) check(what string, err error) {
	c.tb.Helper()
	if err != nil {
		c.fail("%s: %v", what, err)
	}
}

// targets are the subtasks a record of input index gets: the owner of its
// key group (keyGroup >= 0), every subtask (broadcast), or the next in
// turn.
func (c *core) targets(input, keyGroup int) []*subtask {
	switch {
	case c.inputs[input].Partitioner == runtime.PartitionBroadcast:
		return c.subs
	case keyGroup >= 0:
		return []*subtask{c.subs[state.OperatorIndexFor(keyGroup, c.maxPar, c.par)]}
	}
	s := c.subs[c.rr[input]]
	c.rr[input] = (c.rr[input] + 1) % c.par
	return []*subtask{s}
}

// element hands a record to the subtasks it goes to, as the task loop
// does: mails run first, and a subtask whose operator refuses input (an
// async operator at capacity) runs its mails until it takes it.
func (c *core) element(input, keyGroup int, deliver func(s *subtask) error) error {
	c.tb.Helper()
	if c.closed {
		c.fail("used after the test ended")
	}
	if err := c.runMails(); err != nil {
		return err
	}
	for _, s := range c.targets(input, keyGroup) {
		for s.gate != nil && !s.gate.InputAvailable() {
			if err := c.awaitMail("its input to be available again (an async operator at capacity)"); err != nil {
				return err
			}
		}
		if err := deliver(s); err != nil {
			return err
		}
		if err := c.runMails(); err != nil {
			return err
		}
	}
	return nil
}

// watermark advances input index's watermark to wm on every subtask; a
// subtask whose combined watermark (the minimum over its inputs, as the
// task's valve combines its channels) advances processes it.
func (c *core) watermark(input int, wm int64) {
	c.tb.Helper()
	c.check("run mails", c.runMails())
	for _, s := range c.subs {
		if wm <= s.inWM[input] {
			continue
		}
		s.inWM[input] = wm
		combined := slices.Min(s.inWM)
		if combined <= s.wm {
			continue
		}
		s.wm = combined
		c.check(fmt.Sprintf("watermark %d (subtask %d)", combined, s.index), s.op.ProcessWatermark(combined))
		c.check("run mails", c.runMails())
	}
}

// subtaskWatermark records a watermark subtask s emitted; the output
// watermark is the minimum over the subtasks.
func (c *core) subtaskWatermark(s *subtask, wm int64) {
	if wm > s.outWM {
		s.outWM = wm
	}
	m := s.outWM
	for _, o := range c.subs {
		m = min(m, o.outWM)
	}
	if len(c.subs) < c.par {
		return // still opening: a subtask not made yet holds it back
	}
	if m > c.outWM {
		c.outWM = m
		c.watermarks = append(c.watermarks, m)
	}
}

// SetProcessingTime moves processing time to ms (Unix milliseconds; never
// backwards) and runs what the operator scheduled up to it, in time
// order: processing-time timers, processing-time windows, async
// timeouts.
func (c *core) SetProcessingTime(ms int64) {
	c.tb.Helper()
	c.check("run mails", c.runMails())
	c.clock.set(ms)
	for {
		fn, ok := c.clock.due()
		if !ok {
			break
		}
		c.check(fmt.Sprintf("processing time %d", c.clock.Now()), fn())
		c.check("run mails", c.runMails())
	}
}

// AdvanceProcessingTime moves processing time forward by d.
func (c *core) AdvanceProcessingTime(d time.Duration) {
	c.tb.Helper()
	c.SetProcessingTime(c.clock.Now() + d.Milliseconds())
}

// ProcessingTime is the harness's processing time, in Unix milliseconds.
func (c *core) ProcessingTime() int64 { return c.clock.Now() }

// EndInput ends the operator's input, as the end of a bounded source does
// (Flink's endInput): each subtask finishes, emitting what it still
// holds (an async operator waits for its calls in flight). It does not
// advance the watermark: ProcessWatermark(MaxWatermark) does, as a
// bounded source does before it ends.
func (c *core) EndInput() {
	c.tb.Helper()
	c.check("run mails", c.runMails())
	for _, s := range c.subs {
		c.check(fmt.Sprintf("finish subtask %d", s.index), operators.Wrap(s.oc, s.op.Finish()))
		c.check("run mails", c.runMails())
	}
}

// NotifyCheckpointComplete tells the operator and its keyed backend that
// checkpoint id completed, as the job does once the checkpoint is
// durable (a two-phase-commit sink commits; a function listening for it
// acts).
func (c *core) NotifyCheckpointComplete(id int64) {
	c.tb.Helper()
	c.check("run mails", c.runMails())
	for _, s := range c.subs {
		c.check(fmt.Sprintf("notify checkpoint %d (subtask %d)", id, s.index), runtime.NotifyOperator(c.node, s.oc, s.op, id, true))
	}
	c.check("run mails", c.runMails())
}

// WaitForMail blocks until an operator posts a mail (an async call
// completing), runs it and those queued behind it. Tests of async
// functions await their results with it.
func (c *core) WaitForMail() {
	c.tb.Helper()
	c.check("wait for a mail", c.awaitMail("a mail (an async call completing)"))
}

// waitForOutput runs mails until count reaches n.
func (c *core) waitForOutput(n int, count func() int) {
	c.tb.Helper()
	c.check("run mails", c.runMails())
	for count() < n {
		c.check(fmt.Sprintf("wait for %d records (%d so far)", n, count()),
			c.awaitMail(fmt.Sprintf("record %d of the operator's output", n)))
	}
}

// runMails runs the queued mails, and those they queue, until none is
// left.
func (c *core) runMails() error {
	for {
		ms := c.mails.take()
		if len(ms) == 0 {
			return nil
		}
		for _, m := range ms {
			if err := m(); err != nil {
				return err
			}
		}
	}
}

// awaitMail waits for a mail, under the safety net, then runs the mails.
func (c *core) awaitMail(what string) error {
	select {
	case <-c.mails.signal:
	case <-time.After(SafetyNet):
		return fmt.Errorf("timed out (safety net %v) waiting for %s", SafetyNet, what)
	}
	return c.runMails()
}

// close closes the operators and their state, at the test's end.
func (c *core) close() {
	if c.closed {
		return
	}
	c.closed = true
	c.cancel()
	c.mails.close()
	var errs []error
	for _, s := range c.subs {
		if s.op != nil {
			if err := s.op.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		if kb := s.oc.KeyedState; kb != nil {
			if err := kb.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close the keyed state backend of subtask %d: %w", s.index, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.tb.Errorf("sluicetest: close operator %q: %v", c.node.Name, err)
	}
}

// mailQueue is the operator's mailbox (Context.PostMail): mails are put
// from any goroutine and run on the test's, between the harness's calls.
type mailQueue struct {
	mu     sync.Mutex
	queue  []func() error
	signal chan struct{}
	closed bool
}

func (m *mailQueue) init() { m.signal = make(chan struct{}, 1) }

func (m *mailQueue) put(fn func() error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("sluicetest: the harness is closed")
	}
	m.queue = append(m.queue, fn)
	select {
	case m.signal <- struct{}{}:
	default:
	}
	return nil
}

func (m *mailQueue) take() []func() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queue
	m.queue = nil
	return q
}

func (m *mailQueue) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}

// storageFS is the file system snapshots are written to and read from.
var storageFS storage.FS = storage.OSFS{}
