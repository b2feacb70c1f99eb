package main

// The operators job (-job operators): one job graph that runs every
// DataStream operator of the root package on event-time input read from
// Kafka, each writing its results to an output topic of its own through
// one transactional Kafka sink, so that a test can kill the process and
// compare each operator's committed output with a plain evaluation of the
// input.
//
// Input topics (-in is their prefix): IN-left and IN-right hold events
// (key: the event's key, value: the JSON of opEvent, the record's
// timestamp: the event time); IN-rules holds rules (the JSON of
// opRule). The event timestamps are out of order by less than
// opOutOfOrderness within each partition, so no record is late and every
// event-time result is determined by the input alone. Output topics (-out
// is their prefix), one record per result, key and value as below:
//
//	OUT-cop    KeyedCoProcess: per key and opPeriod of event time (a timer
//	           at the period's end), key: the key, value
//	           "period,nLeft,nRight,sumLeft,sumRight"
//	OUT-ij     IntervalJoin: each left l and right r of one key with
//	           l.ts+opJoinLower <= r.ts <= l.ts+opJoinUpper, value "l,r" (ids)
//	OUT-wj     WindowJoin: each left and right of one key in one tumbling
//	           event-time window of opWindow, value "l,r,windowStart"
//	OUT-kbc    ProcessKeyedBroadcast: each left event with its version's
//	           rule (held in keyed state until the rule is broadcast),
//	           value "id,version,v*mul"
//	OUT-bc     ProcessBroadcast: each right event with its version's rule
//	           (held in operator state until then), value
//	           "id,version,v*mul+version"
//	OUT-async  UnorderedWait: each left event looked up in a slow
//	           in-process service, value "id,lookup(id,key)"
//	OUT-rich   RichMap: each right event weighed by a table its Open
//	           builds, value "id,v*weight(key)"
//
// Besides the lines of main.go it prints "async in flight at checkpoint N
// subtask S: K" when the async operator's subtask S snapshots checkpoint
// N with K calls in flight (their records are in the checkpoint and called
// again on restore), "async calls in flight at the kill: K" before a
// -kill-in-interval kill (which waits for K > 0 a little), and "rich map
// closed subtask S: mapped N" when the rich map is closed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
)

// The event-time parameters of the operators job (the test evaluates the
// same).
const (
	opOutOfOrderness = 300 * time.Millisecond
	opPeriod         = int64(1000) // ms, the keyed co-process' periods
	opWindow         = 300 * time.Millisecond
	opJoinLower      = -50 * time.Millisecond
	opJoinUpper      = 100 * time.Millisecond
	// opAsyncTimeout bounds an async call; the service answers in 5-25 ms.
	opAsyncTimeout = 30 * time.Second
)

// opEvent is one event of IN-left or IN-right.
type opEvent struct {
	ID      int    `json:"id"`
	Key     string `json:"key"`
	V       int    `json:"v"`
	Version int    `json:"ver"`
	// TS is the record's timestamp (the decoder sets it, whatever the
	// JSON says).
	TS int64 `json:"ts"`
}

// opRule is one rule of IN-rules: the multiplier of the events of its
// version.
type opRule struct {
	Version int `json:"ver"`
	Mul     int `json:"mul"`
}

// opOut is one result: the suffix of its output topic, key and value.
type opOut struct {
	Op, Key, Value string
}

// asyncInFlight counts the async calls in flight in the process.
var asyncInFlight atomic.Int64

