package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// joiner is a two-input function over an int64 stream and a string stream;
// it counts per subtask what it saw (a copy per subtask, so no locks).
type joiner struct{ ints, strs int }

func (j *joiner) ProcessElement1(ctx *sluice.CoContext, v int64, out sluice.Collector[string]) error {
	j.ints++
	out.Collect(fmt.Sprintf("int:%d", v))
	return nil
}

func (j *joiner) ProcessElement2(ctx *sluice.CoContext, v string, out sluice.Collector[string]) error {
	j.strs++
	if ctx.Runtime() == nil {
		return fmt.Errorf("no runtime context")
	}
	out.Collect("str:" + strings.ToUpper(v))
	return nil
}

// TestConnectCoProcess: two streams of different types, with different
// parallelisms, processed by one two-input function.
func TestConnectCoProcess(t *testing.T) {
	for _, par := range []int{1, 3} {
		t.Run(fmt.Sprintf("p=%d", par), func(t *testing.T) {
			env := newEnv(sluice.WithParallelism(2))
			nums := sluice.FromSource(env, source.FromSlice(ints(0, 200)), sluice.NoWatermarks[int64](), "nums")
			words := []string{"a", "bb", "ccc", "dd", "e"}
			strs := sluice.FromSource(env, source.FromSlice(words), sluice.NoWatermarks[string](), "words", sluice.Parallelism(1))
			co := sluice.CoProcess[int64, string, string](sluice.Connect(nums, strs), &joiner{}, sluice.Name("join"), sluice.Parallelism(par))
			out := sink.NewCollect[string]()
			sluice.SinkTo(co, out)
			mustExecute(t, env)
			var want []string
			for v := range int64(200) {
				want = append(want, fmt.Sprintf("int:%d", v))
			}
			for _, w := range words {
				want = append(want, "str:"+strings.ToUpper(w))
			}
			if d := sameMultiset(out.Values(), want); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// TestConnectKeyedStreams: Connect of two streams keyed the same way puts
// records with the same key on the same subtask.
func TestConnectKeyedStreams(t *testing.T) {
	env := newEnv(sluice.WithParallelism(3))
	a := sluice.FromSource(env, source.FromSlice(ints(0, 300)), sluice.NoWatermarks[int64](), "a")
	b := sluice.FromSource(env, source.FromSlice(ints(0, 300)), sluice.NoWatermarks[int64](), "b", sluice.Parallelism(2))
	ka := sluice.KeyBy(a, func(v int64) int64 { return v % 10 }).Stream()
	kb := sluice.KeyBy(b, func(v int64) int64 { return v % 10 }).Stream()
	co := sluice.CoProcess[int64, int64, placed](sluice.Connect(ka, kb), &placeBoth{}, sluice.Name("co"))
	out := sink.NewCollect[placed]()
	sluice.SinkTo(co, out)
	mustExecute(t, env)
	recs := out.Values()
	if len(recs) != 600 {
		t.Fatalf("collected %d records, want 600", len(recs))
	}
	for _, r := range recs {
		if want := ownerOf(r.V%10, 128, 3); r.Subtask != want {
			t.Fatalf("record %d (key %d) at subtask %d, want %d", r.V, r.V%10, r.Subtask, want)
		}
	}
}

type placeBoth struct{}

func (placeBoth) ProcessElement1(ctx *sluice.CoContext, v int64, out sluice.Collector[placed]) error {
	out.Collect(placed{V: v, Subtask: ctx.Runtime().Subtask})
	return nil
}

func (placeBoth) ProcessElement2(ctx *sluice.CoContext, v int64, out sluice.Collector[placed]) error {
	out.Collect(placed{V: v, Subtask: ctx.Runtime().Subtask})
	return nil
}

// TestUnionOfThree: a union of three streams of different parallelisms
// carries every record of each once.
func TestUnionOfThree(t *testing.T) {
	env := newEnv()
	a := sluice.FromSource(env, source.FromSlice(ints(0, 100)), sluice.NoWatermarks[int64](), "a", sluice.Parallelism(1))
	b := sluice.FromSource(env, source.FromSlice(ints(1000, 1150)), sluice.NoWatermarks[int64](), "b", sluice.Parallelism(2))
	c := sluice.Map(sluice.FromSource(env, source.FromSlice(ints(0, 50)), sluice.NoWatermarks[int64](), "c", sluice.Parallelism(3)),
		func(v int64) (int64, error) { return -v - 1, nil })
	u := sluice.Union(a, b, c)
	out := sink.NewCollect[int64]()
	sluice.SinkTo(sluice.Map(u, func(v int64) (int64, error) { return v * 10, nil }, sluice.Parallelism(2)), out)
	mustExecute(t, env)
	var want []int64
	for _, v := range append(append(ints(0, 100), ints(1000, 1150)...), ints(0, 50)...) {
		want = append(want, v*10)
	}
	for i := range 50 {
		want[250+i] = (-int64(i) - 1) * 10
	}
	if d := sameMultiset(out.Values(), want); d != "" {
		t.Fatal(d)
	}
}

// TestFlatMapAndFilter: FlatMap emits zero or more records per record;
// Filter keeps the records its predicate accepts; timestamps pass through.
func TestFlatMapAndFilter(t *testing.T) {
	env := newEnv(sluice.WithParallelism(2))
	s := sluice.FromSource(env, source.FromSlice([]string{"the quick brown", "", "fox jumps", "over the lazy dog"},
		source.SliceTimestamps(func(v string) int64 { return int64(len(v)) })), sluice.NoWatermarks[string](), "lines")
	words := sluice.FlatMap(s, func(line string, out sluice.Collector[string]) error {
		for _, w := range strings.Fields(line) {
			out.Collect(w)
		}
		return nil
	}, sluice.Name("split"))
	long := sluice.Filter(words, func(w string) (bool, error) { return len(w) > 3, nil }, sluice.Name("long"))
	out := sink.NewCollect[string]()
	sluice.SinkTo(long.Rebalance(), out, sluice.Parallelism(3))
	mustExecute(t, env)
	want := map[string]int64{"quick": 15, "brown": 15, "jumps": 9, "over": 17, "lazy": 17}
	recs := out.Records()
	if len(recs) != len(want) {
		t.Fatalf("got %v, want %v", out.Values(), want)
	}
	for _, r := range recs {
		if ts, ok := want[r.Value]; !ok || ts != r.Timestamp {
			t.Fatalf("got %q with timestamp %d; want %v (word: timestamp of its line)", r.Value, r.Timestamp, want)
		}
	}
}

// TestFanOut: a stream consumed by two operators gives each all records.
func TestFanOut(t *testing.T) {
	env := newEnv(sluice.WithParallelism(2))
	s := sluice.FromSource(env, source.FromSlice(ints(0, 500)), sluice.NoWatermarks[int64](), "numbers")
	evens := sluice.Filter(s, func(v int64) (bool, error) { return v%2 == 0, nil })
	neg := sluice.Map(s, func(v int64) (int64, error) { return -v, nil }, sluice.Parallelism(3))
	out1, out2 := sink.NewCollect[int64](), sink.NewCollect[int64]()
	sluice.SinkTo(evens, out1, sluice.Name("evens"))
	sluice.SinkTo(neg, out2, sluice.Name("negated"))
	mustExecute(t, env)
	var wantEven, wantNeg []int64
	for v := range int64(500) {
		if v%2 == 0 {
			wantEven = append(wantEven, v)
		}
		wantNeg = append(wantNeg, -v)
	}
	if d := sameMultiset(out1.Values(), wantEven); d != "" {
		t.Error("evens:", d)
	}
	if d := sameMultiset(out2.Values(), wantNeg); d != "" {
		t.Error("negated:", d)
	}
}
