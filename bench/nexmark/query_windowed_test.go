package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// refQ5Counts is the plain evaluation of q5's first stage: the bids of
// each auction in each window, emitted at the window's end - 1.
func refQ5Counts(bids []Bid) []sluicetest.Record[auctionCount] {
	const size, slide = 10_000, 2_000
	type wa struct{ end, auction int64 }
	counts := map[wa]int64{}
	for _, b := range bids {
		for start := floorTo(b.DateTime, slide); start > b.DateTime-size; start -= slide {
			counts[wa{start + size, b.Auction}]++
		}
	}
	var out []sluicetest.Record[auctionCount]
	for k, n := range counts {
		out = append(out, sluicetest.Record[auctionCount]{Value: auctionCount{Auction: k.auction, Count: n, End: k.end}, Timestamp: k.end - 1})
	}
	return out
}

// combinerBackends are the backends the combining stages are tested on:
// the heap, and RocksDB without its Go write buffer.
var combinerBackends = map[string]func(t *testing.T) state.BackendFactory{
	"heap": func(*testing.T) state.BackendFactory { return nil },
	"rocksdb": func(t *testing.T) state.BackendFactory {
		return rocksdb.Factory(t.TempDir(), rocksdb.Options{NativeMemtable: true})
	},
}

// harnessOptions are a harness's options for an operator of uid on the
// backend, and more.
func harnessOptions(t *testing.T, backend func(*testing.T) state.BackendFactory, uid string, more ...sluicetest.Option) []sluicetest.Option {
	o := []sluicetest.Option{sluicetest.WithOperatorOptions(sluice.UID(uid))}
	if f := backend(t); f != nil {
		o = append(o, sluicetest.WithStateBackend(f))
	}
	return append(o, more...)
}

// TestQ5SnapshotHoldsTheBuffer: q5's counting stage combines bids in
// memory (q5Slices.buf) and merges them into state at watermarks, when
// the buffer is full, and before a snapshot. A snapshot taken with counts
// in the buffer and restored into new subtasks (of another parallelism)
// must give the counts of an uninterrupted run: a snapshot that missed
// the buffer would lose the bids since the last watermark. With a limit
// of 3 pairs the buffer also flushes when full, in the middle of records.
func TestQ5SnapshotHoldsTheBuffer(t *testing.T) {
	cfg := testConfig()
	cfg.Events = 4000 // 4 s of event time: windows of three slices
	cfg.OutOfOrderGroupSize = 1
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bids := refBids(allEvents(t, g))
	want := refQ5Counts(bids)
	for name, backend := range combinerBackends {
		for _, limit := range []int{q5BufferLimit, 3} {
			t.Run(fmt.Sprintf("%s limit %d", name, limit), func(t *testing.T) {
				opts := func(more ...sluicetest.Option) []sluicetest.Option {
					return harnessOptions(t, backend, "q5-count", more...)
				}
				keyOf := func(b Bid) int64 { return b.Auction }
				feed := func(h *sluicetest.Harness[Bid, auctionCount], bids []Bid) {
					for i, b := range bids {
						h.ProcessElement(b, b.DateTime)
						if i%100 == 99 {
							h.ProcessWatermark(b.DateTime - 1000)
						}
					}
				}
				half := len(bids) / 2
				// The watermark after the first half has flushed the
				// slices before it; the records after it stay in the
				// buffer until the snapshot.
				first := sluicetest.KeyedProcess[int64](t, keyOf, sluice.KeyedProcessFunction[int64, Bid, auctionCount](&q5Slices{buf: combiner{limit: limit}}),
					opts(sluicetest.WithParallelism(2))...)
				feed(first, bids[:half])
				snap := first.Snapshot()
				got := first.Output()

				second := sluicetest.KeyedProcess[int64](t, keyOf, sluice.KeyedProcessFunction[int64, Bid, auctionCount](&q5Slices{buf: combiner{limit: limit}}),
					opts(sluicetest.WithParallelism(3), sluicetest.RestoreFrom(snap.Path))...)
				feed(second, bids[half:])
				second.ProcessWatermark(sluicetest.MaxWatermark)
				var records []sluicetest.Record[auctionCount]
				for _, r := range append(got, second.Output()...) {
					records = append(records, sluicetest.Record[auctionCount]{Value: r.Value, Timestamp: r.Timestamp})
				}
				sameMultiset(t, "q5 window counts across a snapshot", records, want)
			})
		}
	}
}

