package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/source"
)

// ErrDecode is returned (wrapped) when a record from the network cannot be
// decoded; the message names the edge, the subtask, the channel and the
// record's position in that channel.
var ErrDecode = errors.New("cannot decode record")

// Task runs one subtask of a JobVertex: one goroutine, a mailbox loop that
// interleaves mails, input (or source polling) and timers.
type Task struct {
	job     *Job
	vertex  *JobVertex
	subtask int
	name    string
	logger  *slog.Logger
	ctx     context.Context

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

	// network
	partitions []*network.ResultPartition
	writers    []*netWriter
	gates      []*gateInput
	nextGate   int
	cur        *channelInput // the channel whose buffer is being read
	valve      *watermarkValve
	idle       bool // this task told its consumers it is idle

	finished bool
	counters taskCounters
	recsIn   int64
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
	var build func(n *Node) ([]any, error)
	build = func(n *Node) ([]any, error) {
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
		var out any
		if n.Out != nil {
			out = n.Out.fanOut(outs)
		}
		oc := t.operatorContext(n)
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
		op, ins, err := n.Build(out)
		if err != nil {
			return nil, operators.Wrap(oc, err)
		}
		built[n] = builtNode{op: op, ins: ins}
		post = append(post, op)
		postCtx = append(postCtx, oc)
		return ins, nil
	}
	headIns, err := build(t.vertex.Head())
	if err != nil {
		return err
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
	if t.srcDone {
		return t.endOfInput()
	}
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
			if t.mailbox.HasMail() || !t.outputsAvailable() {
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
			t.counters.bytesIn.Add(int64(len(boe.Buffer.Bytes())))
			ci.reader.Feed(boe.Buffer)
			t.cur = ci
			return true, nil
		}
		return true, t.handleEvent(ci, boe.Event)
	}
	return false, nil
}

func (t *Task) handleEvent(ci *channelInput, ev any) error {
	ch := ci.gate.offset + ci.index
	switch e := ev.(type) {
	case Watermark:
		if wm, adv := t.valve.watermark(ch, e.Timestamp); adv {
			return t.head.ProcessWatermark(wm)
		}
		return nil
	case WatermarkStatus:
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
	case network.EndOfPartition:
		wm, adv := t.valve.finish(ch)
		if adv {
			if err := t.head.ProcessWatermark(wm); err != nil {
				return err
			}
		}
		for _, gi := range t.gates {
			if !gi.gate.Finished() {
				return nil
			}
		}
		return t.endOfInput()
	default:
		return fmt.Errorf("task %s: unexpected event %T on edge %q -> %q channel %d", t.name, ev, ci.gate.edge.From.Name, ci.gate.edge.To.Name, ci.index)
	}
}

// setIdle tells the consumers that this task is idle, or active again.
func (t *Task) setIdle(idle bool) error {
	if idle == t.idle {
		return nil
	}
	t.idle = idle
	for _, p := range t.partitions {
		if err := p.BroadcastEvent(WatermarkStatus{Idle: idle}); err != nil {
			return fmt.Errorf("task %s: broadcast watermark status: %w", t.name, err)
		}
	}
	return nil
}

// endOfInput finishes the chain head first, then ends every partition.
func (t *Task) endOfInput() error {
	for i, op := range t.ops {
		if err := op.Finish(); err != nil {
			return operators.Wrap(t.opCtxs[i], err)
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
	return errors.Join(errs...)
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
