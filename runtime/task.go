package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/runtime/network/event"
	"github.com/sluicehq/sluice/source"
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

	wake    chan struct{}
	mailbox *Mailbox
	timers  *processingTime

	// the chain
	ops     []operators.Operator // head first
	opened  []operators.Operator // in the order they were opened
	opCtxs  []*operators.Context
	head    operators.Operator
	src     SourceDriver
	srcDone bool
	units   []*opUnit // every node of the chain, head first

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
	// cancellation timeout's report of the tasks still running).
	exited atomic.Bool
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
			sc := &SourceContext{Op: oc, SetIdle: t.setIdle}
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
	}
}

// run is the task goroutine.
func (t *Task) run() (err error) {
	t.counters.start.Store(time.Now().UnixNano())
	t.counters.status.Store(int32(TaskRunning))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("task %s: panic: %v\n%s", t.name, r, debug.Stack())
		}
		if cerr := t.close(); err == nil {
			err = cerr
		}
		t.counters.end.Store(time.Now().UnixNano())
		switch {
		case err == nil:
			t.counters.status.Store(int32(TaskFinished))
		case t.ctx.Err() != nil:
			t.counters.status.Store(int32(TaskCanceled))
		default:
			t.counters.status.Store(int32(TaskFailed))
		}
	}()
	for i := len(t.ops) - 1; i >= 0; i-- {
		if err := t.ops[i].Open(t.opCtxs[i]); err != nil {
			return operators.Wrap(t.opCtxs[i], err)
		}
		t.opened = append(t.opened, t.ops[i])
	}
	if err := t.replayChannelState(); err != nil {
		return err
	}
	t.scheduleFlush()
	for !t.finished {
		if t.mailbox.HasMail() {
			if err := t.runMails(); err != nil {
				return err
			}
			continue
		}
		if err := t.ctx.Err(); err != nil {
			return err
		}
		if !t.outputsAvailable() {
			t.wait(nil, &t.counters.bpNanos)
			continue
		}
		if t.src != nil {
			if t.srcDone {
				// Input ended: wait for the coordinator to allow finishing.
				t.wait(nil, &t.counters.idleNanos)
				continue
			}
			if err := t.pollSource(); err != nil {
				return err
			}
			continue
		}
		progress, err := t.processInput()
		if err != nil {
			return err
		}
		if !progress && !t.finished {
			t.wait(nil, &t.counters.idleNanos)
		}
	}
	return nil
}

func (t *Task) runMails() error {
	mails := t.mailbox.take()
	defer t.mailbox.recycle(mails)
	for _, m := range mails {
		if err := m(); err != nil {
			if errors.Is(err, errStopTask) {
				t.finished = true // stop-with-savepoint: exit without ending the partitions
				return nil
			}
			return err
		}
		if t.finished {
			return nil
		}
	}
	return nil
}

// scheduleFlush arms the output flusher: every buffer timeout, the
// partly filled buffers of the task's partitions are sent (Flink's
// execution.buffer-timeout), so that a slow or paused producer does not
// hold records back. A timeout of 0 flushes after every record instead.
func (t *Task) scheduleFlush() {
	d := t.job.cfg.BufferTimeout
	if d <= 0 || len(t.partitions) == 0 {
		return
	}
	t.timers.At(t.timers.Now()+max(d.Milliseconds(), 1), func() error {
		for _, p := range t.partitions {
			p.FlushAll()
		}
		t.scheduleFlush()
		return nil
	})
}

// wait blocks until something may have changed: a mail, input, a free
// output buffer, a source's data, or cancellation. It adds the time spent
// to counter (readable by metrics while the wait lasts).
func (t *Task) wait(extra <-chan struct{}, counter *atomic.Int64) {
	t.counters.beginWait(counter, time.Now())
	select {
	case <-t.wake:
	case <-extra:
	case <-t.ctx.Done():
	}
	t.counters.endWait(time.Now())
}

func (t *Task) outputsAvailable() bool {
	for _, p := range t.partitions {
		if !p.Available() {
			return false
		}
	}
	return true
}

// pollSource polls the source reader until it has nothing, a mail is
// waiting, or an output runs out of buffers.
func (t *Task) pollSource() error {
	for i := 0; i < 4096; i++ {
		st, err := t.src.PollNext()
		if err != nil {
			return operators.Wrap(t.opCtxs0(), err)
		}
		switch st {
		case source.MoreAvailable:
			if t.mailbox.HasMail() || !t.outputsAvailable() {
				return nil
			}
		case source.NothingAvailable:
			t.wait(t.src.Available(), &t.counters.idleNanos)
			return nil
		case source.EndOfInput:
			t.srcDone = true
			return t.endOfInput()
		}
	}
	return nil
}

