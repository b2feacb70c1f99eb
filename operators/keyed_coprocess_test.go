package operators_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// coEv is a record of either input of the keyed co-process tests.
type coEv struct {
	key string
	v   int64
	ts  int64
}

// bucketSums sums each key's records of both inputs per 10 ms bucket in
// keyed map state and emits a bucket when the watermark passes its end;
// records of a bucket already emitted go to the side output "late".
type bucketSums struct {
	sums state.MapState[int64, [4]int64]
}

func (b *bucketSums) Open(ctx *operators.Context) error {
	var err error
	b.sums, err = state.GetMapState(ctx.KeyedState, state.MapStateDescriptor[int64, [4]int64]{Name: "sums"})
	return err
}

func (b *bucketSums) add(ctx *operators.KeyedContext[string], side int, v coEv, out operators.Collector[string]) error {
	end := v.ts/10*10 + 10
	if end-1 <= ctx.Timers().CurrentWatermark() {
		operators.EmitSide(ctx.SideOutputs(), "late", fmt.Sprintf("%s/%d/%d", ctx.Key(), side, v.v))
		return nil
	}
	s, _, err := b.sums.Get(end)
	if err != nil {
		return err
	}
	s[2*side]++
	s[2*side+1] += v.v
	ctx.Timers().RegisterEventTimeTimer(end - 1)
	return b.sums.Put(end, s)
}

func (b *bucketSums) ProcessElement1(ctx *operators.KeyedContext[string], v coEv, out operators.Collector[string]) error {
	return b.add(ctx, 0, v, out)
}

func (b *bucketSums) ProcessElement2(ctx *operators.KeyedContext[string], v coEv, out operators.Collector[string]) error {
	return b.add(ctx, 1, v, out)
}

func (b *bucketSums) OnTimer(ctx *operators.KeyedContext[string], ts int64, out operators.Collector[string]) error {
	s, ok, err := b.sums.Get(ts + 1)
	if err != nil || !ok {
		return fmt.Errorf("timer %d of key %s without its bucket: %v", ts, ctx.Key(), err)
	}
	out.Collect(fmt.Sprintf("%s/%d/%v", ctx.Key(), ts+1, s))
	return b.sums.Remove(ts + 1)
}

// coStep is one step of a two-input script: a record of input 1 or 2, or
// a watermark (input 0).
type coStep struct {
	input int
	ev    coEv
	wm    int64
}

// coScript interleaves records of both inputs, out of order by up to 25 ms,
// with some 60 ms late, and watermarks 20 ms behind the largest timestamp.
func coScript(rng *rand.Rand, n int) []coStep {
	var steps []coStep
	var maxTs int64
	for i := range n {
		ts := int64(i)*2 + rng.Int64N(25)
		if rng.IntN(20) == 0 {
			ts = max(0, ts-60)
		}
		maxTs = max(maxTs, ts)
		steps = append(steps, coStep{input: 1 + rng.IntN(2), ev: coEv{key: string(rune('a' + rng.IntN(3))), v: int64(i), ts: ts}})
		if i%7 == 0 {
			steps = append(steps, coStep{wm: maxTs - 20})
		}
	}
	return append(steps, coStep{wm: operators.MaxWatermark})
}

// plainBucketSums is the plain evaluation of bucketSums over a script.
func plainBucketSums(steps []coStep) (main, late []string) {
	wm := operators.MinWatermark
	type kb struct {
		key string
		end int64
	}
	open := map[kb][4]int64{}
	for _, st := range steps {
		if st.input == 0 {
			wm = max(wm, st.wm)
			var due []kb
			for b := range open {
				if b.end-1 <= wm {
					due = append(due, b)
				}
			}
			for _, b := range due {
				main = append(main, fmt.Sprintf("%s/%d/%v", b.key, b.end, open[b]))
				delete(open, b)
			}
			continue
		}
		side := st.input - 1
		end := st.ev.ts/10*10 + 10
		if end-1 <= wm {
			late = append(late, fmt.Sprintf("%s/%d/%d", st.ev.key, side, st.ev.v))
			continue
		}
		s := open[kb{st.ev.key, end}]
		s[2*side]++
		s[2*side+1] += st.ev.v
		open[kb{st.ev.key, end}] = s
	}
	return main, late
}

