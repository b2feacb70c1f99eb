package operators

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// discardOut counts what an operator emits.
type discardOut[T any] struct{ n int }

func (d *discardOut[T]) Collect(T, int64) error    { d.n++; return nil }
func (d *discardOut[T]) EmitWatermark(int64) error { return nil }

// benchWindow feeds b.N records of 1000 keys through a window operator:
// 100 records per ms of event time (10 per key in a 100 ms window), with
// a 100 ms pause every 100,000 records (which closes 50 ms sessions) and
// a watermark every 1000 records.
func benchWindow(b *testing.B, a WindowAssigner, fn string) {
	benchWindowOn(b, newBackend(&testing.T{}, nil), a, fn)
}

// benchWindowOn is benchWindow on the backend kb.
func benchWindowOn(b *testing.B, kb state.KeyedBackend, a WindowAssigner, fn string) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
	}
	out := &discardOut[ev]{}
	cfg := WindowConfig[string, ev]{Assigner: a, KeyOf: func(e ev) string { return e.Key }, KeyCodec: codec.String{}}
	var op Operator
	var in Input[ev]
	switch fn {
	case "reduce":
		w := NewReduceWindow(cfg, func(x, y ev) (ev, error) { x.V += y.V; return x, nil }, codec.JSON[ev]{}, out)
		op, in = w, w
	case "process":
		p := NewProcessWindow(cfg, ProcessWindowFunc[string, ev, ev](func(ctx *WindowContext[string], els []ev, o Collector[ev]) error {
			o.Collect(els[0])
			return nil
		}), codec.JSON[ev]{}, out)
		op, in = p, p
	}
	if err := op.Open(testContext(kb, &fakeClock{}, false)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ts := int64(i/100 + i/100_000*100)
		e := ev{Key: keys[i%len(keys)], V: 1, T: ts}
		if err := in.ProcessElement(e, e.T); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			if err := op.ProcessWatermark(ts - 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(out.n), "firings")
}

// BenchmarkWindows: the cost per record of event-time windows on the heap
// backend (see benchWindow), and of sessions on RocksDB (its default
// options: value states behind the write buffer in Go memory, and with
// NativeMemtable straight into RocksDB).
func BenchmarkWindows(b *testing.B) {
	for _, native := range []bool{false, true} {
		name := "session-reduce-rocksdb"
		if native {
			name += "-native-memtable"
		}
		b.Run(name, func(b *testing.B) {
			kb, err := rocksdb.New(rocksdb.Options{Dir: b.TempDir(), MaxParallelism: testMaxPar, NativeMemtable: native})
			if err != nil {
				b.Fatal(err)
			}
			defer kb.Close()
			benchWindowOn(b, kb, SessionWindows{Gap: 50}, "reduce")
		})
	}
	b.Run("tumbling-reduce", func(b *testing.B) { benchWindow(b, TumblingWindows{Size: 100}, "reduce") })
	b.Run("tumbling-process", func(b *testing.B) { benchWindow(b, TumblingWindows{Size: 100}, "process") })
	b.Run("sliding-reduce", func(b *testing.B) { benchWindow(b, SlidingWindows{Size: 100, Slide: 25}, "reduce") })
	b.Run("session-reduce", func(b *testing.B) { benchWindow(b, SessionWindows{Gap: 50}, "reduce") })
}

// timerEvery registers an event-time timer per record, as many keyed
// process functions do.
type timerEvery struct{}

func (timerEvery) ProcessElement(ctx *KeyedContext[string], v ev, _ Collector[ev]) error {
	ctx.Timers().RegisterEventTimeTimer(v.T + 100)
	return nil
}

func (timerEvery) OnTimer(*KeyedContext[string], int64, Collector[ev]) error { return nil }

// noTimers uses no timers.
type noTimers struct{}

func (noTimers) ProcessElement(*KeyedContext[string], ev, Collector[ev]) error { return nil }

// BenchmarkKeyedProcessTimers: the cost of timers kept in keyed state
// (register, fire and delete from the timer state) against timers kept
// only in memory (no keyed backend), and of a function without timers.
func BenchmarkKeyedProcessTimers(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
	}
	for _, c := range []struct {
		name  string
		fn    KeyedProcessFunction[string, ev, ev]
		keyed bool
	}{
		{"timers-in-state", timerEvery{}, true},
		{"timers-in-memory", timerEvery{}, false},
		{"no-timers", noTimers{}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := testContext(nil, &fakeClock{}, false)
			if c.keyed {
				ctx.KeyedState = newBackend(&testing.T{}, nil)
			}
			p := NewKeyedProcess(c.fn, func(e ev) string { return e.Key }, codec.String{}, &discardOut[ev]{})
			if err := p.Open(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				e := ev{Key: keys[i%len(keys)], T: int64(i)}
				if err := p.ProcessElement(e, e.T); err != nil {
					b.Fatal(err)
				}
				if i%1000 == 999 {
					if err := p.ProcessWatermark(int64(i)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkSessionBufferMemory reports the Go heap a session window's
// in-memory buffer holds per session at its default bound (the keys it
// keeps included): 100 000 keys of 14-byte strings, one session each, with a counter accumulator
// (docs/event-time.md quotes it). Run with -benchtime=1x:
// go test -run '^$' -bench SessionBufferMemory -benchtime=1x ./operators/
func BenchmarkSessionBufferMemory(b *testing.B) {
	count := func(a, _ int64) (int64, error) { return a + 1, nil }
	var before, after runtime.MemStats
	for range b.N {
		runtime.GC()
		runtime.ReadMemStats(&before)
		buf := newSessionBuffer[string](DefaultWindowBufferLimit, sessionFuncs[int64, int64]{
			one: func(int64) (int64, error) { return 1, nil }, add: count,
			merge: func(a, c int64) (int64, error) { return a + c, nil }, write: func(int64) error { return nil }})
		// The keys are made here: the buffer keeps each record's key.
		for i := range DefaultWindowBufferLimit {
			if err := buf.add(fmt.Sprintf("bidder-%07d", i), TimeWindow{Start: int64(i), End: int64(i) + 10_000}, 1); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if !buf.full() {
			b.Fatalf("%d sessions held, want the bound %d", buf.n, DefaultWindowBufferLimit)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(buf.n), "heap-B/session")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		runtime.KeepAlive(buf)
	}
}
