package main

import (
	"cmp"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/state"
)

// WinningBid is the highest bid of a closed auction: the core that
// queries 4 and 6 share.
type WinningBid struct {
	Auction, Seller, Category int64
	Price                     int64 // the highest qualifying bid
	BidTime                   int64 // that bid's time
	Expires                   int64 // when the auction closed
}

func encWinningBid(b []byte, w WinningBid) []byte {
	for _, v := range [...]int64{w.Auction, w.Seller, w.Category, w.Price, w.BidTime, w.Expires} {
		b = putInt(b, v)
	}
	return b
}

func decWinningBid(r *reader) WinningBid {
	return WinningBid{Auction: r.int(), Seller: r.int(), Category: r.int(), Price: r.int(), BidTime: r.int(), Expires: r.int()}
}

var winningBidCodec = newCodec(encWinningBid, decWinningBid)

// WinningBids is the join of Flink's query 4: each auction with the bids
// on it whose time lies in [auction time, expires]; the highest of them
// wins. It is keyed by auction: the auction, the best bid so far and the
// bids that arrived before their auction are in keyed state, and an
// event-time timer at the auction's expiry emits the winner (when it has
// a bid) with the expiry as its timestamp. A closed auction leaves a
// marker for closedKept, so that the bids that keep coming for it (a hot
// auction stays hot after it closed) are dropped at once. A bid that
// waits for its auction is dropped once the watermark passes its time:
// an auction that comes later is later than the bid, which so cannot
// qualify.
func WinningBids(events *sluice.Stream[Event]) *sluice.Stream[WinningBid] {
	joined := sluice.ConnectKeyed(sluice.KeyBy(Auctions(events, "winning-bids-auctions", nil), func(a Auction) int64 { return a.ID }),
		sluice.KeyBy(Bids(events), func(b Bid) int64 { return b.Auction }))
	return sluice.KeyedCoProcess(joined, sluice.KeyedCoProcessFunction[int64, Auction, Bid, WinningBid](&winningBids{}),
		sluice.Name("winning-bids"), sluice.UID("winning-bids"), sluice.WithCodec(winningBidCodec))
}

// closedKept is how long after its expiry a closed auction's marker is
// kept. Dropping it earlier would still be correct (a bid after the
// expiry never qualifies; it would wait for the watermark instead).
const closedKept = 10_000

// openAuction is what the join keeps of an auction until it closes, and
// then the marker that it closed.
type openAuction struct {
	DateTime, Expires, Seller, Category int64
	Closed                              bool
}

var openAuctionCodec = newCodec(func(b []byte, a openAuction) []byte {
	b = putInt(putInt(putInt(putInt(b, a.DateTime), a.Expires), a.Seller), a.Category)
	if a.Closed {
		return append(b, 1)
	}
	return append(b, 0)
}, func(r *reader) openAuction {
	return openAuction{DateTime: r.int(), Expires: r.int(), Seller: r.int(), Category: r.int(), Closed: r.byte() == 1}
})

// pricedBid is a bid's price and time.
type pricedBid struct{ Price, DateTime int64 }

var pricedBidCodec = newCodec(func(b []byte, p pricedBid) []byte { return putInt(putInt(b, p.Price), p.DateTime) },
	func(r *reader) pricedBid { return pricedBid{Price: r.int(), DateTime: r.int()} })

type winningBids struct {
	auction state.ValueState[openAuction]
	best    state.ValueState[pricedBid]
	waiting state.ListState[pricedBid]
}

func (w *winningBids) Open(ctx *sluice.OperatorContext) error {
	var err error
	if w.auction, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[openAuction]{Name: "auction", Codec: openAuctionCodec}); err != nil {
		return err
	}
	if w.best, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[pricedBid]{Name: "best-bid", Codec: pricedBidCodec}); err != nil {
		return err
	}
	w.waiting, err = state.GetListState(ctx.KeyedState, state.ListStateDescriptor[pricedBid]{Name: "waiting-bids", Codec: pricedBidCodec})
	return err
}