func TestKeyedCoProcessAgainstPlainEvaluation(t *testing.T) {
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 16))
		steps := coScript(rng, 400)
		main, late := &out[string]{}, &out[string]{}
		keyOf := func(e coEv) string { return e.key }
		p := operators.NewKeyedCoProcess[string, coEv, coEv, string](&bucketSums{}, keyOf, keyOf, codec.String{}, main)
		sides, err := operators.NewSideOutputs([]string{"late"}, []any{operators.Output[string](late)})
		if err != nil {
			t.Fatal(err)
		}
		p.SetSideOutputs(sides)
		if err := p.Open(keyedContext(t, "co", 0)); err != nil {
			t.Fatal(err)
		}
		in1, in2 := p.Input1(), p.Input2()
		for _, st := range steps {
			switch st.input {
			case 0:
				err = p.ProcessWatermark(st.wm)
			case 1:
				err = in1.ProcessElement(st.ev, st.ev.ts)
			case 2:
				err = in2.ProcessElement(st.ev, st.ev.ts)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		wantMain, wantLate := plainBucketSums(steps)
		if len(wantLate) == 0 || len(wantMain) == 0 {
			t.Fatalf("seed %d: the script has %d late records and %d buckets; the test needs both", seed, len(wantLate), len(wantMain))
		}
		slices.Sort(wantMain)
		got := slices.Sorted(slices.Values(main.vals))
		if !slices.Equal(got, wantMain) {
			t.Fatalf("seed %d: emitted %v\nwant %v", seed, got, wantMain)
		}
		if !slices.Equal(late.vals, wantLate) {
			t.Fatalf("seed %d: late %v, want %v", seed, late.vals, wantLate)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeyedCoProcessTimersAndKey checks the context of both inputs and of
// processing-time timers: the key, the timestamp, the time domain.
type coEcho struct{}

func (coEcho) ProcessElement1(ctx *operators.KeyedContext[string], v coEv, out operators.Collector[string]) error {
	out.Collect(fmt.Sprintf("1 %s@%d", ctx.Key(), ctx.Timestamp()))
	ctx.Timers().RegisterProcessingTimeTimer(ctx.Timers().CurrentProcessingTime() + 5)
	return nil
}

func (coEcho) ProcessElement2(ctx *operators.KeyedContext[string], v coEv, out operators.Collector[string]) error {
	out.Collect(fmt.Sprintf("2 %s@%d", ctx.Key(), ctx.Timestamp()))
	ctx.Timers().RegisterEventTimeTimer(v.ts + 1)
	return nil
}

func (coEcho) OnTimer(ctx *operators.KeyedContext[string], ts int64, out operators.Collector[string]) error {
	out.Collect(fmt.Sprintf("timer %s@%d %v", ctx.Key(), ts, ctx.TimeDomain()))
	return nil
}

func TestKeyedCoProcessContext(t *testing.T) {
	o := &out[string]{}
	keyOf := func(e coEv) string { return e.key }
	p := operators.NewKeyedCoProcess[string, coEv, coEv, string](coEcho{}, keyOf, keyOf, codec.String{}, o)
	clock := &manualClock{now: 100}
	ctx := keyedContext(t, "co", 0)
	ctx.ProcessingTime = clock
	if err := p.Open(ctx); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.Input1().ProcessElement(coEv{key: "a", ts: 7}, 7))
	must(p.Input2().ProcessElement(coEv{key: "b", ts: 9}, 9))
	must(p.ProcessWatermark(10))
	clock.now = 105
	must(clock.run())
	want := []string{"1 a@7", "2 b@9", "timer b@10 event-time", "timer a@105 processing-time"}
	if !slices.Equal(o.vals, want) {
		t.Fatalf("emitted %v, want %v", o.vals, want)
	}
	if o.ts[2] != 10 || o.ts[3] != operators.NoTimestamp {
		t.Fatalf("timer records' timestamps %v", o.ts)
	}
	must(p.Close())
}

// manualClock runs the callbacks due at its time when told to.
type manualClock struct {
	now int64
	due []func() error
	at  []int64
}

func (c *manualClock) Now() int64 { return c.now }
func (c *manualClock) At(ts int64, fn func() error) func() {
	c.at, c.due = append(c.at, ts), append(c.due, fn)
	return func() {}
}

func (c *manualClock) run() error {
	for i, fn := range c.due {
		if c.at[i] <= c.now && fn != nil {
			c.due[i] = nil
			if err := fn(); err != nil {
				return err
			}
		}
	}
	return nil
}
