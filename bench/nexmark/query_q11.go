package main

import (
	"math"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/state"
)

// Q11Result is the number of bids of a bidder in one session.
type Q11Result struct {
	Bidder, BidCount int64
	Start, End       int64 // the session window: first bid, last bid + gap
}

// q11BufferLimit bounds q11Sessions' combining buffer: the sessions it
// holds before it merges them into state (as q5BufferLimit; the window
// operator's is sluice.WithWindowBufferLimit, the same by default).
const q11BufferLimit = 100_000

// Q11 is user sessions: the bids per bidder per session window with a
// gap of 10 s, written as a user writes it in Flink:
// keyBy(bidder).window(EventTimeSessionWindows(10 s)).aggregate(count,
// process). Each bid's window is [time, time + gap), windows that
// intersect (touching ones too) merge, and a session is emitted, with
// its end - 1 as timestamp, when the watermark reaches its end - 1. A bid
// whose own window the watermark has passed counts only if it falls into
// a session still open, and is dropped otherwise. The window operator
// combines each bidder's bids into sessions in memory before they reach
// keyed state (see sluice.WithWindowBufferLimit).
func Q11(events *sluice.Stream[Event]) *sluice.Stream[Q11Result] { return q11Bids(Bids(events)) }

// q11Bids is Q11 on the bids.
func q11Bids(bids *sluice.Stream[Bid]) *sluice.Stream[Q11Result] {
	byBidder := sluice.KeyBy(bids, func(b Bid) int64 { return b.Bidder })
	return sluice.AggregateProcessWindow(sluice.Window(byBidder, sluice.EventTimeSessionWindows(q11Gap)),
		sluice.AggregateFunction[Bid, int64, int64](count[Bid]{}),
		sluice.ProcessWindowFunction[int64, int64, Q11Result](sluice.ProcessWindowFunc[int64, int64, Q11Result](
			func(ctx *sluice.WindowContext[int64], n []int64, out sluice.Collector[Q11Result]) error {
				w := ctx.Window()
				out.Collect(Q11Result{Bidder: ctx.Key(), BidCount: n[0], Start: w.Start, End: w.End})
				return nil
			})), sluice.Name("q11-sessions"), sluice.UID("q11-sessions"))
}

// Q11Hand is q11 on a hand-written keyed function, q11Sessions, that
// keeps the sessions as q5Slices keeps q5's slices and combines the bids
// in memory first (the bench's query q11hand): what Q11 emits, for a
// comparison of the window operator with it.
func Q11Hand(events *sluice.Stream[Event]) *sluice.Stream[Q11Result] {
	byBidder := sluice.KeyBy(Bids(events), func(b Bid) int64 { return b.Bidder })
	return sluice.Process(byBidder, sluice.KeyedProcessFunction[int64, Bid, Q11Result](&q11Sessions{}),
		sluice.Name("q11-hand"), sluice.UID("q11-hand"))
}

// q11Sessions keeps each bidder's open sessions as triples [start, end,
// count] in a ValueState, sorted by start, no two intersecting, with an
// event-time timer at each session's end - 1 that emits and drops it.
//
// The bids are combined per bidder in memory first (buf: the same
// triples, merged as they come), and merged into the state - one read
// and one write per bidder however many bids it had - when the watermark
// reaches the end of a buffered session, when buf holds limit sessions,
// before a checkpoint (Flush), and for the bidder whose timer fires,
// before it reads the state (a buffered bid may extend the session that
// was about to end). Merging sessions is associative and commutative
// while none is emitted, so the sessions come out as the bid-by-bid
// merges of a session window operator would make them.
type q11Sessions struct {
	sessions state.ValueState[[]int64]
	// buf holds, per bidder, the sessions of the bids not yet in state,
	// due at their end - 1; its limit is q11BufferLimit (a test sets
	// less).
	buf combiner
	// old is a scratch list of session ends, for the timers.
	old []int64
}

func (q *q11Sessions) Open(ctx *sluice.OperatorContext) error {
	var err error
	q.sessions, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[[]int64]{Name: "sessions", Codec: intsCodec})
	q.buf.open(q11BufferLimit)
	return err
}

// addSession merges the session [start, end) of count bids into list (a
// list of triples as q11Sessions keeps them, which it may change in
// place) and returns the list and the merged session's end.
func addSession(list []int64, start, end, count int64) ([]int64, int64) {
	for merged := true; merged; {
		merged = false
		for i := 0; i < len(list); i += 3 {
			if list[i] <= end && list[i+1] >= start { // TimeWindow.Intersects
				start, end, count = min(start, list[i]), max(end, list[i+1]), count+list[i+2]
				list = slices.Delete(list, i, i+3)
				merged = true
				break
			}
		}
	}
	i := 0
	for i < len(list) && list[i] < start {
		i += 3
	}
	return slices.Insert(list, i, start, end, count), end
}