func (w *winningBids) offer(a openAuction, b pricedBid) error {
	if b.DateTime < a.DateTime || b.DateTime > a.Expires {
		return nil
	}
	best, ok, err := w.best.Value()
	if err != nil || ok && b.Price <= best.Price {
		return err
	}
	return w.best.Update(b)
}

// ProcessElement1 takes an auction: kept until it closes, with the bids
// that waited for it offered.
func (w *winningBids) ProcessElement1(ctx *sluice.KeyedContext[int64], auction Auction, _ sluice.Collector[WinningBid]) error {
	a := openAuction{DateTime: auction.DateTime, Expires: auction.Expires, Seller: auction.Seller, Category: auction.Category}
	if err := w.auction.Update(a); err != nil {
		return err
	}
	ctx.Timers().RegisterEventTimeTimer(a.Expires)
	early, err := w.waiting.Get()
	if err != nil || len(early) == 0 {
		return err
	}
	for _, b := range early {
		if err := w.offer(a, b); err != nil {
			return err
		}
	}
	return w.waiting.Clear()
}

// ProcessElement2 takes a bid: offered to its open auction, dropped if the
// auction closed, kept until the watermark passes it if the auction has
// not come.
func (w *winningBids) ProcessElement2(ctx *sluice.KeyedContext[int64], bid Bid, _ sluice.Collector[WinningBid]) error {
	b := pricedBid{Price: bid.Price, DateTime: bid.DateTime}
	a, ok, err := w.auction.Value()
	if err != nil {
		return err
	}
	switch {
	case ok && a.Closed:
		return nil
	case ok:
		return w.offer(a, b)
	case b.DateTime <= ctx.Timers().CurrentWatermark():
		return nil // late: its auction, if any, would be later than it
	}
	ctx.Timers().RegisterEventTimeTimer(b.DateTime)
	return w.waiting.Add(b)
}

func (w *winningBids) OnTimer(ctx *sluice.KeyedContext[int64], ts int64, out sluice.Collector[WinningBid]) error {
	a, ok, err := w.auction.Value()
	if err != nil {
		return err
	}
	switch {
	case ok && a.Closed && ts == a.Expires+closedKept:
		return w.auction.Clear()
	case ok && !a.Closed && ts == a.Expires:
		best, won, err := w.best.Value()
		if err != nil {
			return err
		}
		if won {
			out.Collect(WinningBid{Auction: ctx.Key(), Seller: a.Seller, Category: a.Category, Price: best.Price, BidTime: best.DateTime, Expires: a.Expires})
		}
		if err := w.best.Clear(); err != nil {
			return err
		}
		ctx.Timers().RegisterEventTimeTimer(a.Expires + closedKept)
		return w.auction.Update(openAuction{Expires: a.Expires, Closed: true})
	case ok:
		return nil // a waiting bid's timer, from before the auction came
	}
	// No auction yet: drop the bids the watermark has passed (all of them
	// at once: the key's later timers up to it find none).
	waiting, err := w.waiting.Get()
	if err != nil || len(waiting) == 0 {
		return err
	}
	wm := ctx.Timers().CurrentWatermark()
	return w.waiting.Update(slices.DeleteFunc(waiting, func(b pricedBid) bool { return b.DateTime <= wm }))
}

// Q4Result is the average winning price in a category, updated with each
// closed auction (Flink's query 4 is an updating aggregate; its last
// update per category is the result).
type Q4Result struct {
	Category int64
	Avg      int64 // AVG of a BIGINT in Flink SQL: truncated
	Auctions int64 // closed auctions with a winning bid so far
}

// Q4 is the average price for a category: the average of the winning
// bids' prices of the closed auctions, per category.
func Q4(events *sluice.Stream[Event]) *sluice.Stream[Q4Result] {
	keyed := sluice.KeyBy(WinningBids(events), func(w WinningBid) int64 { return w.Category })
	return sluice.Process(keyed, sluice.KeyedProcessFunction[int64, WinningBid, Q4Result](&q4Average{}),
		sluice.Name("q4-average"), sluice.UID("q4-average"))
}

type sumCount struct{ Sum, Count int64 }