func operatorsJob(env *sluice.Environment, o options, seeds []string, log *slog.Logger, final *finalTracker) error {
	decodeEvent := func(r *kgo.Record) (opEvent, error) {
		var e opEvent
		if err := json.Unmarshal(r.Value, &e); err != nil {
			return e, fmt.Errorf("decode event at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		e.TS = r.Timestamp.UnixMilli()
		return e, nil
	}
	eventSource := func(topic string) (*kafkasource.Source[opEvent], error) {
		return kafkasource.NewSource(seeds, kafkasource.Topics(topic), decodeEvent, kafkasource.Bounded(), kafkasource.Logger(log))
	}
	leftSrc, err := eventSource(o.in + "-left")
	if err != nil {
		return err
	}
	rightSrc, err := eventSource(o.in + "-right")
	if err != nil {
		return err
	}
	rulesSrc, err := kafkasource.NewSource(seeds, kafkasource.Topics(o.in+"-rules"), func(r *kgo.Record) (opRule, error) {
		var rl opRule
		if err := json.Unmarshal(r.Value, &rl); err != nil {
			return rl, fmt.Errorf("decode rule at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		return rl, nil
	}, kafkasource.Bounded(), kafkasource.Logger(log))
	if err != nil {
		return err
	}
	// Both event streams are paced together (-rate), the rules on their
	// own (-rule-rate), so that the job is still running when the test
	// kills it and rules come while events of their version do.
	pace, rulePace := newLimiter(o.rate), newLimiter(o.ruleRate)
	paced := func(s *sluice.Stream[opEvent], name string) *sluice.Stream[opEvent] {
		return sluice.Map(s, func(e opEvent) (opEvent, error) { pace.wait(); return e, nil }, sluice.Name(name), sluice.UID(name))
	}
	// Watermarks per partition (FromSource applies the strategy per
	// split): each partition's disorder is bounded, the interleaving of a
	// reader's partitions is not. The timestamps are the records'.
	events := sluice.ForBoundedOutOfOrderness[opEvent](opOutOfOrderness).
		WithTimestampAssigner(func(e opEvent, _ int64) int64 { return e.TS })
	left := paced(sluice.FromSource(env, leftSrc, events, "left-in", sluice.UID("left-in")), "left-pace")
	right := paced(sluice.FromSource(env, rightSrc, events, "right-in", sluice.UID("right-in")), "right-pace")
	// One rules subtask: its pace's sleeps are what a barrier waits behind
	// on the rules side, one gap at most.
	rules := sluice.Map(sluice.FromSource(env, rulesSrc, sluice.NoWatermarks[opRule](), "rules-in", sluice.UID("rules-in"), sluice.Parallelism(1)),
		func(r opRule) (opRule, error) { rulePace.wait(); return r, nil }, sluice.Name("rules-pace"), sluice.UID("rules-pace"), sluice.Parallelism(1))

	byKey := func(e opEvent) string { return e.Key }
	cop := sluice.KeyedCoProcess(sluice.ConnectKeyed(sluice.KeyBy(left, byKey), sluice.KeyBy(right, byKey)),
		sluice.KeyedCoProcessFunction[string, opEvent, opEvent, opOut](&periodTotals{}), sluice.Name("cop"), sluice.UID("cop"))
	ij := sluice.ProcessIntervalJoin(
		sluice.IntervalJoin(sluice.KeyBy(left, byKey), sluice.KeyBy(right, byKey)).Between(opJoinLower, opJoinUpper),
		sluice.ProcessJoinFunc[opEvent, opEvent, opOut](func(_ *sluice.JoinContext, l, r opEvent, out sluice.Collector[opOut]) error {
			out.Collect(opOut{Op: "ij", Key: l.Key, Value: fmt.Sprintf("%d,%d", l.ID, r.ID)})
			return nil
		}), sluice.Name("ij"), sluice.UID("ij"))
	wj := sluice.ApplyWindowJoin(
		sluice.WindowJoin(sluice.KeyBy(left, byKey), sluice.KeyBy(right, byKey)).Window(sluice.TumblingEventTimeWindows(opWindow)),
		sluice.JoinFunc[opEvent, opEvent, opOut](func(l, r opEvent) (opOut, error) {
			w := opWindow.Milliseconds()
			return opOut{Op: "wj", Key: l.Key, Value: fmt.Sprintf("%d,%d,%d", l.ID, r.ID, l.TS-l.TS%w)}, nil
		}), sluice.Name("wj"), sluice.UID("wj"))
	ruleStream := sluice.NewBroadcastStream(rules, sluice.DeclareBroadcastState(rulesDesc))
	kbc := sluice.ProcessKeyedBroadcast(sluice.KeyBy(left, byKey), ruleStream,
		sluice.KeyedBroadcastProcessFunction[string, opEvent, opRule, opOut](&keyedRules{}), sluice.Name("kbc"), sluice.UID("kbc"))
	bc := sluice.ProcessBroadcast(right, ruleStream,
		sluice.BroadcastProcessFunction[opEvent, opRule, opOut](&pendingRules{}), sluice.Name("bc"), sluice.UID("bc"))
	async := sluice.UnorderedWait(left, sluice.AsyncFunction[opEvent, opOut](&slowLookup{}), opAsyncTimeout, o.asyncCapacity,
		sluice.Name("async"), sluice.UID("async"))
	rich := sluice.RichMap(right, sluice.MapFunction[opEvent, opOut](&weigher{}), sluice.Name("rich"), sluice.UID("rich"))

	out, err := kafkasink.NewSink(seeds, func(r opOut) (*kgo.Record, error) {
		return &kgo.Record{Topic: o.out + "-" + r.Op, Key: []byte(r.Key), Value: []byte(r.Value)}, nil
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(o.prefix), kafkasink.Logger(log))
	if err != nil {
		return err
	}
	beforeKill = func() {
		// A kill while async calls are in flight: wait for one a little
		// (the async operator may be between records).
		for deadline := time.Now().Add(2 * time.Second); asyncInFlight.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		fmt.Printf("async calls in flight at the kill: %d\n", asyncInFlight.Load())
	}
	sluice.SinkTo(sluice.Union(cop, ij, wj, kbc, bc, async, rich), injectedSink(o, final, out), sluice.Name("kafka-out"), sluice.UID("kafka-out"))
	return nil
}

// periodTotals is the keyed co-process function: per key and period of
// event time it counts and sums the values of both inputs in keyed map
// state, and emits them from an event-time timer at the period's end, when
// the watermark says both inputs are past it.
type periodTotals struct {
	totals state.MapState[int64, periodTotal]
}

// periodTotal is what periodTotals holds for one key and period.
type periodTotal struct {
	NLeft, NRight, SumLeft, SumRight int
}

func (p *periodTotals) Open(ctx *sluice.OperatorContext) error {
	var err error
	p.totals, err = state.GetMapState(ctx.KeyedState, state.MapStateDescriptor[int64, periodTotal]{Name: "cop-totals"})
	return err
}

func (p *periodTotals) add(ctx *sluice.KeyedContext[string], e opEvent, isLeft bool) error {
	period := ctx.Timestamp() - ctx.Timestamp()%opPeriod
	t, _, err := p.totals.Get(period)
	if err != nil {
		return err
	}
	if isLeft {
		t.NLeft, t.SumLeft = t.NLeft+1, t.SumLeft+e.V
	} else {
		t.NRight, t.SumRight = t.NRight+1, t.SumRight+e.V
	}
	ctx.Timers().RegisterEventTimeTimer(period + opPeriod - 1)
	return p.totals.Put(period, t)
}

func (p *periodTotals) ProcessElement1(ctx *sluice.KeyedContext[string], e opEvent, _ sluice.Collector[opOut]) error {
	return p.add(ctx, e, true)
}

func (p *periodTotals) ProcessElement2(ctx *sluice.KeyedContext[string], e opEvent, _ sluice.Collector[opOut]) error {
	return p.add(ctx, e, false)
}

func (p *periodTotals) OnTimer(ctx *sluice.KeyedContext[string], ts int64, out sluice.Collector[opOut]) error {
	period := ts + 1 - opPeriod
	t, ok, err := p.totals.Get(period)
	if err != nil || !ok {
		return err
	}
	out.Collect(opOut{Op: "cop", Key: ctx.Key(), Value: fmt.Sprintf("%d,%d,%d,%d,%d", period, t.NLeft, t.NRight, t.SumLeft, t.SumRight)})
	return p.totals.Remove(period)
}

// rulesDesc is the broadcast state of the rules: version -> multiplier.
var rulesDesc = state.MapStateDescriptor[int, int]{Name: "rules"}

// keyedRules applies the rules on the keyed side: an event whose rule has
// not come yet waits in keyed state, and the rule's arrival applies it to
// the waiting events of every key (ApplyToKeyedState), so the results do
// not depend on how the two inputs interleave.
type keyedRules struct {
	waiting state.MapState[int, []opEvent]
}

func (k *keyedRules) Open(ctx *sluice.OperatorContext) error {
	var err error
	k.waiting, err = state.GetMapState(ctx.KeyedState, state.MapStateDescriptor[int, []opEvent]{Name: "kbc-waiting"})
	return err
}

func kbcOut(e opEvent, mul int) opOut {
	return opOut{Op: "kbc", Key: e.Key, Value: fmt.Sprintf("%d,%d,%d", e.ID, e.Version, e.V*mul)}
}

func (k *keyedRules) ProcessElement(ctx *sluice.KeyedReadOnlyBroadcastContext[string], e opEvent, out sluice.Collector[opOut]) error {
	rs, err := sluice.GetReadOnlyBroadcastState(ctx, rulesDesc)
	if err != nil {
		return err
	}
	mul, ok, err := rs.Get(e.Version)
	if err != nil {
		return err
	}
	if ok {
		out.Collect(kbcOut(e, mul))
		return nil
	}
	w, _, err := k.waiting.Get(e.Version)
	if err != nil {
		return err
	}
	return k.waiting.Put(e.Version, append(w, e))
}

func (k *keyedRules) ProcessBroadcastElement(ctx *sluice.KeyedBroadcastContext[string], r opRule, out sluice.Collector[opOut]) error {
	rs, err := sluice.GetBroadcastState(ctx, rulesDesc)
	if err != nil {
		return err
	}
	if err := rs.Put(r.Version, r.Mul); err != nil {
		return err
	}
	return ctx.ApplyToKeyedState("kbc-waiting", func(string) error {
		w, ok, err := k.waiting.Get(r.Version)
		if err != nil || !ok {
			return err
		}
		for _, e := range w {
			out.Collect(kbcOut(e, r.Mul))
		}
		return k.waiting.Remove(r.Version)
	})
}

// pendingRules applies the rules on a non-keyed stream: an event whose
// rule has not come yet waits in the function's operator list state
// (snapshot at every checkpoint) until the rule is broadcast.
type pendingRules struct {
	st      state.OperatorListState[opEvent]
	pending []opEvent
	// recheck: restored pending events may have moved from another
	// subtask, whose rules were not this one's at the checkpoint.
	recheck bool
}

func (p *pendingRules) Open(ctx *sluice.OperatorContext) error {
	var err error
	p.st, err = state.GetOperatorListState(ctx.OperatorState, state.ListStateDescriptor[opEvent]{Name: "bc-pending"})
	if err != nil {
		return err
	}
	p.pending, err = p.st.Get()
	p.recheck = len(p.pending) > 0
	return err
}

func (p *pendingRules) SnapshotState(int64) error { return p.st.Update(p.pending) }

func bcOut(e opEvent, mul int) opOut {
	return opOut{Op: "bc", Key: e.Key, Value: fmt.Sprintf("%d,%d,%d", e.ID, e.Version, e.V*mul+e.Version)}
}

// release emits the pending events whose rules rs holds.
func (p *pendingRules) release(rs state.ReadOnlyBroadcastState[int, int], out sluice.Collector[opOut]) error {
	kept := p.pending[:0]
	for _, e := range p.pending {
		mul, ok, err := rs.Get(e.Version)
		if err != nil {
			return err
		}
		if ok {
			out.Collect(bcOut(e, mul))
		} else {
			kept = append(kept, e)
		}
	}
	p.pending = kept
	return nil
}

func (p *pendingRules) ProcessElement(ctx *sluice.ReadOnlyBroadcastContext, e opEvent, out sluice.Collector[opOut]) error {
	rs, err := sluice.GetReadOnlyBroadcastState(ctx, rulesDesc)
	if err != nil {
		return err
	}
	if p.recheck {
		p.recheck = false
		if err := p.release(rs, out); err != nil {
			return err
		}
	}
	mul, ok, err := rs.Get(e.Version)
	if err != nil {
		return err
	}
	if ok {
		out.Collect(bcOut(e, mul))
	} else {
		p.pending = append(p.pending, e)
	}
	return nil
}

func (p *pendingRules) ProcessBroadcastElement(ctx *sluice.BroadcastContext, r opRule, out sluice.Collector[opOut]) error {
	rs, err := sluice.GetBroadcastState(ctx, rulesDesc)
	if err != nil {
		return err
	}
	if err := rs.Put(r.Version, r.Mul); err != nil {
		return err
	}
	ro, err := sluice.GetReadOnlyBroadcastState(ctx, rulesDesc)
	if err != nil {
		return err
	}
	p.recheck = false
	return p.release(ro, out)
}

// slowLookup is the async function: a slow in-process service that
// answers each event after 5 to 25 ms with lookupValue.
type slowLookup struct {
	subtask  int
	inFlight *atomic.Int64 // this subtask's calls not answered yet
}

func (s *slowLookup) Open(ctx *sluice.OperatorContext) error {
	s.subtask, s.inFlight = ctx.Subtask, &atomic.Int64{}
	return nil
}

func (s *slowLookup) AsyncInvoke(ctx context.Context, e opEvent, rf sluice.ResultFuture[opOut]) {
	s.inFlight.Add(1)
	asyncInFlight.Add(1)
	d := time.Duration(5+rand.IntN(21)) * time.Millisecond
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			s.inFlight.Add(-1)
			asyncInFlight.Add(-1)
			rf.Complete(opOut{Op: "async", Key: e.Key, Value: fmt.Sprintf("%d,%d", e.ID, lookupValue(e.ID, e.Key))})
		case <-ctx.Done():
			s.inFlight.Add(-1)
			asyncInFlight.Add(-1)
			rf.CompleteExceptionally(ctx.Err())
		}
	}()
}

// SnapshotState reports the calls in flight: their records are in the
// checkpoint, to be called again on restore.
func (s *slowLookup) SnapshotState(id int64) error {
	fmt.Printf("async in flight at checkpoint %d subtask %d: %d\n", id, s.subtask, s.inFlight.Load())
	return nil
}

// lookupValue is the service's answer for an event.
func lookupValue(id int, key string) uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", key, id)
	return h.Sum32()
}

// weigher is the rich map function: Open builds its weight table and
// metrics, Map fails unless it is open, Close reports what it mapped.
type weigher struct {
	subtask int
	weights map[string]int
	mapped  *sluice.Counter
	n       int
	closed  bool
}

func (w *weigher) Open(ctx *sluice.OperatorContext) error {
	w.subtask, w.weights, w.mapped = ctx.Subtask, map[string]int{}, ctx.Metrics.Counter("mapped")
	return nil
}

func (w *weigher) Map(e opEvent) (opOut, error) {
	if w.weights == nil || w.closed {
		return opOut{}, errors.New("rich map: Map called outside Open..Close")
	}
	wt, ok := w.weights[e.Key]
	if !ok {
		// The weight of a key: its bytes' sum mod 7, plus 1.
		for _, b := range []byte(e.Key) {
			wt += int(b)
		}
		wt = wt%7 + 1
		w.weights[e.Key] = wt
	}
	w.mapped.Inc()
	w.n++
	return opOut{Op: "rich", Key: e.Key, Value: strconv.Itoa(e.ID) + "," + strconv.Itoa(e.V*wt)}, nil
}

func (w *weigher) Close() error {
	w.closed = true
	fmt.Printf("rich map closed subtask %d: mapped %d\n", w.subtask, w.n)
	return nil
}
