package main

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/state"
)

// The variants of queries 4 and 7 that keep what Flink's Nexmark SQL
// keeps, so that their figures compare with Flink's like for like. Q4
// and Q7 are the streaming forms (an auction closes at its expiry; a
// window's highest bids are kept in its aggregate), which need far less
// state than the SQL's regular joins.

// RowKind is the kind of a changelog row, as Flink's RowKind.
type RowKind uint8

// The kinds of changelog row a query emits.
const (
	Insert       RowKind = iota // +I
	UpdateBefore                // -U: the row as it was, retracted
	UpdateAfter                 // +U: the row as it is now
)

// Q4SQLResult is a row of query 4's changelog: the average winning price
// of a category, inserted, retracted or updated.
type Q4SQLResult struct {
	Kind     RowKind
	Category int64
	Avg      int64 // AVG of a BIGINT in Flink SQL: truncated
}

// maxChange is a change of an auction's highest qualifying bid: the
// MAX(B.price) ... GROUP BY A.id, A.category of query 4's inner select, as
// a retraction of Old (when HadOld) and the insertion of New.
type maxChange struct {
	Category, Old, New int64
	HadOld             bool
}

var maxChangeCodec = newCodec(func(b []byte, c maxChange) []byte {
	b = putInt(putInt(putInt(b, c.Category), c.Old), c.New)
	if c.HadOld {
		return append(b, 1)
	}
	return append(b, 0)
}, func(r *reader) maxChange {
	return maxChange{Category: r.int(), Old: r.int(), New: r.int(), HadOld: r.byte() == 1}
})

// Q4SQL is query 4 as Flink's SQL runs it: the regular join of every
// auction with every bid on it (both sides kept in keyed state for good,
// as a join without a time bound keeps them), the maximum price of the
// bids timed within [auction time, expires] per auction, updated as bids
// come, and the average of those maxima per category as a changelog: an
// insert for a category's first auction, then a retraction of the old
// average and the new one for each change of a maximum. Flink's plan
// shuffles the join's output by (id, category) to its MAX; here the join
// and the MAX share the auction's key, and one change of a maximum is one
// record to the average (Flink sends its -U and +U apart and so emits
// two updates of the average for it), which changes neither the
// changelog's final rows nor what is kept.
func Q4SQL(events *sluice.Stream[Event]) *sluice.Stream[Q4SQLResult] {
	joined := sluice.ConnectKeyed(sluice.KeyBy(Auctions(events, "q4sql-auctions", nil), func(a Auction) int64 { return a.ID }),
		sluice.KeyBy(Bids(events), func(b Bid) int64 { return b.Auction }))
	maxima := sluice.KeyedCoProcess(joined, sluice.KeyedCoProcessFunction[int64, Auction, Bid, maxChange](&q4sqlJoin{}),
		sluice.Name("q4sql-join-max"), sluice.UID("q4sql-join-max"), sluice.WithCodec(maxChangeCodec))
	byCategory := sluice.KeyBy(maxima, func(c maxChange) int64 { return c.Category })
	return sluice.Process(byCategory, sluice.KeyedProcessFunction[int64, maxChange, Q4SQLResult](&q4sqlAverage{}),
		sluice.Name("q4sql-average"), sluice.UID("q4sql-average"))
}

type q4sqlJoin struct {
	auction state.ValueState[openAuction] // the join's left side
	bids    state.ListState[pricedBid]    // its right side: every bid on the auction
	max     state.ValueState[int64]       // MAX(price) of the qualifying bids
}

func (q *q4sqlJoin) Open(ctx *sluice.OperatorContext) error {
	var err error
	if q.auction, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[openAuction]{Name: "auction", Codec: openAuctionCodec}); err != nil {
		return err
	}
	if q.bids, err = state.GetListState(ctx.KeyedState, state.ListStateDescriptor[pricedBid]{Name: "bids", Codec: pricedBidCodec}); err != nil {
		return err
	}
	q.max, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "max-price", Codec: intCodec})
	return err
}

func qualifies(a openAuction, b pricedBid) bool {
	return b.DateTime >= a.DateTime && b.DateTime <= a.Expires
}