// TestQ11MatchesTheSessionWindowOperator: q11 - the session window
// operator, which combines bids in memory (in a buffer of 3 sessions too,
// so it flushes when full) - and q11Sessions, the hand-written function
// that does the same, each snapshot with bids in its buffer and restored
// at another parallelism, emit what the session window operator without
// its buffer emits for the same bids and watermarks, with the same
// timestamps. The bids come out of order (groups of 15 s) with the
// watermark 1 s behind the latest, so many are late: some fall into
// sessions still open, the others are dropped.
func TestQ11MatchesTheSessionWindowOperator(t *testing.T) {
	cfg := testConfig()
	cfg.Events = 4000
	cfg.Rate = 100 // 40 s
	cfg.OutOfOrderGroupSize = 1500
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bids := refBids(allEvents(t, g))
	// feed emits a watermark 1 s behind the latest bid after every 50th
	// bid; wm is the last one, n the bids fed.
	type clock struct{ latest, wm, n int64 }
	feed := func(h *sluicetest.Harness[Bid, Q11Result], bids []Bid, c *clock) {
		for _, b := range bids {
			h.ProcessElement(b, b.DateTime)
			c.latest = max(c.latest, b.DateTime)
			if c.n++; c.n%50 == 0 {
				c.wm = c.latest - 1000
				h.ProcessWatermark(c.wm)
			}
		}
	}
	plain := func(rs []sluicetest.Record[Q11Result]) []sluicetest.Record[Q11Result] {
		out := make([]sluicetest.Record[Q11Result], len(rs))
		for i, r := range rs {
			out[i] = sluicetest.Record[Q11Result]{Value: r.Value, Timestamp: r.Timestamp}
		}
		return out
	}
	ref := sluicetest.New(t, q11Bids, sluicetest.WithParallelism(2), sluicetest.WithEnvironment(sluice.WithWindowBufferLimit(0)))
	feed(ref, bids, &clock{})
	ref.ProcessWatermark(sluicetest.MaxWatermark)
	want := plain(ref.Output())
	var counted int64
	for _, r := range want {
		counted += r.Value.BidCount
	}
	if counted == int64(len(bids)) || counted == 0 {
		t.Fatalf("the session windows counted %d of %d bids: the test needs some dropped as late", counted, len(bids))
	}
	t.Logf("%d sessions, %d of %d bids counted", len(want), counted, len(bids))

	keyOf := func(b Bid) int64 { return b.Bidder }
	harnesses := map[string]func(t *testing.T, limit int, opts ...sluicetest.Option) *sluicetest.Harness[Bid, Q11Result]{
		"window": func(t *testing.T, limit int, opts ...sluicetest.Option) *sluicetest.Harness[Bid, Q11Result] {
			return sluicetest.New(t, q11Bids, append(opts, sluicetest.WithEnvironment(sluice.WithWindowBufferLimit(limit)))...)
		},
		"hand": func(t *testing.T, limit int, opts ...sluicetest.Option) *sluicetest.Harness[Bid, Q11Result] {
			return sluicetest.KeyedProcess[int64](t, keyOf, sluice.KeyedProcessFunction[int64, Bid, Q11Result](&q11Sessions{buf: combiner{limit: limit}}),
				append(opts, sluicetest.WithOperatorOptions(sluice.UID("q11-hand")))...)
		},
	}
	for name, backend := range combinerBackends {
		for hname, harness := range harnesses {
			for _, limit := range []int{q11BufferLimit, 3} {
				t.Run(fmt.Sprintf("%s %s limit %d", hname, name, limit), func(t *testing.T) {
					// Each harness has a backend (a RocksDB directory) of its own.
					opts := func(more ...sluicetest.Option) []sluicetest.Option {
						if f := backend(t); f != nil {
							return append(more, sluicetest.WithStateBackend(f))
						}
						return more
					}
					var c clock
					half := len(bids) / 2
					first := harness(t, limit, opts(sluicetest.WithParallelism(2))...)
					feed(first, bids[:half], &c)
					snap := first.Snapshot()
					got := first.Output()
					second := harness(t, limit, opts(sluicetest.WithParallelism(3), sluicetest.RestoreFrom(snap.Path))...)
					second.ProcessWatermark(c.wm) // where the first left off
					feed(second, bids[half:], &c)
					second.ProcessWatermark(sluicetest.MaxWatermark)
					sameMultiset(t, "q11 sessions across a snapshot", plain(append(got, second.Output()...)), want)
				})
			}
		}
	}
}

