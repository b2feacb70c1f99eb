package main

import "github.com/sluicehq/sluice"

// Bids is the bid view of the Flink Nexmark DDL: the events of kind bid.
func Bids(events *sluice.Stream[Event]) *sluice.Stream[Bid] {
	return sluice.FlatMap(events, func(e Event, out sluice.Collector[Bid]) error {
		if e.Kind == KindBid {
			out.Collect(*e.Bid)
		}
		return nil
	}, sluice.Name("bids"), sluice.WithCodec(BidCodec))
}

// Persons is the person view: the events of kind person, with keep
// (nil: all) as a pushed-down filter.
func Persons(events *sluice.Stream[Event], name string, keep func(*Person) bool) *sluice.Stream[Person] {
	return sluice.FlatMap(events, func(e Event, out sluice.Collector[Person]) error {
		if e.Kind == KindPerson && (keep == nil || keep(e.Person)) {
			out.Collect(*e.Person)
		}
		return nil
	}, sluice.Name(name), sluice.WithCodec(PersonCodec))
}

// Auctions is the auction view: the events of kind auction, with keep
// (nil: all) as a pushed-down filter.
func Auctions(events *sluice.Stream[Event], name string, keep func(*Auction) bool) *sluice.Stream[Auction] {
	return sluice.FlatMap(events, func(e Event, out sluice.Collector[Auction]) error {
		if e.Kind == KindAuction && (keep == nil || keep(e.Auction)) {
			out.Collect(*e.Auction)
		}
		return nil
	}, sluice.Name(name), sluice.WithCodec(AuctionCodec))
}

// Q0 is the pass-through: every bid as it is (SELECT auction, bidder,
// price, dateTime, extra FROM bid), which measures the source and the
// framework.
func Q0(events *sluice.Stream[Event]) *sluice.Stream[Bid] { return Bids(events) }

// Q1Result is a bid with its price in euros.
type Q1Result struct {
	Auction, Bidder int64
	Price           float64 // 0.908 * the dollar price
	DateTime        int64
	Extra           string
}

// dollarToEuro is the exchange rate of query 1.
const dollarToEuro = 0.908

// Q1 is currency conversion: every bid with its price in euros.
func Q1(events *sluice.Stream[Event]) *sluice.Stream[Q1Result] {
	return sluice.FlatMap(events, func(e Event, out sluice.Collector[Q1Result]) error {
		if b := e.Bid; e.Kind == KindBid {
			out.Collect(Q1Result{Auction: b.Auction, Bidder: b.Bidder, Price: dollarToEuro * float64(b.Price), DateTime: b.DateTime, Extra: b.Extra})
		}
		return nil
	}, sluice.Name("q1-convert"))
}

// Q2Result is an auction and a bid's price.
type Q2Result struct{ Auction, Price int64 }

// q2Skip selects every 123rd auction, as the Flink version of query 2.
const q2Skip = 123

// Q2 is selection: the bids on every 123rd auction (auction % 123 == 0).
func Q2(events *sluice.Stream[Event]) *sluice.Stream[Q2Result] {
	return sluice.FlatMap(events, func(e Event, out sluice.Collector[Q2Result]) error {
		if b := e.Bid; e.Kind == KindBid && b.Auction%q2Skip == 0 {
			out.Collect(Q2Result{Auction: b.Auction, Price: b.Price})
		}
		return nil
	}, sluice.Name("q2-select"))
}