// opCtxs0 is the context of the source node, for naming its errors.
func (t *Task) opCtxs0() *operators.Context {
	return t.operatorContext(t.vertex.Head())
}

// processInput reads records of the current buffer, or polls the gates for
// the next buffer or event. It reports whether it made progress.
func (t *Task) processInput() (bool, error) {
	if t.cp != nil && t.cur != nil {
		// An unaligned barrier does not wait for the rest of the buffer.
		if ok, err := t.pollPriority(); ok || err != nil {
			return true, err
		}
	}
	if ci := t.cur; ci != nil {
		n := int64(0)
		for {
			rec, ok := ci.reader.Next()
			if !ok {
				t.cur = nil
				if rerr := ci.reader.Err(); rerr != nil {
					t.recsIn += n
					return true, fmt.Errorf("%w on edge %q -> %q, subtask %d, channel %d, after record #%d of that channel: %w",
						ErrDecode, ci.gate.edge.From.Name, ci.gate.edge.To.Name, t.subtask, ci.index, ci.position, rerr)
				}
				break
			}
			ci.position++
			n++
			derr, err := ci.decoder.decode(rec)
			if derr != nil {
				t.recsIn += n
				return true, fmt.Errorf("%w on edge %q -> %q, subtask %d, channel %d, record #%d of that channel: %w",
					ErrDecode, ci.gate.edge.From.Name, ci.gate.edge.To.Name, t.subtask, ci.index, ci.position, derr)
			}
			if err != nil {
				return true, err
			}
			if t.mailbox.HasMail() || !t.outputsAvailable() || t.priorityPending() {
				break
			}
		}
		t.recsIn += n
		t.counters.recordsIn.Store(t.recsIn)
		return true, nil
	}
	for range t.gates {
		gi := t.gates[t.nextGate]
		if t.nextGate++; t.nextGate == len(t.gates) {
			t.nextGate = 0
		}
		boe, ok := gi.gate.Poll()
		if !ok {
			continue
		}
		ci := gi.channels[boe.Channel]
		if boe.Buffer != nil {
			data := boe.Buffer.Bytes()
			t.counters.bytesIn.Add(int64(len(data)))
			if t.cp != nil {
				if err := t.cp.onBuffer(gi.offset+boe.Channel, data); err != nil {
					return true, err
				}
			}
			ci.reader.Feed(boe.Buffer)
			t.cur = ci
			return true, nil
		}
		return true, t.handleEvent(ci, &boe)
	}
	return false, nil
}

// priorityPending reports whether a gate may hold a priority event.
func (t *Task) priorityPending() bool {
	if t.cp == nil {
		return false
	}
	for _, gi := range t.gates {
		if gi.gate.HasPriority() {
			return true
		}
	}
	return false
}

// pollPriority handles the next priority event of any gate, in the middle
// of a buffer: the reader of the current channel keeps its place.
func (t *Task) pollPriority() (bool, error) {
	for _, gi := range t.gates {
		if !gi.gate.HasPriority() {
			continue
		}
		if boe, ok := gi.gate.PollPriority(); ok {
			return true, t.handleEvent(gi.channels[boe.Channel], &boe)
		}
	}
	return false, nil
}

func (t *Task) handleEvent(ci *channelInput, boe *network.BufferOrEvent) error {
	ch := ci.gate.offset + ci.index
	switch e := boe.Event.(type) {
	case event.Watermark:
		if wm, adv := t.valve.watermark(ch, e.Timestamp); adv {
			return t.head.ProcessWatermark(wm)
		}
		return nil
	case event.WatermarkStatus:
		wm, adv, changed := t.valve.status(ch, e.Idle)
		if changed {
			if err := t.setIdle(t.valve.allIdle); err != nil {
				return err
			}
		}
		if adv {
			return t.head.ProcessWatermark(wm)
		}
		return nil
	case event.Barrier:
		if t.cp == nil {
			return fmt.Errorf("task %s: checkpoint barrier %d on channel %d, but checkpointing is off", t.name, e.ID, ch)
		}
		return t.cp.onBarrier(ch, e.Barrier, boe)
	case event.BarrierAnnouncement:
		if t.cp != nil {
			t.cp.onAnnouncement(e.Barrier)
		}
		return nil
	case event.CancelCheckpointMarker:
		if t.cp == nil {
			return nil
		}
		return t.cp.step(checkpoint.CancelReceived{Channel: ch, ID: e.ID}, nil)
	case event.EndOfData:
		return t.channelEndOfData(ch)
	case event.EndOfPartition:
		if t.cp != nil {
			if err := t.cp.step(checkpoint.EndOfPartition{Channel: ch}, nil); err != nil {
				return err
			}
		}
		wm, adv := t.valve.finish(ch)
		if adv {
			if err := t.head.ProcessWatermark(wm); err != nil {
				return err
			}
		}
		if err := t.channelEndOfData(ch); err != nil {
			return err
		}
		return t.maybeFinish()
	default:
		return fmt.Errorf("task %s: unexpected event %T on edge %q -> %q channel %d", t.name, boe.Event, ci.gate.edge.From.Name, ci.gate.edge.To.Name, ci.index)
	}
}

