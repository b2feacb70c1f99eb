package main

import (
	"fmt"
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
	backends := map[string]func(t *testing.T) state.BackendFactory{
		"heap": func(*testing.T) state.BackendFactory { return nil },
		"rocksdb": func(t *testing.T) state.BackendFactory {
			return rocksdb.Factory(t.TempDir(), rocksdb.Options{NativeMemtable: true})
		},
	}
	for name, backend := range backends {
		for _, limit := range []int{q5BufferLimit, 3} {
			t.Run(fmt.Sprintf("%s limit %d", name, limit), func(t *testing.T) {
				opts := func(more ...sluicetest.Option) []sluicetest.Option {
					o := []sluicetest.Option{sluicetest.WithOperatorOptions(sluice.UID("q5-count"))}
					if f := backend(t); f != nil {
						o = append(o, sluicetest.WithStateBackend(f))
					}
					return append(o, more...)
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
				first := sluicetest.KeyedProcess[int64](t, keyOf, sluice.KeyedProcessFunction[int64, Bid, auctionCount](&q5Slices{limit: limit}),
					opts(sluicetest.WithParallelism(2))...)
				feed(first, bids[:half])
				snap := first.Snapshot()
				got := first.Output()

				second := sluicetest.KeyedProcess[int64](t, keyOf, sluice.KeyedProcessFunction[int64, Bid, auctionCount](&q5Slices{limit: limit}),
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
