package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime/network"
)

// ErrDecode is returned (wrapped) when a record from the network cannot be
// decoded; the message names the edge, the subtask, the channel and the
// record's position in that channel.
var ErrDecode = errors.New("cannot decode record")

// Task runs one subtask of a JobVertex: one goroutine, a mailbox loop that
// interleaves mails, input (or source polling) and timers.
type Task struct {
	job      *Job
	att      *attempt
	id       checkpoint.TaskID
	upstream []checkpoint.TaskID
	vertex   *JobVertex
	subtask  int
	name     string
	logger   *slog.Logger
	ctx      context.Context
	// cancel ends ctx: the task's own, under its attempt's, so that a
	// failover region's tasks stop while the others run on.
	cancel context.CancelFunc
	// execution counts the restarts of the task's failover region within
	// its attempt: messages of an earlier execution are stale.
	execution int
	// restore is what the task restored from: its attempt's snapshot, or
	// the checkpoint its region restarted from (nil: no state).
	restore *restoreSnapshot
	// restoreCounters collect the figures of the restore the task is part
	// of: its attempt's, or its failover region's restart's.
	restoreCounters *restoreCounters
	// published are the ids of the task's partitions offered to remote
	// consumers (Exchange.Publish).
	published []string
	// attemptNumber is the operators' Attempt: the attempt's number and
	// the region restarts of the run before the task was made.
	attemptNumber int

	wake    chan struct{}
	mailbox *Mailbox
	timers  *processingTime
	// flusher sends the partly filled output buffers every buffer
	// timeout (startFlusher); nil without partitions or a timeout that
	// flushes by time. Task goroutine only.
	flusher *outputFlusher

	// the chain
	ops     []operators.Operator // head first
	opened  []operators.Operator // in the order they were opened
	opCtxs  []*operators.Context
	head    operators.Operator
	src     SourceDriver
	srcDone bool
	// stoppedAt is the stop-with-savepoint whose barrier this source task
	// emitted (0: none): it reads no more records until the stop mail
	// ends it, or the savepoint is aborted and it carries on.
	stoppedAt int64
	units     []*opUnit // every node of the chain, head first
	// gated are the chain's operators that may refuse input for a while.
	gated []operators.InputAvailability

	// network
	partitions  []*network.ResultPartition
	writers     []*netWriter
	gates       []*gateInput
	nextGate    int
	cur         *channelInput // the channel whose buffer is being read
	valve       *watermarkValve
	numChannels int
	idle        bool // this task told its consumers it is idle

	cp *taskCheckpoints // nil when checkpointing is off

	// End of input: the operators finished (inputEnded) once every
	// channel delivered EndOfData; the partitions end once the coordinator
	// allows it (after the final checkpoint) and, for a consumer, every
	// channel delivered EndOfPartition.
	endOfData     []bool
	inputEnded    bool
	allowedFinish bool

	finished bool
	counters taskCounters
	recsIn   int64
	// exited is set once the task goroutine returned (for the
	// cancellation timeout's report of the tasks still running); exitCh
	// is closed then (queries waiting for an answer stop waiting).
	exited atomic.Bool
	exitCh chan struct{}
}

// gateInput is one input gate of a task and what it needs to read it.
type gateInput struct {
	edge     *Edge
	gate     *network.InputGate
	channels []*channelInput
	offset   int // index of channel 0 in the task's watermark valve
}

type channelInput struct {
	gate     *gateInput
	index    int
	reader   *network.RecordReader
	decoder  recordDecoder
	position int64 // records read so far on this channel
}

func (t *Task) String() string { return t.name }

// Mailbox returns the task's mailbox.
func (t *Task) Mailbox() *Mailbox { return t.mailbox }