// channelEndOfData records that channel ch ended its data; once every
// channel has, the operators finish.
func (t *Task) channelEndOfData(ch int) error {
	if t.endOfData[ch] {
		return nil
	}
	t.endOfData[ch] = true
	for _, ended := range t.endOfData {
		if !ended {
			return nil
		}
	}
	return t.endOfInput()
}

// setIdle tells the consumers that this task is idle, or active again.
func (t *Task) setIdle(idle bool) error {
	if idle == t.idle {
		return nil
	}
	t.idle = idle
	for _, p := range t.partitions {
		if err := p.BroadcastEvent(event.WatermarkStatus{Idle: idle}); err != nil {
			return fmt.Errorf("task %s: broadcast watermark status: %w", t.name, err)
		}
	}
	return nil
}

// endOfInput finishes the chain head first and tells the consumers that
// the data ended; the partitions end once finishing is allowed.
func (t *Task) endOfInput() error {
	if t.inputEnded {
		return nil
	}
	t.inputEnded = true
	for i, op := range t.ops {
		if err := op.Finish(); err != nil {
			return operators.Wrap(t.opCtxs[i], err)
		}
	}
	if !t.allowedFinish {
		for _, p := range t.partitions {
			p.FlushAll()
			if err := p.BroadcastEvent(event.EndOfData{}); err != nil {
				return fmt.Errorf("task %s: broadcast end of data: %w", t.name, err)
			}
		}
		if t.src != nil && t.att.gateway != nil {
			t.toCoordinator(t.att.gateway.Report(TaskEvent{From: t.ref(), Kind: ReportEndOfInput}))
		}
	}
	return t.maybeFinish()
}

// allowFinish is the coordinator's word that the final checkpoint is
// complete: the task may end its partitions once its input has ended.
func (t *Task) allowFinish() error {
	t.allowedFinish = true
	return t.maybeFinish()
}

// maybeFinish ends the partitions and the task once the input ended, the
// coordinator allows it, and every input channel delivered its end of
// partition.
func (t *Task) maybeFinish() error {
	if t.finished || !t.inputEnded || !t.allowedFinish {
		return nil
	}
	for _, gi := range t.gates {
		if !gi.gate.Finished() {
			return nil
		}
	}
	for _, p := range t.partitions {
		if err := p.Finish(); err != nil {
			return fmt.Errorf("task %s: finish partition: %w", t.name, err)
		}
	}
	t.finished = true
	return nil
}

// close releases everything the task holds, on every exit path.
func (t *Task) close() error {
	t.mailbox.close()
	t.timers.stopAll()
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

// metrics reads the task's figures; safe from any goroutine.
func (t *Task) metrics() TaskMetrics {
	m := TaskMetrics{
		Vertex:     t.vertex.Name,
		Subtask:    t.subtask,
		Status:     TaskStatus(t.counters.status.Load()),
		RecordsIn:  t.counters.recordsIn.Load(),
		BytesIn:    t.counters.bytesIn.Load(),
		RecordsOut: t.counters.recordsOut.Load(),
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
		end := t.counters.end.Load()
		if end == 0 {
			end = now.UnixNano()
		}
		m.Elapsed = time.Duration(end - start)
	}
	m.BusyTime = max(m.Elapsed-m.IdleTime-m.BackPressuredTime, 0)
	return m
}

// processingTime is a task's ProcessingTimeService: callbacks become mails.
type processingTime struct {
	mailbox *Mailbox
	mu      sync.Mutex
	timers  map[*time.Timer]struct{}
	stopped bool
}

func (p *processingTime) Now() int64 { return time.Now().UnixMilli() }

func (p *processingTime) At(ts int64, fn func() error) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return func() {}
	}
	var tm *time.Timer
	var canceled bool // guarded by p.mu
	tm = time.AfterFunc(time.Until(time.UnixMilli(ts)), func() {
		p.mu.Lock()
		delete(p.timers, tm)
		p.mu.Unlock()
		_ = p.mailbox.Put(func() error {
			p.mu.Lock()
			c := canceled
			p.mu.Unlock()
			if c {
				return nil
			}
			return fn()
		})
	})
	p.timers[tm] = struct{}{}
	return func() {
		p.mu.Lock()
		canceled = true
		if tm.Stop() {
			delete(p.timers, tm)
		}
		p.mu.Unlock()
	}
}

func (p *processingTime) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	for tm := range p.timers {
		tm.Stop()
	}
	p.timers = nil
}
