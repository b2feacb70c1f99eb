package main

import (
	"errors"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/state"
)

// The window sizes of the Flink Nexmark queries.
const (
	q5Size  = 10 * time.Second
	q5Slide = 2 * time.Second
	q7Size  = 10 * time.Second
	q8Size  = 10 * time.Second
	q11Gap  = 10 * time.Second // query_q11.go
)

// count is the aggregate COUNT(*).
type count[T any] struct{}

func (count[T]) CreateAccumulator() int64              { return 0 }
func (count[T]) Add(_ T, acc int64) int64              { return acc + 1 }
func (count[T]) GetResult(acc int64) int64             { return acc }
func (count[T]) Merge(a, b int64) int64                { return a + b }
func (count[T]) AccumulatorCodec() sluice.Codec[int64] { return intCodec }

var intCodec = newCodec(putInt, func(r *reader) int64 { return r.int() })

// auctionCount is the number of bids on an auction in a window.
type auctionCount struct{ Auction, Count, End int64 }

var auctionCountCodec = newCodec(func(b []byte, a auctionCount) []byte { return putInt(putInt(putInt(b, a.Auction), a.Count), a.End) },
	func(r *reader) auctionCount { return auctionCount{Auction: r.int(), Count: r.int(), End: r.int()} })

// Q5Result is a hot item: an auction with the most bids of a window.
type Q5Result struct {
	Auction, Num int64
	Start, End   int64 // the window, Unix ms
}

// Q5 is hot items: per sliding window of 10 s every 2 s, the auctions
// with the most bids (those whose count is the window's maximum). The
// counts per auction and window are made as Flink's window aggregates
// make them for sliding windows: each bid counts once, in its 2 s slice,
// and each window's count is the sum of its five slices (q5Slices); a
// second stage keyed by window keeps the maximum and the auctions at it,
// and emits them when the watermark passes the window.
func Q5(events *sluice.Stream[Event]) *sluice.Stream[Q5Result] {
	byAuction := sluice.KeyBy(Bids(events), func(b Bid) int64 { return b.Auction })
	counts := sluice.Process(byAuction, sluice.KeyedProcessFunction[int64, Bid, auctionCount](&q5Slices{}),
		sluice.Name("q5-count"), sluice.UID("q5-count"), sluice.WithCodec(auctionCountCodec))
	byWindow := sluice.KeyBy(counts, func(a auctionCount) int64 { return a.End })
	return sluice.Process(byWindow, sluice.KeyedProcessFunction[int64, auctionCount, Q5Result](&q5Max{}),
		sluice.Name("q5-max"), sluice.UID("q5-max"))
}

// q5BufferLimit bounds q5's combining buffer: the (auction, slice) counts
// it holds before it merges them into state, Flink's
// table.exec.window-agg.buffer-size-limit (100 000).
const q5BufferLimit = 100_000

// q5Slices counts an auction's bids per slice of q5Slide, as pairs
// [slice start, count] in a ValueState. A timer at the end of each window
// that holds one of the slices emits the window's count (the sum of the
// slices in it) with the window's end - 1 as its timestamp, drops the
// slices no later window holds, and sets the next window's timer while
// slices are left.
//
// As Flink's window aggregation, it combines the bids in memory first:
// buf counts them per auction and slice, and the counts go into state
// (one read and one write per auction, however many bids it had) when
// the watermark reaches the end of a buffered slice, when buf holds limit
// counts, and before a checkpoint (Flush), so a checkpoint holds every
// bid before it and the timers see every bid of their windows.
type q5Slices struct {
	slices state.ValueState[[]int64]
	// buf holds, per auction, the pairs [slice start, count] of the bids
	// not yet in state, due at their slice's end - 1; its limit is
	// q5BufferLimit (a test sets less).
	buf combiner
	// handed holds, per auction, the slices a window's timer hands to the
	// next one that fires in the same advance of the watermark.
	handed map[int64][]int64
}

func (q *q5Slices) Open(ctx *sluice.OperatorContext) error {
	var err error
	q.slices, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[[]int64]{Name: "slice-counts", Codec: intsCodec})
	q.buf.open(q5BufferLimit)
	q.handed = map[int64][]int64{}
	return err
}

func (q *q5Slices) ProcessElement(ctx *sluice.KeyedContext[int64], b Bid, _ sluice.Collector[auctionCount]) error {
	slide := q5Slide.Milliseconds()
	start := windowStart(b.DateTime, slide)
	if start+slide-1 <= ctx.Timers().CurrentWatermark() {
		return nil // late: the first window of its slice has fired
	}
	counts := q.buf.buf[b.Auction]
	for i := 0; i < len(counts); i += 2 {
		if counts[i] == start {
			counts[i+1]++
			return nil
		}
	}
	if q.buf.full() {
		if err := q.Flush(ctx, flushAll); err != nil {
			return err
		}
		counts = nil
	}
	q.buf.put(b.Auction, append(counts, start, 1), 1, start+slide-1)
	return nil
}