func (q *q11Sessions) ProcessElement(ctx *sluice.KeyedContext[int64], b Bid, _ sluice.Collector[Q11Result]) error {
	gap := q11Gap.Milliseconds()
	start, end := b.DateTime, b.DateTime+gap
	if end-1 <= ctx.Timers().CurrentWatermark() {
		return q.addLate(ctx, b.Bidder, start, end)
	}
	if q.buf.full() {
		if err := q.Flush(ctx, flushAll); err != nil {
			return err
		}
	}
	list := q.buf.buf[b.Bidder]
	before := len(list)
	list, merged := addSession(list, start, end, 1)
	q.buf.put(b.Bidder, list, (len(list)-before)/3, merged-1)
	return nil
}

// addLate takes a bid whose own window the watermark has passed: it
// counts if it falls into an open session (which ends after the
// watermark, so the merge does too), and is dropped otherwise. It looks
// at the state with the bidder's buffer merged in.
func (q *q11Sessions) addLate(ctx *sluice.KeyedContext[int64], bidder, start, end int64) error {
	list, err := q.merge(ctx, bidder)
	if err != nil {
		return err
	}
	for i := 0; i < len(list); i += 3 {
		if list[i] <= end && list[i+1] >= start {
			return q.store(ctx, list, start, end, 1)
		}
	}
	return nil
}

// merge merges the buffered sessions of bidder (the current key) into
// its state and returns the state's sessions.
func (q *q11Sessions) merge(ctx *sluice.KeyedContext[int64], bidder int64) ([]int64, error) {
	stored, _, err := q.sessions.Value()
	if err != nil {
		return nil, err
	}
	add, ok := q.buf.take(bidder, 3)
	if !ok {
		return stored, nil
	}
	// The state owns what Value returns (a heap snapshot may be reading
	// it): change a copy.
	list := slices.Clone(stored)
	for i := 0; i < len(add); i += 3 {
		list, _ = addSession(list, add[i], add[i+1], add[i+2])
	}
	if err := q.timers(ctx, stored, list); err != nil {
		return nil, err
	}
	return list, q.sessions.Update(list)
}

// store adds a session to the current key's stored sessions.
func (q *q11Sessions) store(ctx *sluice.KeyedContext[int64], stored []int64, start, end, count int64) error {
	list, _ := addSession(slices.Clone(stored), start, end, count)
	if err := q.timers(ctx, stored, list); err != nil {
		return err
	}
	return q.sessions.Update(list)
}

// timers moves the current key's timers from the session ends of before
// to those of after.
func (q *q11Sessions) timers(ctx *sluice.KeyedContext[int64], before, after []int64) error {
	q.old = q.old[:0]
	for i := 0; i < len(before); i += 3 {
		q.old = append(q.old, before[i+1])
	}
	for i := 0; i < len(after); i += 3 {
		if j := slices.Index(q.old, after[i+1]); j >= 0 {
			q.old[j] = math.MinInt64 // kept
			continue
		}
		ctx.Timers().RegisterEventTimeTimer(after[i+1] - 1)
	}
	for _, e := range q.old {
		if e != math.MinInt64 {
			ctx.Timers().DeleteEventTimeTimer(e - 1)
		}
	}
	return nil
}

// Flush merges the buffer into state once the watermark reaches the end
// of a buffered session, and at a checkpoint (upTo is MaxWatermark).
func (q *q11Sessions) Flush(ctx *sluice.KeyedContext[int64], upTo int64) error {
	return q.buf.flush(ctx, upTo, func(bidder int64, _ []int64) error {
		_, err := q.merge(ctx, bidder)
		return err
	})
}

// OnTimer emits the session that ends at ts + 1, if the bidder's
// buffered bids did not extend it.
func (q *q11Sessions) OnTimer(ctx *sluice.KeyedContext[int64], ts int64, out sluice.Collector[Q11Result]) error {
	list, err := q.merge(ctx, ctx.Key())
	if err != nil {
		return err
	}
	for i := 0; i < len(list); i += 3 {
		if list[i+1] != ts+1 {
			continue
		}
		out.Collect(Q11Result{Bidder: ctx.Key(), BidCount: list[i+2], Start: list[i], End: list[i+1]})
		if len(list) == 3 {
			return q.sessions.Clear()
		}
		return q.sessions.Update(slices.Delete(slices.Clone(list), i, i+3))
	}
	return nil
}