// ProcessElement1 takes an auction: kept, and joined with the bids on it
// that came before it.
func (q *q4sqlJoin) ProcessElement1(_ *sluice.KeyedContext[int64], auction Auction, out sluice.Collector[maxChange]) error {
	a := openAuction{DateTime: auction.DateTime, Expires: auction.Expires, Category: auction.Category}
	if err := q.auction.Update(a); err != nil {
		return err
	}
	bids, err := q.bids.Get()
	if err != nil {
		return err
	}
	for _, b := range bids {
		if qualifies(a, b) {
			if err := q.offer(a, b.Price, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// ProcessElement2 takes a bid: kept, and joined with its auction if that
// came.
func (q *q4sqlJoin) ProcessElement2(_ *sluice.KeyedContext[int64], bid Bid, out sluice.Collector[maxChange]) error {
	b := pricedBid{Price: bid.Price, DateTime: bid.DateTime}
	if err := q.bids.Add(b); err != nil {
		return err
	}
	a, ok, err := q.auction.Value()
	if err != nil || !ok || !qualifies(a, b) {
		return err
	}
	return q.offer(a, b.Price, out)
}

// offer updates the auction's maximum with a joined price and emits the
// change, if it is one.
func (q *q4sqlJoin) offer(a openAuction, price int64, out sluice.Collector[maxChange]) error {
	old, had, err := q.max.Value()
	if err != nil || had && price <= old {
		return err
	}
	out.Collect(maxChange{Category: a.Category, Old: old, New: price, HadOld: had})
	return q.max.Update(price)
}

func (q *q4sqlJoin) OnTimer(*sluice.KeyedContext[int64], int64, sluice.Collector[maxChange]) error {
	return nil
}

type q4sqlAverage struct{ acc state.ValueState[sumCount] }

func (q *q4sqlAverage) Open(ctx *sluice.OperatorContext) error {
	var err error
	q.acc, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[sumCount]{Name: "sum-count", Codec: sumCountCodec})
	return err
}

// ProcessElement retracts the old maximum from the category's sum and
// adds the new one, and emits the change of the average, as Flink's
// GroupAggFunction does: nothing when it did not change.
func (q *q4sqlAverage) ProcessElement(ctx *sluice.KeyedContext[int64], c maxChange, out sluice.Collector[Q4SQLResult]) error {
	s, _, err := q.acc.Value()
	if err != nil {
		return err
	}
	before := s
	if c.HadOld {
		s.Sum -= c.Old
	} else {
		s.Count++
	}
	s.Sum += c.New
	switch {
	case before.Count == 0:
		out.Collect(Q4SQLResult{Kind: Insert, Category: ctx.Key(), Avg: s.Sum / s.Count})
	case before.Sum/before.Count != s.Sum/s.Count:
		out.Collect(Q4SQLResult{Kind: UpdateBefore, Category: ctx.Key(), Avg: before.Sum / before.Count})
		out.Collect(Q4SQLResult{Kind: UpdateAfter, Category: ctx.Key(), Avg: s.Sum / s.Count})
	}
	return q.acc.Update(s)
}

// windowMax is the highest price of the tumbling window ending at End
// (exclusive), Unix ms.
type windowMax struct{ End, Price int64 }

var windowMaxCodec = newCodec(func(b []byte, w windowMax) []byte { return putInt(putInt(b, w.End), w.Price) },
	func(r *reader) windowMax { return windowMax{End: r.int(), Price: r.int()} })

// maxPrice is the aggregate MAX(price).
type maxPrice struct{}

func (maxPrice) CreateAccumulator() int64              { return -1 }
func (maxPrice) Add(b Bid, acc int64) int64            { return max(acc, b.Price) }
func (maxPrice) GetResult(acc int64) int64             { return acc }
func (maxPrice) Merge(a, b int64) int64                { return max(a, b) }
func (maxPrice) AccumulatorCodec() sluice.Codec[int64] { return intCodec }

// Q7SQL is query 7 as Flink's SQL runs it: MAX(price) per tumbling window
// of 10 s (pre-aggregated per auction, as Flink's local window aggregate
// pre-aggregates before its global one), then the regular join of every
// bid with those maxima on price = max price and B.dateTime BETWEEN
// window end - 10 s AND window end (both inclusive: a bid at a window's
// end joins that window's maximum too). The join is keyed by price and
// keeps every bid and every window's maximum for good, as Flink's join
// without a time bound does; its output is Flink's projection of the
// bid (auction, price, bidder, dateTime, extra: no channel nor url).
func Q7SQL(events *sluice.Stream[Event]) *sluice.Stream[Bid] {
	bids := Bids(events)
	byAuction := sluice.KeyBy(bids, func(b Bid) int64 { return b.Auction })
	local := sluice.AggregateProcessWindow(sluice.Window(byAuction, sluice.TumblingEventTimeWindows(q7Size)),
		sluice.AggregateFunction[Bid, int64, int64](maxPrice{}),
		sluice.ProcessWindowFunction[int64, int64, windowMax](sluice.ProcessWindowFunc[int64, int64, windowMax](
			func(ctx *sluice.WindowContext[int64], prices []int64, out sluice.Collector[windowMax]) error {
				out.Collect(windowMax{End: ctx.Window().End, Price: prices[0]})
				return nil
			})),
		sluice.Name("q7sql-local-max"), sluice.UID("q7sql-local-max"), sluice.WithCodec(windowMaxCodec))
	global := sluice.Process(sluice.KeyBy(local, func(w windowMax) int64 { return w.End }),
		sluice.KeyedProcessFunction[int64, windowMax, windowMax](&q7sqlMax{}),
		sluice.Name("q7sql-max"), sluice.UID("q7sql-max"), sluice.WithCodec(windowMaxCodec))
	joined := sluice.ConnectKeyed(sluice.KeyBy(bids, func(b Bid) int64 { return b.Price }),
		sluice.KeyBy(global, func(w windowMax) int64 { return w.Price }))
	return sluice.KeyedCoProcess(joined, sluice.KeyedCoProcessFunction[int64, Bid, windowMax, Bid](&q7sqlJoin{}),
		sluice.Name("q7sql-join"), sluice.UID("q7sql-join"), sluice.WithCodec(BidCodec))
}

// q7sqlMax is the global window aggregate: the window's maximum, emitted
// when the watermark passes the window.
type q7sqlMax struct{ max state.ValueState[int64] }

func (q *q7sqlMax) Open(ctx *sluice.OperatorContext) error {
	var err error
	q.max, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "max-price", Codec: intCodec})
	return err
}

func (q *q7sqlMax) ProcessElement(ctx *sluice.KeyedContext[int64], w windowMax, _ sluice.Collector[windowMax]) error {
	m, ok, err := q.max.Value()
	if err != nil {
		return err
	}
	if !ok {
		ctx.Timers().RegisterEventTimeTimer(w.End - 1)
	} else if w.Price <= m {
		return nil
	}
	return q.max.Update(w.Price)
}

func (q *q7sqlMax) OnTimer(ctx *sluice.KeyedContext[int64], _ int64, out sluice.Collector[windowMax]) error {
	m, ok, err := q.max.Value()
	if err != nil || !ok {
		return err
	}
	out.Collect(windowMax{End: ctx.Key(), Price: m})
	return q.max.Clear()
}

// q7sqlJoin is the join keyed by price.
type q7sqlJoin struct {
	bids   state.ListState[Bid]   // every bid at this price, projected
	maxima state.ListState[int64] // the ends of the windows whose maximum is this price
}

func (q *q7sqlJoin) Open(ctx *sluice.OperatorContext) error {
	var err error
	if q.bids, err = state.GetListState(ctx.KeyedState, state.ListStateDescriptor[Bid]{Name: "bids", Codec: BidCodec}); err != nil {
		return err
	}
	q.maxima, err = state.GetListState(ctx.KeyedState, state.ListStateDescriptor[int64]{Name: "window-ends", Codec: intCodec})
	return err
}

// inWindow is the join's condition B.dateTime BETWEEN end - 10 s AND end.
func inWindow(b Bid, end int64) bool {
	return b.DateTime >= end-q7Size.Milliseconds() && b.DateTime <= end
}

// q7Projection is the bid as query 7 selects it.
func q7Projection(b Bid) Bid {
	return Bid{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra}
}

func (q *q7sqlJoin) ProcessElement1(_ *sluice.KeyedContext[int64], bid Bid, out sluice.Collector[Bid]) error {
	b := q7Projection(bid)
	if err := q.bids.Add(b); err != nil {
		return err
	}
	ends, err := q.maxima.Get()
	if err != nil {
		return err
	}
	for _, end := range ends {
		if inWindow(b, end) {
			out.Collect(b)
		}
	}
	return nil
}

func (q *q7sqlJoin) ProcessElement2(_ *sluice.KeyedContext[int64], w windowMax, out sluice.Collector[Bid]) error {
	if err := q.maxima.Add(w.End); err != nil {
		return err
	}
	bids, err := q.bids.Get()
	if err != nil {
		return err
	}
	for _, b := range bids {
		if inWindow(b, w.End) {
			out.Collect(b)
		}
	}
	return nil
}

func (q *q7sqlJoin) OnTimer(*sluice.KeyedContext[int64], int64, sluice.Collector[Bid]) error {
	return nil
}