// build wires the operator chain: every node's output is the fan-out of
// the inputs of its chained successors and of its network writers.
func (t *Task) build(g *JobGraph) error {
	type builtNode struct {
		op  operators.Operator
		ins []any
	}
	built := map[*Node]builtNode{}
	var post []operators.Operator
	var postCtx []*operators.Context
	// outputOf makes the output of n (or of a side output node): the
	// fan-out of its chained successors' inputs and its network writers.
	var build func(n *Node) ([]any, error)
	outputOf := func(n *Node) (any, error) {
		var outs []any
		for _, e := range g.outEdges[n] {
			if g.Chained(e) {
				if _, ok := built[e.To]; !ok {
					if _, err := build(e.To); err != nil {
						return nil, err
					}
				}
				b := built[e.To]
				if e.InputIndex >= len(b.ins) {
					return nil, invalid(e.To, "has no input %d", e.InputIndex)
				}
				o, err := n.Out.chainedOutput(b.ins[e.InputIndex], b.op)
				if err != nil {
					return nil, invalid(e.To, "%v", err)
				}
				outs = append(outs, o)
				continue
			}
			w := t.writerFor(e)
			o, err := n.Out.networkOutput(w, e.KeyHash)
			if err != nil {
				return nil, invalid(n, "%v", err)
			}
			outs = append(outs, o)
		}
		if n.Out == nil {
			return nil, nil
		}
		return n.Out.fanOut(outs), nil
	}
	build = func(n *Node) ([]any, error) {
		out, err := outputOf(n)
		if err != nil {
			return nil, err
		}
		var sides []any
		for _, sn := range n.Sides {
			so, err := outputOf(sn)
			if err != nil {
				return nil, err
			}
			sides = append(sides, so)
		}
		oc := t.operatorContext(n)
		if err := t.initState(n, oc); err != nil {
			return nil, operators.Wrap(oc, err)
		}
		u := &opUnit{node: n, ctx: oc}
		t.units = append(t.units, u)
		if n.IsSource() {
			sc := &SourceContext{Op: oc, SetIdle: t.setIdle, ShouldYield: t.shouldYield}
			// A source task has no input channels: its input watermark is
			// the one its watermark strategy generates into the chain.
			out = n.Out.watchWatermarks(out, t.inputWatermark)
			d, err := n.BuildSource(sc, out)
			if err != nil {
				return nil, operators.Wrap(oc, fmt.Errorf("create source reader: %w", err))
			}
			t.src = d
			built[n] = builtNode{}
			return nil, nil
		}
		var op operators.Operator
		var ins []any
		if n.BuildWithSides != nil {
			op, ins, err = n.BuildWithSides(out, sides)
		} else {
			op, ins, err = n.Build(out)
		}
		if err != nil {
			return nil, operators.Wrap(oc, err)
		}
		u.op = op
		built[n] = builtNode{op: op, ins: ins}
		post = append(post, op)
		postCtx = append(postCtx, oc)
		return ins, nil
	}
	headIns, err := build(t.vertex.Head())
	if err != nil {
		return err
	}
	// units were appended tail first (post-order); the chain runs head first.
	slices.Reverse(t.units)
	if t.units[0].node != t.vertex.Head() {
		return invalid(t.vertex.Head(), "chain order")
	}
	in, out, err := t.channelStateOf(t.vertex.Head())
	if err != nil {
		return err
	}
	t.units[0].inputState, t.units[0].outputState = in, out
	t.endOfData = make([]bool, t.numChannels)
	t.allowedFinish = t.att.driver == nil && !t.job.cfg.Checkpoint.Enabled()
	if t.job.cfg.Checkpoint.Enabled() {
		t.cp = newTaskCheckpoints(t)
	}
	// post is tail-first; ops run head-first.
	for i := len(post) - 1; i >= 0; i-- {
		t.ops = append(t.ops, post[i])
		t.opCtxs = append(t.opCtxs, postCtx[i])
	}
	if !t.vertex.Head().IsSource() {
		t.head = t.ops[0]
	}
	for _, op := range t.ops {
		if a, ok := op.(operators.InputAvailability); ok {
			t.gated = append(t.gated, a)
		}
	}
	for _, gi := range t.gates {
		for _, ci := range gi.channels {
			if gi.edge.InputIndex >= len(headIns) {
				return invalid(t.vertex.Head(), "has no input %d", gi.edge.InputIndex)
			}
			d, err := gi.edge.From.Out.decoder(headIns[gi.edge.InputIndex])
			if err != nil {
				return invalid(t.vertex.Head(), "input %d: %v", gi.edge.InputIndex, err)
			}
			ci.decoder = d
		}
	}
	return nil
}

