package sluice_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// A job is built on an Environment: a source, transformations, keyed
// operators and a sink; Execute runs it to its end (a bounded source ends
// it). Here a slice of lines becomes a running count per word, kept in
// keyed state by a KeyedProcessFunction.
func Example() {
	env := sluice.NewEnvironment(sluice.WithParallelism(2), sluice.WithLogger(slog.New(slog.DiscardHandler)))
	lines := sluice.FromSource(env, source.FromSlice([]string{"to be or", "not to be"}), sluice.NoWatermarks[string](), "lines")
	words := sluice.FlatMap(lines, func(line string, out sluice.Collector[string]) error {
		for _, w := range strings.Fields(line) {
			out.Collect(w)
		}
		return nil
	})
	counts := sluice.Process[string, string, string](sluice.KeyBy(words, func(w string) string { return w }), &wordCounter{})
	out := sink.NewCollect[string]()
	sluice.SinkTo(counts, out)
	if err := env.Execute(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	// Subtasks run concurrently: the order of keys varies, each key's
	// counts do not.
	got := out.Values()
	slices.Sort(got)
	fmt.Println(strings.Join(got, " "))
	// Output: be=1 be=2 not=1 or=1 to=1 to=2
}

// wordCounter counts every word in keyed state (a ValueState per key).
type wordCounter struct{ n state.ValueState[int64] }

func (c *wordCounter) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.n, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "n"})
	return err
}

func (c *wordCounter) ProcessElement(ctx *sluice.KeyedContext[string], _ string, out sluice.Collector[string]) error {
	n, _, err := c.n.Value()
	if err != nil {
		return err
	}
	if err := c.n.Update(n + 1); err != nil {
		return err
	}
	out.Collect(fmt.Sprintf("%s=%d", ctx.Key(), n+1))
	return nil
}

// Reduce keeps one value per key, folding every new element into it and
// emitting the result.
func ExampleReduce() {
	env := sluice.NewEnvironment(sluice.WithParallelism(1), sluice.WithLogger(slog.New(slog.DiscardHandler)))
	nums := sluice.FromSource(env, source.FromSlice([]int64{1, 2, 3, 4, 5, 6}), sluice.NoWatermarks[int64](), "nums")
	sums := sluice.Reduce(sluice.KeyBy(nums, func(v int64) bool { return v%2 == 0 }),
		func(acc, v int64) (int64, error) { return acc + v, nil })
	out := sink.NewCollect[int64]()
	sluice.SinkTo(sums, out)
	if err := env.Execute(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Values())
	// Output: [1 2 4 6 9 12]
}

// click is an event with its own time.
type click struct {
	User string
	At   int64 // unix milliseconds
}

// Event-time tumbling windows: events carry their time (a timestamp
// assigner), the watermark strategy tolerates them 1 s out of order, and
// every 10-second window of a key fires once the watermark passes its end
// (at the latest when the bounded source ends). A ProcessWindowFunction
// sees the window and its elements.
func ExampleTumblingEventTimeWindows() {
	events := []click{{"ann", 1_000}, {"bob", 2_500}, {"ann", 9_999}, {"ann", 4_000}, {"ann", 12_000}, {"bob", 25_000}}
	env := sluice.NewEnvironment(sluice.WithParallelism(1), sluice.WithLogger(slog.New(slog.DiscardHandler)))
	clicks := sluice.FromSource(env, source.FromSlice(events),
		sluice.ForBoundedOutOfOrderness[click](time.Second).WithTimestampAssigner(func(c click, _ int64) int64 { return c.At }), "clicks")
	windows := sluice.Window(sluice.KeyBy(clicks, func(c click) string { return c.User }), sluice.TumblingEventTimeWindows(10*time.Second))
	counts := sluice.ProcessWindow(windows, sluice.ProcessWindowFunc[string, click, string](
		func(ctx *sluice.WindowContext[string], cs []click, out sluice.Collector[string]) error {
			out.Collect(fmt.Sprintf("%s %v: %d clicks", ctx.Key(), ctx.Window(), len(cs)))
			return nil
		}))
	out := sink.NewCollect[string]()
	sluice.SinkTo(counts, out)
	if err := env.Execute(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	got := out.Values()
	slices.Sort(got)
	for _, s := range got {
		fmt.Println(s)
	}
	// Output:
	// ann [0, 10000): 3 clicks
	// ann [10000, 20000): 1 clicks
	// bob [0, 10000): 1 clicks
	// bob [20000, 30000): 1 clicks
}
