package e2e

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
)

var (
	oddTag   = sluice.NewOutputTag[string]("odd")
	timerTag = sluice.NewOutputTag[int64]("timers")
)

// splitter sends even records to its main output and odd ones, as
// strings, to a side output; every record registers an event-time timer
// one ms after it, whose firing goes to a second side output.
type splitter struct{}

func (splitter) ProcessElement(ctx *sluice.KeyedContext[int64], v int64, out sluice.Collector[int64]) error {
	if v%2 == 0 {
		out.Collect(v)
	} else {
		sluice.EmitSide(ctx, oddTag, fmt.Sprint("odd", v))
	}
	ctx.Timers().RegisterEventTimeTimer(ctx.Timestamp() + 1)
	return nil
}

func (splitter) OnTimer(ctx *sluice.KeyedContext[int64], ts int64, _ sluice.Collector[int64]) error {
	sluice.EmitSide(ctx, timerTag, ts)
	return nil
}

// wmProbe registers an event-time timer at every record's timestamp and
// emits the watermark it fires at: it shows that watermarks flow through a
// side output.
type wmProbe struct{}

func (wmProbe) ProcessElement(ctx *sluice.KeyedContext[int64], v int64, _ sluice.Collector[int64]) error {
	ctx.Timers().RegisterEventTimeTimer(ctx.Timestamp())
	return nil
}

func (wmProbe) OnTimer(ctx *sluice.KeyedContext[int64], ts int64, out sluice.Collector[int64]) error {
	out.Collect(ctx.Timers().CurrentWatermark())
	return nil
}

func TestSideOutputsFromKeyedProcess(t *testing.T) {
	const n = 300
	var script []step
	for i := range int64(n) {
		script = append(script, rec(i, 1000+i))
		if i%10 == 9 {
			script = append(script, wmark(1000+i))
		}
	}
	env := newEnv(sluice.WithParallelism(2))
	src := sluice.FromSource(env, newScriptSource(script), sluice.NoWatermarks[int64](), "script", sluice.Parallelism(1))
	main := sluice.Process[int64, int64, int64](sluice.KeyBy(src, func(v int64) int64 { return v % 3 }), splitter{}, sluice.UID("split"))
	evens := sink.NewCollect[int64]()
	sluice.SinkTo(main, evens)
	odds, odds2 := sink.NewCollect[string](), sink.NewCollect[string]()
	sluice.SinkTo(sluice.SideOutput(main, oddTag).Rebalance(), odds, sluice.Parallelism(3)) // over the network
	sluice.SinkTo(sluice.SideOutput(main, oddTag), odds2)                                   // chained, same tag again
	timers := sluice.SideOutput(main, timerTag)
	wms := sink.NewCollect[int64]()
	sluice.SinkTo(sluice.Process[int64, int64, int64](sluice.KeyBy(timers, func(v int64) int64 { return v % 4 }), wmProbe{}), wms)
	mustExecute(t, env)

	var wantEven, wantOdd []string
	for i := range int64(n) {
		if i%2 == 0 {
			wantEven = append(wantEven, fmt.Sprint(i))
		} else {
			wantOdd = append(wantOdd, fmt.Sprint("odd", i))
		}
	}
	var gotEven []string
	for _, v := range evens.Values() {
		gotEven = append(gotEven, fmt.Sprint(v))
	}
	if d := sameMultiset(gotEven, wantEven); d != "" {
		t.Errorf("main output: %s", d)
	}
	for name, c := range map[string]*sink.Collect[string]{"network": odds, "chained": odds2} {
		if d := sameMultiset(c.Values(), wantOdd); d != "" {
			t.Errorf("side output (%s): %s", name, d)
		}
		for _, r := range c.Records() {
			var v int64
			fmt.Sscanf(r.Value, "odd%d", &v)
			if r.Timestamp != 1000+v {
				t.Errorf("side record %s has timestamp %d, want its record's %d", r.Value, r.Timestamp, 1000+v)
			}
		}
	}
	// Every timer fired into the side output, and the consumer of the side
	// output saw the watermarks: its timers fired before the final one.
	if got := wms.Len(); got != n {
		t.Fatalf("%d timers fired downstream of the side output, want %d", got, n)
	}
	early := 0
	for _, wm := range wms.Values() {
		if wm != maxWatermark {
			early++
		}
	}
	if early < n/2 {
		t.Fatalf("only %d of %d timers downstream of the side output fired before the final watermark", early, n)
	}
}