func (t *Task) writerFor(e *Edge) *netWriter {
	for _, w := range t.writers {
		if w.edge == e {
			return w
		}
	}
	panic("runtime: no writer for edge " + e.From.Name + " -> " + e.To.Name)
}

func (t *Task) operatorContext(n *Node) *operators.Context {
	return &operators.Context{
		OperatorName:   n.Name,
		UID:            n.UID,
		Subtask:        t.subtask,
		Parallelism:    t.vertex.Parallelism,
		MaxParallelism: t.vertex.MaxParallelism,
		ProcessingTime: t.timers,
		Logger:         t.logger.With("operator", n.Name),
		Ctx:            t.ctx,
		PostMail:       func(fn func() error) error { return t.mailbox.Put(fn) },
		TaskName:       t.name,
		Attempt:        t.attemptNumber,
		Metrics:        operators.NewMetricGroup(),
	}
}

// close releases everything the task holds, on every exit path.
func (t *Task) close() error {
	t.mailbox.close()
	t.timers.stopAll()
	t.flusher.stop()
	var errs []error
	for _, op := range t.opened {
		if err := op.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if t.src != nil {
		if err := t.src.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close source of %s: %w", t.name, err))
		}
	}
	if t.cp != nil {
		t.cp.close()
	}
	for _, g := range t.gates {
		// A consumer that stops takes no more data: producers still writing
		// to it must not wait for its credit.
		g.gate.Release()
	}
	t.closeState()
	return errors.Join(errs...)
}

// closeState releases the operators' state backends.
func (t *Task) closeState() {
	for _, u := range t.units {
		if u.ctx.KeyedState != nil {
			if err := u.ctx.KeyedState.Close(); err != nil {
				t.logger.Warn("close keyed state backend", "operator", u.node.Name, "err", err)
			}
			u.ctx.KeyedState = nil
		}
	}
}

// inputWatermark records the task's input watermark (on the task
// goroutine).
func (t *Task) inputWatermark(wm int64) {
	if wm > t.counters.inputWM.Load() {
		t.counters.inputWM.Store(wm)
	}
}

// metrics reads the task's figures; safe from any goroutine.
func (t *Task) metrics() TaskMetrics {
	m := TaskMetrics{
		Vertex:     t.vertex.Name,
		Subtask:    t.subtask,
		Status:     TaskStatus(t.counters.status.Load()),
		RecordsIn:  t.counters.recordsIn.Load(),
		BytesIn:    t.counters.bytesIn.Load(),
		RecordsOut: t.counters.recordsOut.Load(),

		InputWatermark:  t.counters.inputWM.Load(),
		OutputWatermark: t.counters.outputWM.Load(),
	}
	if len(t.partitions) == 0 {
		// Nothing downstream: the chain's output is where its input got.
		m.OutputWatermark = m.InputWatermark
	}
	for _, u := range t.units {
		m.User = append(m.User, u.ctx.Metrics.Report(u.node.Name)...)
		m.Connectors = append(m.Connectors, u.ctx.Metrics.ReporterFigures(u.node.Name)...)
	}
	now := time.Now()
	idle, bp := t.counters.waits(now)
	m.IdleTime = time.Duration(idle)
	for _, p := range t.partitions {
		s := p.Stats()
		bp += s.BackPressuredNanos
		m.BytesOut += s.BytesOut
		m.RecordsOut += s.RecordsOut
	}
	m.BackPressuredTime = time.Duration(bp)
	if start := t.counters.start.Load(); start != 0 {
		m.Started = time.Unix(0, start)
		end := t.counters.end.Load()
		if end != 0 {
			m.Ended = time.Unix(0, end)
		}
		if end == 0 {
			end = now.UnixNano()
		}
		m.Elapsed = time.Duration(end - start)
	}
	m.BusyTime = max(m.Elapsed-m.IdleTime-m.BackPressuredTime, 0)
	return m
}
