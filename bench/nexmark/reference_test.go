package main

import (
	"cmp"
	"slices"
	"testing"
)

// The plain evaluation of each query: straightforward Go over the whole
// list of generated events, with none of the streaming machinery (no
// keys, no state, no timers, no watermarks), to check the jobs against.

func refBids(events []Event) []Bid {
	var out []Bid
	for _, e := range events {
		if e.Kind == KindBid {
			out = append(out, *e.Bid)
		}
	}
	return out
}

func refQ1(events []Event) []Q1Result {
	var out []Q1Result
	for _, b := range refBids(events) {
		out = append(out, Q1Result{Auction: b.Auction, Bidder: b.Bidder, Price: 0.908 * float64(b.Price), DateTime: b.DateTime, Extra: b.Extra})
	}
	return out
}

func refQ2(events []Event) []Q2Result {
	var out []Q2Result
	for _, b := range refBids(events) {
		if b.Auction%123 == 0 {
			out = append(out, Q2Result{Auction: b.Auction, Price: b.Price})
		}
	}
	return out
}

func refQ3(events []Event) []Q3Result {
	persons := map[int64]*Person{}
	for _, e := range events {
		if e.Kind == KindPerson {
			persons[e.Person.ID] = e.Person
		}
	}
	var out []Q3Result
	for _, e := range events {
		if e.Kind != KindAuction || e.Auction.Category != 10 {
			continue
		}
		p := persons[e.Auction.Seller]
		if p != nil && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
			out = append(out, Q3Result{Name: p.Name, City: p.City, State: p.State, ID: e.Auction.ID})
		}
	}
	return out
}

// refWinning is the SQL of query 4's inner select: per auction, the
// highest price of its bids timed within [auction time, expires].
func refWinning(events []Event) []WinningBid {
	auctions := map[int64]*Auction{}
	for _, e := range events {
		if e.Kind == KindAuction {
			auctions[e.Auction.ID] = e.Auction
		}
	}
	best := map[int64]int64{}
	for _, b := range refBids(events) {
		a := auctions[b.Auction]
		if a == nil || b.DateTime < a.DateTime || b.DateTime > a.Expires {
			continue
		}
		if p, ok := best[a.ID]; !ok || b.Price > p {
			best[a.ID] = b.Price
		}
	}
	var out []WinningBid
	for id, price := range best {
		a := auctions[id]
		out = append(out, WinningBid{Auction: id, Seller: a.Seller, Category: a.Category, Price: price, Expires: a.Expires})
	}
	return out
}

// refQ4 is the final average per category, with the number of auctions.
func refQ4(events []Event) map[int64]Q4Result {
	sums := map[int64]*sumCount{}
	for _, w := range refWinning(events) {
		s := sums[w.Category]
		if s == nil {
			s = &sumCount{}
			sums[w.Category] = s
		}
		s.Sum += w.Price
		s.Count++
	}
	out := map[int64]Q4Result{}
	for c, s := range sums {
		out[c] = Q4Result{Category: c, Avg: s.Sum / s.Count, Auctions: s.Count}
	}
	return out
}

func refQ6(events []Event) []Q6Result {
	bySeller := map[int64][]WinningBid{}
	for _, w := range refWinning(events) {
		bySeller[w.Seller] = append(bySeller[w.Seller], w)
	}
	var out []Q6Result
	for seller, ws := range bySeller {
		slices.SortFunc(ws, func(a, b WinningBid) int {
			return cmp.Or(cmp.Compare(a.Expires, b.Expires), cmp.Compare(a.Auction, b.Auction))
		})
		for i, w := range ws {
			var sum, n int64
			for _, v := range ws[max(0, i-9) : i+1] {
				sum += v.Price
				n++
			}
			out = append(out, Q6Result{Seller: seller, Avg: sum / n, Auction: w.Auction})
		}
	}
	return out
}

func floorTo(ts, size int64) int64 {
	r := ts % size
	if r < 0 {
		r += size
	}
	return ts - r
}

func refQ5(events []Event) []Q5Result {
	const size, slide = 10_000, 2_000
	type wa struct{ start, auction int64 }
	counts := map[wa]int64{}
	for _, b := range refBids(events) {
		for start := floorTo(b.DateTime, slide); start > b.DateTime-size; start -= slide {
			counts[wa{start, b.Auction}]++
		}
	}
	maxOf := map[int64]int64{}
	for k, n := range counts {
		maxOf[k.start] = max(maxOf[k.start], n)
	}
	var out []Q5Result
	for k, n := range counts {
		if n == maxOf[k.start] {
			out = append(out, Q5Result{Auction: k.auction, Num: n, Start: k.start, End: k.start + size})
		}
	}
	return out
}