var sumCountCodec = newCodec(func(b []byte, s sumCount) []byte { return putInt(putInt(b, s.Sum), s.Count) },
	func(r *reader) sumCount { return sumCount{Sum: r.int(), Count: r.int()} })

type q4Average struct{ acc state.ValueState[sumCount] }

func (q *q4Average) Open(ctx *sluice.OperatorContext) error {
	var err error
	q.acc, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[sumCount]{Name: "sum-count", Codec: sumCountCodec})
	return err
}

func (q *q4Average) ProcessElement(ctx *sluice.KeyedContext[int64], w WinningBid, out sluice.Collector[Q4Result]) error {
	s, _, err := q.acc.Value()
	if err != nil {
		return err
	}
	s.Sum += w.Price
	s.Count++
	out.Collect(Q4Result{Category: ctx.Key(), Avg: s.Sum / s.Count, Auctions: s.Count})
	return q.acc.Update(s)
}

// Q6Result is a seller's average selling price over their last closed
// auctions, emitted as each of their auctions closes.
type Q6Result struct {
	Seller  int64
	Avg     int64 // truncated, as Flink's AVG of a BIGINT
	Auction int64 // the auction whose closing updated it
}

// q6Last is how many of a seller's latest closed auctions query 6
// averages.
const q6Last = 10

// Q6 is the average selling price by seller: for each closed auction
// with a winning bid, the average winning price of its seller's last 10
// closed auctions. Flink's SQL version does not run (FLINK-19059), so the
// order is Beam's: by closing time, ties by auction id. The winners of a
// seller wait in keyed state for the watermark to pass their closing time
// and are taken in that order.
func Q6(events *sluice.Stream[Event]) *sluice.Stream[Q6Result] {
	keyed := sluice.KeyBy(WinningBids(events), func(w WinningBid) int64 { return w.Seller })
	return sluice.Process(keyed, sluice.KeyedProcessFunction[int64, WinningBid, Q6Result](&q6Average{}),
		sluice.Name("q6-average"), sluice.UID("q6-average"))
}

type q6Average struct {
	pending state.ListState[WinningBid]
	last    state.ValueState[[]int64]
}

func (q *q6Average) Open(ctx *sluice.OperatorContext) error {
	var err error
	if q.pending, err = state.GetListState(ctx.KeyedState, state.ListStateDescriptor[WinningBid]{Name: "pending", Codec: winningBidCodec}); err != nil {
		return err
	}
	q.last, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[[]int64]{Name: "last-prices", Codec: intsCodec})
	return err
}

func (q *q6Average) ProcessElement(ctx *sluice.KeyedContext[int64], w WinningBid, _ sluice.Collector[Q6Result]) error {
	ctx.Timers().RegisterEventTimeTimer(w.Expires)
	return q.pending.Add(w)
}

func (q *q6Average) OnTimer(ctx *sluice.KeyedContext[int64], _ int64, out sluice.Collector[Q6Result]) error {
	// Everything the watermark passed, so that the timers of a watermark
	// that passes many closings at once find the rest done.
	pending, err := q.pending.Get()
	if err != nil || len(pending) == 0 {
		return err
	}
	wm := ctx.Timers().CurrentWatermark()
	var due []WinningBid
	pending = slices.DeleteFunc(pending, func(w WinningBid) bool {
		if w.Expires <= wm {
			due = append(due, w)
			return true
		}
		return false
	})
	if len(due) == 0 {
		return nil
	}
	slices.SortFunc(due, func(a, b WinningBid) int {
		return cmp.Or(cmp.Compare(a.Expires, b.Expires), cmp.Compare(a.Auction, b.Auction))
	})
	last, _, err := q.last.Value()
	if err != nil {
		return err
	}
	last = slices.Clip(last) // appends go to a new array: the state owns this one
	for _, w := range due {
		last = append(last, w.Price)
		if len(last) > q6Last {
			last = last[len(last)-q6Last:]
		}
		var sum int64
		for _, p := range last {
			sum += p
		}
		out.Collect(Q6Result{Seller: ctx.Key(), Avg: sum / int64(len(last)), Auction: w.Auction})
	}
	if err := q.last.Update(last); err != nil {
		return err
	}
	return q.pending.Update(pending)
}