// TestQ11BufferedBidExtendsADueSession: a session in state is due at a
// watermark while the buffer holds a bid, not due yet, that extends it:
// the timer must merge the bid first, so the session goes on (as the
// session window operator would have merged the bid at once) rather
// than being emitted without it.
func TestQ11BufferedBidExtendsADueSession(t *testing.T) {
	h := sluicetest.KeyedProcess[int64](t, func(b Bid) int64 { return b.Bidder },
		sluice.KeyedProcessFunction[int64, Bid, Q11Result](&q11Sessions{}))
	h.ProcessElement(Bid{Bidder: 7, DateTime: 0}, 0)
	h.Snapshot() // [0, 10 s) goes into state, with its timer at 10 s - 1
	h.ProcessElement(Bid{Bidder: 7, DateTime: 5000}, 5000)
	h.ProcessWatermark(9999) // the timer fires; the buffered bid is due at 15 s - 1 only
	if out := h.Output(); len(out) != 0 {
		t.Fatalf("emitted %v at 9999: the buffered bid extends the session to 15 s", out)
	}
	h.ProcessWatermark(sluicetest.MaxWatermark)
	want := []Q11Result{{Bidder: 7, BidCount: 2, Start: 0, End: 15000}}
	if got := h.Values(); !slices.Equal(got, want) {
		t.Fatalf("emitted %v, want %v", got, want)
	}
}

// TestQ5MaxSnapshotHoldsTheBuffer: q5's second stage combines the counts
// per window in memory; a snapshot taken with counts in its buffer and
// restored gives the hot items of an uninterrupted run.
func TestQ5MaxSnapshotHoldsTheBuffer(t *testing.T) {
	var in []auctionCount
	for end := int64(2000); end <= 6000; end += 2000 {
		for a := int64(1); a <= 30; a++ {
			in = append(in, auctionCount{Auction: a, Count: (a * end / 1000) % 7, End: end})
		}
	}
	want := map[Q5Result]int{}
	for end := int64(2000); end <= 6000; end += 2000 {
		var hot int64
		for _, c := range in {
			if c.End == end {
				hot = max(hot, c.Count)
			}
		}
		for _, c := range in {
			if c.End == end && c.Count == hot {
				want[Q5Result{Auction: c.Auction, Num: hot, Start: end - 10_000, End: end}]++
			}
		}
	}
	keyOf := func(a auctionCount) int64 { return a.End }
	uid := sluicetest.WithOperatorOptions(sluice.UID("q5-max"))
	first := sluicetest.KeyedProcess[int64](t, keyOf, sluice.KeyedProcessFunction[int64, auctionCount, Q5Result](&q5Max{}), uid, sluicetest.WithParallelism(2))
	half := len(in) / 2
	for _, c := range in[:half] {
		first.ProcessElement(c, c.End-1)
	}
	snap := first.Snapshot()
	got := first.Values()
	second := sluicetest.KeyedProcess[int64](t, keyOf, sluice.KeyedProcessFunction[int64, auctionCount, Q5Result](&q5Max{}), uid,
		sluicetest.WithParallelism(1), sluicetest.RestoreFrom(snap.Path))
	for _, c := range in[half:] {
		second.ProcessElement(c, c.End-1)
	}
	second.ProcessWatermark(sluicetest.MaxWatermark)
	var w []Q5Result
	for r, n := range want {
		for range n {
			w = append(w, r)
		}
	}
	sameMultiset(t, "q5 hot items across a snapshot", append(got, second.Values()...), w)
}