func refQ7(events []Event) []Bid {
	const size = 10_000
	bids := refBids(events)
	maxOf := map[int64]int64{}
	for _, b := range bids {
		w := floorTo(b.DateTime, size)
		maxOf[w] = max(maxOf[w], b.Price)
	}
	var out []Bid
	for _, b := range bids {
		if b.Price == maxOf[floorTo(b.DateTime, size)] {
			out = append(out, b)
		}
	}
	return out
}

func refQ8(events []Event) []Q8Result {
	const size = 10_000
	type sw struct{ seller, start int64 }
	sold := map[sw]bool{}
	for _, e := range events {
		if e.Kind == KindAuction {
			sold[sw{e.Auction.Seller, floorTo(e.Auction.DateTime, size)}] = true
		}
	}
	var out []Q8Result
	for _, e := range events {
		if e.Kind == KindPerson {
			start := floorTo(e.Person.DateTime, size)
			if sold[sw{e.Person.ID, start}] {
				out = append(out, Q8Result{ID: e.Person.ID, Name: e.Person.Name, Start: start})
			}
		}
	}
	return out
}

func refQ11(events []Event) []Q11Result {
	const gap = 10_000
	times := map[int64][]int64{}
	for _, b := range refBids(events) {
		times[b.Bidder] = append(times[b.Bidder], b.DateTime)
	}
	var out []Q11Result
	for bidder, ts := range times {
		slices.Sort(ts)
		start, last, n := ts[0], ts[0], int64(1)
		for _, t := range ts[1:] {
			if t > last+gap { // a session ends after a gap of more than 10 s
				out = append(out, Q11Result{Bidder: bidder, BidCount: n, Start: start, End: last + gap})
				start, n = t, 0
			}
			last = t
			n++
		}
		out = append(out, Q11Result{Bidder: bidder, BidCount: n, Start: start, End: last + gap})
	}
	return out
}

// refQ4SQL is query 4's final rows: the average of refWinning's prices
// per category (Flink's changelog, applied, ends with these).
func refQ4SQL(events []Event) []Q4SQLResult {
	var out []Q4SQLResult
	for _, r := range refQ4(events) {
		out = append(out, Q4SQLResult{Kind: Insert, Category: r.Category, Avg: r.Avg})
	}
	return out
}

// refQ7SQL is query 7 by its SQL: the highest price per tumbling window
// [start, end), then every bid at that price timed within [end - 10 s,
// end], both ends inclusive, projected.
func refQ7SQL(events []Event) []Bid {
	const size = 10_000
	bids := refBids(events)
	maxOf := map[int64]int64{} // by window end
	for _, b := range bids {
		end := floorTo(b.DateTime, size) + size
		if m, ok := maxOf[end]; !ok || b.Price > m {
			maxOf[end] = b.Price
		}
	}
	var out []Bid
	for end, m := range maxOf {
		for _, b := range bids {
			if b.Price == m && b.DateTime >= end-size && b.DateTime <= end {
				out = append(out, Bid{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra})
			}
		}
	}
	return out
}

// applyChangelog applies a changelog to its rows, kept as a multiset so
// that the order in which parallel sinks collected it does not matter:
// an insert or update-after adds the row, an update-before removes it. It
// fails on a row retracted more often than it was added, and returns
// the rows left, each once per count, as inserts.
func applyChangelog(t *testing.T, rows []Q4SQLResult) []Q4SQLResult {
	t.Helper()
	count := map[Q4SQLResult]int{}
	for _, r := range rows {
		k := r
		k.Kind = Insert
		switch r.Kind {
		case Insert, UpdateAfter:
			count[k]++
		case UpdateBefore:
			count[k]--
		default:
			t.Fatalf("row %+v: unknown kind", r)
		}
	}
	var out []Q4SQLResult
	for r, n := range count {
		if n < 0 {
			t.Fatalf("row %+v retracted %d more times than it was added", r, -n)
		}
		for range n {
			out = append(out, r)
		}
	}
	return out
}