// Flush merges the buffered counts into state once the watermark reaches
// the end of one of their slices (Flink's window buffer flushes all of
// it then), and at a checkpoint (upTo is MaxWatermark).
func (q *q5Slices) Flush(ctx *sluice.KeyedContext[int64], upTo int64) error {
	return q.buf.flush(ctx, upTo, func(_ int64, add []int64) error {
		return q.merge(ctx, add)
	})
}

// merge adds the buffered counts of an auction (the current key) to its
// state, registering the timer of each slice new to the state.
func (q *q5Slices) merge(ctx *sluice.KeyedContext[int64], add []int64) error {
	slide := q5Slide.Milliseconds()
	stored, _, err := q.slices.Value()
	if err != nil {
		return err
	}
	// The state owns what Value returns (a heap snapshot may be
	// reading it): change a copy.
	counts := slices.Clone(stored)
next:
	for i := 0; i < len(add); i += 2 {
		for j := 0; j < len(counts); j += 2 {
			if counts[j] == add[i] {
				counts[j+1] += add[i+1]
				continue next
			}
		}
		ctx.Timers().RegisterEventTimeTimer(add[i] + slide - 1)
		counts = append(counts, add[i], add[i+1])
	}
	return q.slices.Update(counts)
}

func (q *q5Slices) OnTimer(ctx *sluice.KeyedContext[int64], ts int64, out sluice.Collector[auctionCount]) error {
	size, slide := q5Size.Milliseconds(), q5Slide.Milliseconds()
	end := ts + 1
	// counts are the slices the previous window's timer handed on when
	// it fired in the same advance of the watermark (so the state holds
	// an older list), else the state's.
	counts, handed := q.handed[ctx.Key()]
	if handed {
		delete(q.handed, ctx.Key())
	} else {
		var err error
		if counts, _, err = q.slices.Value(); err != nil {
			return err
		}
	}
	var n int64
	live := 0 // the slices still in the window ending at end + slide
	for i := 0; i < len(counts); i += 2 {
		start, c := counts[i], counts[i+1]
		if start >= end-size && start < end {
			n += c
		}
		if start > end-size {
			live++
		}
	}
	if n > 0 {
		out.Collect(auctionCount{Auction: ctx.Key(), Count: n, End: end})
	}
	if live == 0 {
		return q.slices.Clear()
	}
	next := end + slide - 1
	ctx.Timers().RegisterEventTimeTimer(next)
	kept := counts
	if 2*live != len(counts) {
		kept = make([]int64, 0, 2*live)
		for i := 0; i < len(counts); i += 2 {
			if counts[i] > end-size {
				kept = append(kept, counts[i], counts[i+1])
			}
		}
	}
	if next <= ctx.Timers().CurrentWatermark() {
		// The next window's timer fires in this advance of the watermark
		// too (no record nor checkpoint comes between): hand it the
		// slices rather than write and read them again.
		q.handed[ctx.Key()] = kept
		return nil
	}
	if !handed && len(kept) == len(counts) {
		return nil // no slice left the windows: the state stays as it is
	}
	return q.slices.Update(kept)
}

// q5Max keeps, per window, the highest count and the auctions that have
// it: [count, auction...] in a ValueState. As q5Slices, it combines the
// counts in memory first (buf, per window), merged into the state when
// the watermark reaches a buffered window's end and before a checkpoint
// (Flush), as Flink's local-global aggregation combines before its
// global stage.
type q5Max struct {
	best state.ValueState[[]int64]
	buf  combiner // [count, auction...] per window, due at its end - 1
}

func (q *q5Max) Open(ctx *sluice.OperatorContext) error {
	var err error
	q.best, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[[]int64]{Name: "max-count", Codec: intsCodec})
	q.buf.open(math.MaxInt)
	return err
}

// addBest merges the auctions of other ([count, auction...]) into best,
// which it may change in place, and returns it.
func addBest(best, other []int64) []int64 {
	switch {
	case len(best) == 0 || other[0] > best[0]:
		return append(best[:0], other...)
	case other[0] == best[0]:
		return append(best, other[1:]...)
	}
	return best
}

func (q *q5Max) ProcessElement(_ *sluice.KeyedContext[int64], a auctionCount, _ sluice.Collector[Q5Result]) error {
	best, ok := q.buf.buf[a.End]
	q.buf.put(a.End, addBest(best, []int64{a.Count, a.Auction}), boolInt(!ok), a.End-1)
	return nil
}

