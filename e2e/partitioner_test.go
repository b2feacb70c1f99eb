package e2e

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// placed is a record with the subtask of the operator that processed it.
type placed struct {
	V       int64
	Subtask int
}

// subtaskOf emits every record with the subtask that processes it, as
// operators.Context reports it.
type subtaskOf struct{ ctx *operators.Context }

func (s *subtaskOf) Open(ctx *operators.Context) error { s.ctx = ctx; return nil }

func (s *subtaskOf) ProcessElement(_ *sluice.KeyedContext[int64], v int64, out sluice.Collector[placed]) error {
	out.Collect(placed{V: v, Subtask: s.ctx.Subtask})
	return nil
}

// TestKeyByRoutesToKeyGroupOwner: keyBy sends every key to subtask
// state.OperatorIndexFor(state.KeyGroupFor(encodedKey, maxPar), maxPar,
// par), for the default and a custom max parallelism and several
// parallelisms. The subtask is checked twice: as operators.Context reports
// it to the process function, and as the chained sink's writer sees it.
func TestKeyByRoutesToKeyGroupOwner(t *testing.T) {
	for _, tc := range []struct{ par, maxPar int }{{2, 128}, {3, 128}, {4, 7}, {3, 3}} {
		t.Run(fmt.Sprintf("p=%d,max=%d", tc.par, tc.maxPar), func(t *testing.T) {
			opts := []sluice.Option{sluice.WithParallelism(2)}
			if tc.maxPar != 128 {
				opts = append(opts, sluice.WithMaxParallelism(tc.maxPar))
			}
			env := newEnv(opts...)
			s := sluice.FromSource(env, source.FromSlice(ints(-500, 500)), sluice.NoWatermarks[int64](), "numbers")
			ks := sluice.KeyBy(s, func(v int64) int64 { return v % 37 })
			p := sluice.Process[int64, int64, placed](ks, &subtaskOf{}, sluice.Name("where"), sluice.Parallelism(tc.par))
			out := sink.NewCollect[placed]()
			sluice.SinkTo(p, out, sluice.Parallelism(tc.par))
			mustExecute(t, env)
			recs := out.Records()
			if len(recs) != 1000 {
				t.Fatalf("collected %d records, want 1000", len(recs))
			}
			used := map[int]bool{}
			for _, r := range recs {
				want := ownerOf(r.Value.V%37, tc.maxPar, tc.par)
				if r.Value.Subtask != want || r.Subtask != want {
					t.Fatalf("key %d processed by subtask %d, written by sink subtask %d; its key group belongs to %d",
						r.Value.V%37, r.Value.Subtask, r.Subtask, want)
				}
				used[want] = true
			}
			if len(used) < 2 {
				t.Fatalf("all 37 keys went to one subtask: the test cannot tell partitioners apart")
			}
		})
	}
}

// TestBroadcastDeliversEverywhere: every record reaches every subtask.
func TestBroadcastDeliversEverywhere(t *testing.T) {
	env := newEnv()
	s := sluice.FromSource(env, source.FromSlice(ints(0, 300)), sluice.NoWatermarks[int64](), "numbers", sluice.Parallelism(2))
	out := sink.NewCollect[int64]()
	sluice.SinkTo(s.Broadcast(), out, sluice.Parallelism(3))
	mustExecute(t, env)
	per := map[int][]int64{}
	for _, r := range out.Records() {
		per[r.Subtask] = append(per[r.Subtask], r.Value)
	}
	for sub := range 3 {
		if d := sameMultiset(per[sub], ints(0, 300)); d != "" {
			t.Errorf("subtask %d: %s", sub, d)
		}
	}
}

// TestRebalanceSpreadsEvenly: round robin from each producer gives every
// consumer the same number of records.
func TestRebalanceSpreadsEvenly(t *testing.T) {
	for _, producers := range []int{1, 2} {
		t.Run(fmt.Sprintf("producers=%d", producers), func(t *testing.T) {
			env := newEnv()
			s := sluice.FromSource(env, source.FromSlice(ints(0, 1200)), sluice.NoWatermarks[int64](), "numbers", sluice.Parallelism(producers))
			out := sink.NewCollect[int64]()
			sluice.SinkTo(s.Rebalance(), out, sluice.Parallelism(4))
			mustExecute(t, env)
			count := map[int]int{}
			var all []int64
			for _, r := range out.Records() {
				count[r.Subtask]++
				all = append(all, r.Value)
			}
			if d := sameMultiset(all, ints(0, 1200)); d != "" {
				t.Fatal(d)
			}
			for sub := range 4 {
				if count[sub] != 300 {
					t.Errorf("subtask %d got %d records, want 300 (%v)", sub, count[sub], count)
				}
			}
		})
	}
}

// TestRebalanceSameParallelism: Rebalance between operators of equal
// parallelism is a network exchange (not forward), so records leave their
// subtask.
func TestRebalanceSameParallelism(t *testing.T) {
	env := newEnv(sluice.WithParallelism(2))
	s := sluice.FromSource(env, source.FromSlice(ints(0, 100)), sluice.NoWatermarks[int64](), "numbers")
	out := sink.NewCollect[int64]()
	sluice.SinkTo(s.Rebalance(), out)
	mustExecute(t, env)
	moved := 0
	for _, r := range out.Records() {
		if int(r.Value%2) != r.Subtask { // the slice source's subtask is v%2
			moved++
		}
	}
	if moved != 50 {
		t.Fatalf("%d of 100 records changed subtask, want 50 (round robin from each of two producers)", moved)
	}
}

// TestForwardKeepsSubtask: a forward edge, chained or over the network,
// keeps every record in its subtask. The slice source's subtask i emits
// the values v with v%3 == i.
func TestForwardKeepsSubtask(t *testing.T) {
	for _, chained := range []bool{true, false} {
		t.Run(fmt.Sprintf("chained=%v", chained), func(t *testing.T) {
			env := newEnv(sluice.WithParallelism(3))
			s := sluice.FromSource(env, source.FromSlice(ints(0, 900)), sluice.NoWatermarks[int64](), "numbers")
			var mopts []sluice.OpOption
			if !chained {
				mopts = append(mopts, sluice.DisableChaining())
			}
			m := sluice.Map(s.Forward(), func(v int64) (int64, error) { return v, nil }, mopts...)
			out := sink.NewCollect[int64]()
			sluice.SinkTo(m.Forward(), out)
			job := mustStart(t, env)
			if err := job.Wait(); err != nil {
				t.Fatal(err)
			}
			if n := len(job.Graph().Vertices); (n == 1) != chained {
				t.Fatalf("%d vertices with chained=%v:\n%s", n, chained, job.Graph())
			}
			recs := out.Records()
			if len(recs) != 900 {
				t.Fatalf("collected %d records", len(recs))
			}
			for _, r := range recs {
				if int(r.Value%3) != r.Subtask {
					t.Fatalf("record %d from source subtask %d arrived at subtask %d", r.Value, r.Value%3, r.Subtask)
				}
			}
		})
	}
}
