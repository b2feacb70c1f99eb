package main

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// testConfig is a small input: 20 000 events at 1 000 events/s of event
// time (20 s: several windows and sessions), shuffled in groups of 500
// events (0.5 s), which a watermark 1 s behind covers.
func testConfig() Config {
	c := DefaultConfig()
	c.Events = 20_000
	c.Rate = 1000
	c.OutOfOrderGroupSize = 500
	return c
}

const testOutOfOrderness = time.Second

// allEvents generates the events in the order the source emits them.
func allEvents(t *testing.T, g *Generator) []Event {
	t.Helper()
	out := make([]Event, g.cfg.Events)
	for n := range out {
		out[n] = g.Event(int64(n))
	}
	return out
}

// runQuery runs build on the generator's events in a job of parallelism
// 2, with 200 ms checkpoints, and returns what it emitted.
func runQuery[T any](t *testing.T, g *Generator, build func(*sluice.Stream[Event]) *sluice.Stream[T], opts ...sluice.Option) []T {
	t.Helper()
	opts = append([]sluice.Option{sluice.WithParallelism(2), sluice.WithCheckpointing(200*time.Millisecond, t.TempDir()),
		sluice.WithAutoWatermarkInterval(20 * time.Millisecond)}, opts...)
	env := sluice.NewEnvironment(opts...)
	out := sink.NewCollect[T]()
	sluice.SinkTo(build(Events(env, g, testOutOfOrderness)), sink.Sink[T](out), sluice.Name("collect"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		t.Fatalf("job: %v", err)
	}
	return out.Values()
}

// sameMultiset fails unless got and want hold the same values as often
// (sluicetest.CheckExactlyOnce).
func sameMultiset[T comparable](t *testing.T, name string, got, want []T) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: the plain evaluation is empty: the input is too small to check anything", name)
	}
	if err := sluicetest.CheckExactlyOnce(got, want); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestQueries runs every query on the heap and on RocksDB (with its Go
// write buffer and without) and compares it
// with the plain evaluation of the same events.
func TestQueries(t *testing.T) {
	backends := []struct {
		name   string
		events int64
		opts   func(t *testing.T) []sluice.Option
	}{
		{"heap", 20_000, func(*testing.T) []sluice.Option { return nil }},
		{"rocksdb", 20_000, func(t *testing.T) []sluice.Option {
			return []sluice.Option{sluice.WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{}))}
		}},
		// Without the Go write buffer (-rocksdb-native-memtable): every
		// value state read and write goes to RocksDB.
		{"rocksdb-native", 20_000, func(t *testing.T) []sluice.Option {
			return []sluice.Option{sluice.WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{NativeMemtable: true}))}
		}},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Events = be.events
			g, err := NewGenerator(cfg)
			if err != nil {
				t.Fatal(err)
			}
			events := allEvents(t, g)
			t.Run("q0", func(t *testing.T) { sameMultiset(t, "q0", runQuery(t, g, Q0, be.opts(t)...), refBids(events)) })
			t.Run("q1", func(t *testing.T) { sameMultiset(t, "q1", runQuery(t, g, Q1, be.opts(t)...), refQ1(events)) })
			t.Run("q2", func(t *testing.T) { sameMultiset(t, "q2", runQuery(t, g, Q2, be.opts(t)...), refQ2(events)) })
			t.Run("q3", func(t *testing.T) { sameMultiset(t, "q3", runQuery(t, g, Q3, be.opts(t)...), refQ3(events)) })
			t.Run("q4", func(t *testing.T) {
				got := runQuery(t, g, Q4, be.opts(t)...)
				want := refQ4(events)
				var winners int64
				for _, r := range want {
					winners += r.Auctions
				}
				if int64(len(got)) != winners {
					t.Errorf("q4: %d updates, want one per auction with a winning bid: %d", len(got), winners)
				}
				final := map[int64]Q4Result{}
				for _, r := range got {
					if r.Auctions > final[r.Category].Auctions {
						final[r.Category] = r
					}
				}
				var f, w []Q4Result
				for _, r := range final {
					f = append(f, r)
				}
				for _, r := range want {
					w = append(w, r)
				}
				sameMultiset(t, "q4 final averages", f, w)
			})
			t.Run("q5", func(t *testing.T) { sameMultiset(t, "q5", runQuery(t, g, Q5, be.opts(t)...), refQ5(events)) })
			t.Run("q6", func(t *testing.T) { sameMultiset(t, "q6", runQuery(t, g, Q6, be.opts(t)...), refQ6(events)) })
			t.Run("q7", func(t *testing.T) { sameMultiset(t, "q7", runQuery(t, g, Q7, be.opts(t)...), refQ7(events)) })
			t.Run("q8", func(t *testing.T) { sameMultiset(t, "q8", runQuery(t, g, Q8, be.opts(t)...), refQ8(events)) })
			t.Run("q4sql", func(t *testing.T) {
				got := runQuery(t, g, Q4SQL, be.opts(t)...)
				var updates int
				for _, r := range got {
					if r.Kind != Insert {
						updates++
					}
				}
				if updates == 0 {
					t.Errorf("q4sql: %d rows and no update: the input does not exercise the changelog", len(got))
				}
				sameMultiset(t, "q4sql applied changelog", applyChangelog(t, got), refQ4SQL(events))
			})
			t.Run("q7sql", func(t *testing.T) { sameMultiset(t, "q7sql", runQuery(t, g, Q7SQL, be.opts(t)...), refQ7SQL(events)) })
			t.Run("q11", func(t *testing.T) { sameMultiset(t, "q11", runQuery(t, g, Q11, be.opts(t)...), refQ11(events)) })
			t.Run("q11hand", func(t *testing.T) { sameMultiset(t, "q11hand", runQuery(t, g, Q11Hand, be.opts(t)...), refQ11(events)) })
		})
	}
}

// TestQ7SQLWindowEnd checks query 7's join condition at its edge: a bid
// timed exactly at a window's end joins that window's maximum (BETWEEN is
// inclusive), though it belongs to the next window.
func TestQ7SQLWindowEnd(t *testing.T) {
	bid := func(ts, price int64) Event {
		return Event{Kind: KindBid, Bid: &Bid{Auction: ts, Bidder: 1, Price: price, DateTime: ts, Extra: "x"}}
	}
	events := []Event{bid(5_000, 9), bid(10_000, 9), bid(15_000, 20), bid(21_000, 3)}
	src := source.NewDatagen(func(n int64) Event { return events[n] }, source.DatagenCount(int64(len(events))),
		source.DatagenTimestamps(func(n int64) int64 { return events[n].Timestamp() }))
	env := sluice.NewEnvironment(sluice.WithParallelism(2))
	out := sink.NewCollect[Bid]()
	sluice.SinkTo(Q7SQL(eventsFrom(env, src, testOutOfOrderness)), sink.Sink[Bid](out), sluice.Name("collect"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		t.Fatalf("job: %v", err)
	}
	want := refQ7SQL(events)
	if len(want) != 4 { // 5 000 and 10 000 with [0, 10 000]'s 9, 15 000 and 21 000 with their windows'
		t.Fatalf("the plain evaluation has %d rows, want 4: %+v", len(want), want)
	}
	sameMultiset(t, "q7sql", out.Values(), want)
}