// Flush merges the buffer into state once the watermark reaches a
// buffered window's end, and at a checkpoint (upTo is MaxWatermark).
func (q *q5Max) Flush(ctx *sluice.KeyedContext[int64], upTo int64) error {
	return q.buf.flush(ctx, upTo, func(end int64, add []int64) error {
		best, ok, err := q.best.Value()
		if err != nil {
			return err
		}
		if !ok {
			ctx.Timers().RegisterEventTimeTimer(end - 1)
		}
		// A new array: the state owns best's.
		return q.best.Update(addBest(slices.Clone(best), add))
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (q *q5Max) OnTimer(ctx *sluice.KeyedContext[int64], _ int64, out sluice.Collector[Q5Result]) error {
	best, ok, err := q.best.Value()
	if err != nil || !ok {
		return err
	}
	end := ctx.Key()
	for _, auction := range best[1:] {
		out.Collect(Q5Result{Auction: auction, Num: best[0], Start: end - q5Size.Milliseconds(), End: end})
	}
	return q.best.Clear()
}

// Q7Result is a bid with the highest price of its window.
type Q7Result = Bid

// maxBids is the aggregate "the bids with the highest price". It never
// changes an accumulator in place (the heap backend hands it the stored
// one, which an asynchronous snapshot may be reading): a changed one is a
// new array.
type maxBids struct{}

func (maxBids) CreateAccumulator() []Bid { return nil }
func (maxBids) Add(b Bid, acc []Bid) []Bid {
	switch {
	case len(acc) == 0 || b.Price > acc[0].Price:
		return []Bid{b}
	case b.Price == acc[0].Price:
		return append(slices.Clip(acc), b)
	}
	return acc
}
func (maxBids) GetResult(acc []Bid) []Bid { return acc }
func (m maxBids) Merge(a, b []Bid) []Bid {
	for _, v := range b {
		a = m.Add(v, a)
	}
	return a
}
func (maxBids) AccumulatorCodec() sluice.Codec[[]Bid] { return bidsCodec }

var bidsCodec = newCodec(encBids, decBids)

func encBids(b []byte, bids []Bid) []byte {
	b = putInt(b, int64(len(bids)))
	for _, v := range bids {
		b = encBid(b, v)
	}
	return b
}

func decBids(r *reader) []Bid {
	n := r.int()
	if r.err != nil || n < 0 || n > int64(len(r.b)) {
		r.err = errors.New("bad list length")
		return nil
	}
	bids := make([]Bid, n)
	for i := range bids {
		bids[i] = decBid(r)
	}
	return bids
}

// windowBids are the highest bids of one key in the window ending at End.
type windowBids struct {
	End  int64
	Bids []Bid
}

var windowBidsCodec = newCodec(func(b []byte, w windowBids) []byte { return encBids(putInt(b, w.End), w.Bids) },
	func(r *reader) windowBids {
		end := r.int()
		return windowBids{End: end, Bids: decBids(r)}
	})

// Q7 is the highest bid: per tumbling window of 10 s, the bids with the
// window's highest price. A window aggregate keyed by auction keeps each
// auction's highest bids (a combiner); a second stage keyed by window
// keeps the overall highest and emits them when the watermark passes the
// window. Flink's SQL joins the bids with the window's maximum over
// [end - 10 s, end], both ends inclusive; this takes the window's own
// bids, [start, end).
func Q7(events *sluice.Stream[Event]) *sluice.Stream[Q7Result] {
	byAuction := sluice.KeyBy(Bids(events), func(b Bid) int64 { return b.Auction })
	local := sluice.AggregateProcessWindow(sluice.Window(byAuction, sluice.TumblingEventTimeWindows(q7Size)),
		sluice.AggregateFunction[Bid, []Bid, []Bid](maxBids{}),
		sluice.ProcessWindowFunction[int64, []Bid, windowBids](sluice.ProcessWindowFunc[int64, []Bid, windowBids](
			func(ctx *sluice.WindowContext[int64], bids [][]Bid, out sluice.Collector[windowBids]) error {
				out.Collect(windowBids{End: ctx.Window().End, Bids: bids[0]})
				return nil
			})),
		sluice.Name("q7-local-max"), sluice.UID("q7-local-max"), sluice.WithCodec(windowBidsCodec))
	byWindow := sluice.KeyBy(local, func(w windowBids) int64 { return w.End })
	return sluice.Process(byWindow, sluice.KeyedProcessFunction[int64, windowBids, Q7Result](&q7Max{}),
		sluice.Name("q7-max"), sluice.UID("q7-max"), sluice.WithCodec(BidCodec))
}

type q7Max struct{ best state.ValueState[[]Bid] }

func (q *q7Max) Open(ctx *sluice.OperatorContext) error {
	var err error
	q.best, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[[]Bid]{Name: "max-bids", Codec: bidsCodec})
	return err
}

func (q *q7Max) ProcessElement(ctx *sluice.KeyedContext[int64], w windowBids, _ sluice.Collector[Q7Result]) error {
	best, ok, err := q.best.Value()
	if err != nil {
		return err
	}
	if !ok {
		ctx.Timers().RegisterEventTimeTimer(w.End - 1)
	} else if len(w.Bids) == 0 || len(best) > 0 && w.Bids[0].Price < best[0].Price {
		return nil
	}
	return q.best.Update(maxBids{}.Merge(best, w.Bids))
}

func (q *q7Max) OnTimer(_ *sluice.KeyedContext[int64], _ int64, out sluice.Collector[Q7Result]) error {
	best, _, err := q.best.Value()
	if err != nil {
		return err
	}
	for _, b := range best {
		out.Collect(b)
	}
	return q.best.Clear()
}

// Q8Result is a person who entered the system and opened an auction in
// the same 10 s window.
type Q8Result struct {
	ID    int64
	Name  string
	Start int64 // the window's start, Unix ms
}

// Q8 is monitor new users: the persons who opened an auction in the
// tumbling 10 s window they entered in: a window join on person id =
// seller. It is keyed by person: per window, whether the person and an
// auction of theirs were seen, emitted when the watermark passes the
// window; records later than their window are dropped, as Flink's window
// join drops them.
func Q8(events *sluice.Stream[Event]) *sluice.Stream[Q8Result] {
	joined := sluice.ConnectKeyed(sluice.KeyBy(Persons(events, "q8-persons", nil), func(p Person) int64 { return p.ID }),
		sluice.KeyBy(Auctions(events, "q8-auctions", nil), func(a Auction) int64 { return a.Seller }))
	return sluice.KeyedCoProcess(joined, sluice.KeyedCoProcessFunction[int64, Person, Auction, Q8Result](&q8Join{}),
		sluice.Name("q8-join"), sluice.UID("q8-join"))
}

// q8Seen is what one window of one person has seen: the person's name
// (Person) and whether an auction of theirs came.
type q8Seen struct {
	Person  bool
	Name    string
	Auction bool
}

var q8SeenCodec = newCodec(func(b []byte, s q8Seen) []byte {
	var flags byte
	if s.Person {
		flags |= 1
	}
	if s.Auction {
		flags |= 2
	}
	return putStr(append(b, flags), s.Name)
}, func(r *reader) q8Seen {
	f := r.byte()
	return q8Seen{Person: f&1 != 0, Auction: f&2 != 0, Name: r.str()}
})

type q8Join struct{ seen state.MapState[int64, q8Seen] }

func (q *q8Join) Open(ctx *sluice.OperatorContext) error {
	var err error
	q.seen, err = state.GetMapState(ctx.KeyedState, state.MapStateDescriptor[int64, q8Seen]{Name: "seen", KeyCodec: intCodec, ValueCodec: q8SeenCodec})
	return err
}

func windowStart(ts, size int64) int64 {
	r := ts % size
	if r < 0 {
		r += size
	}
	return ts - r
}

// ProcessElement1 takes a person into its window.
func (q *q8Join) ProcessElement1(ctx *sluice.KeyedContext[int64], p Person, _ sluice.Collector[Q8Result]) error {
	return q.see(ctx, p.DateTime, func(s *q8Seen) bool {
		s.Person, s.Name = true, p.Name
		return true
	})
}

// ProcessElement2 takes an auction into its seller's window.
func (q *q8Join) ProcessElement2(ctx *sluice.KeyedContext[int64], a Auction, _ sluice.Collector[Q8Result]) error {
	return q.see(ctx, a.DateTime, func(s *q8Seen) bool {
		changed := !s.Auction
		s.Auction = true
		return changed
	})
}

// see applies mark to what the window of ts has seen, if that window has
// not fired; mark says whether it changed anything.
func (q *q8Join) see(ctx *sluice.KeyedContext[int64], ts int64, mark func(*q8Seen) bool) error {
	size := q8Size.Milliseconds()
	start := windowStart(ts, size)
	if start+size-1 <= ctx.Timers().CurrentWatermark() {
		return nil // its window has fired
	}
	s, ok, err := q.seen.Get(start)
	if err != nil {
		return err
	}
	if !ok {
		ctx.Timers().RegisterEventTimeTimer(start + size - 1)
	}
	if !mark(&s) && ok {
		return nil
	}
	return q.seen.Put(start, s)
}

func (q *q8Join) OnTimer(ctx *sluice.KeyedContext[int64], ts int64, out sluice.Collector[Q8Result]) error {
	start := ts + 1 - q8Size.Milliseconds()
	s, ok, err := q.seen.Get(start)
	if err != nil || !ok {
		return err
	}
	if s.Person && s.Auction {
		out.Collect(Q8Result{ID: ctx.Key(), Name: s.Name, Start: start})
	}
	return q.seen.Remove(start)
}
