package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/table"
)

// keyCount is the value of the queried table: it names its key, so an
// answer with another key's value shows.
type keyCount struct {
	Key   int64
	Count int64
}

const queryKeys = 10

// TestQueriesWhileRunningAndAcrossFailover queries a materialized table
// (a count per key, at parallelism 3) while the job runs, across a
// failure and its restore: every answer is the queried key's, from the
// subtask owning its key group, never above what the source has produced,
// never going back within one attempt; while the job restarts a query
// fails with ErrQueryUnavailable, never with another key's value.
func TestQueriesWhileRunningAndAcrossFailover(t *testing.T) {
	env := newEnv(sluice.WithParallelism(2), sluice.WithCheckpointing(20*time.Millisecond, t.TempDir()),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(3, 50*time.Millisecond)))
	var produced atomic.Int64 // the highest index the source reached, +1
	var failed atomic.Bool
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenRate(3000))
	nums := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen", sluice.UID("gen"))
	nums = sluice.Map(nums, func(i int64) (int64, error) {
		for {
			p := produced.Load()
			if i+1 <= p || produced.CompareAndSwap(p, i+1) {
				break
			}
		}
		if i == 1500 && failed.CompareAndSwap(false, true) {
			return 0, fmt.Errorf("at record %d: %w", i, errInjectedCrash)
		}
		return i, nil
	}, sluice.UID("maybe-fail"))
	ones := sluice.Map(nums, func(i int64) (table.Change[int64, keyCount], error) {
		return table.Upsert(i%queryKeys, keyCount{Key: i % queryKeys, Count: 1}), nil
	}, sluice.UID("ones"))
	sums := sluice.Reduce(sluice.KeyBy(ones, func(c table.Change[int64, keyCount]) int64 { return c.Key }),
		func(a, b table.Change[int64, keyCount]) (table.Change[int64, keyCount], error) {
			return table.Upsert(a.Key, keyCount{Key: a.Key, Count: a.Value.Count + b.Value.Count}), nil
		}, sluice.UID("sum"))
	counts := table.Materialize(table.FromChangelog(sums), "counts", sluice.Parallelism(3))
	sluice.SinkTo(counts.Changes(), sink.NewDiscard[table.Change[int64, keyCount]](), sluice.UID("discard"))
	job := mustStart(t, env)

	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	if _, err := job.QueryState(ctx, "no-such-table", "1"); !errors.Is(err, sluice.ErrUnknownQueryableState) {
		t.Fatalf("a query of an undeclared state: %v, want ErrUnknownQueryableState", err)
	}
	if _, err := job.QueryState(ctx, "counts", "one"); !errors.Is(err, sluice.ErrQueryKey) {
		t.Fatalf("a query with a key that does not parse: %v, want ErrQueryKey", err)
	}

	var mu sync.Mutex
	var answers, unavailable int
	attempts := map[int]int{}
	last := map[[2]int64]int64{} // (attempt, key) -> count
	rng := rand.New(rand.NewPCG(1, 2))
	testutilAwait(t, "answers from the first attempt and from the one after the failure", func() bool {
		k := rng.Int64N(queryKeys + 1) // key queryKeys never has a value
		res, err := job.QueryState(ctx, "counts", strconv.FormatInt(k, 10))
		mu.Lock()
		defer mu.Unlock()
		if errors.Is(err, sluice.ErrQueryUnavailable) {
			unavailable++
			return false
		}
		if err != nil {
			t.Fatalf("query of key %d: %v", k, err)
		}
		if want := queryOwner(t, k, 3); res.Subtask != want {
			t.Fatalf("key %d answered by subtask %d, its key group is subtask %d's", k, res.Subtask, want)
		}
		if !res.Found {
			return false
		}
		if k == queryKeys {
			t.Fatalf("key %d, which never had a value, answered %s", k, res.Value)
		}
		var v keyCount
		if err := json.Unmarshal(res.Value, &v); err != nil {
			t.Fatalf("key %d: value %s: %v", k, res.Value, err)
		}
		if v.Key != k {
			t.Fatalf("key %d answered with key %d's value %s", k, v.Key, res.Value)
		}
		if max := (produced.Load()-k+queryKeys-1)/queryKeys + 1; v.Count < 1 || v.Count > max {
			t.Fatalf("key %d: count %d, the source produced at most %d of its records", k, v.Count, max)
		}
		ak := [2]int64{int64(res.Attempt), k}
		if v.Count < last[ak] {
			t.Fatalf("key %d: count %d after %d in attempt %d", k, v.Count, last[ak], res.Attempt)
		}
		last[ak] = v.Count
		answers++
		attempts[res.Attempt]++
		return attempts[0] > 20 && attempts[1] > 20
	})
	job.Cancel()
	_ = job.Wait()
	if _, err := job.QueryState(ctx, "counts", "1"); !errors.Is(err, sluice.ErrQueryUnavailable) {
		t.Fatalf("a query of an ended job: %v, want ErrQueryUnavailable", err)
	}
	t.Logf("%d answers (%v by attempt), %d unavailable while restarting", answers, attempts, unavailable)
}

// queryOwner is the subtask owning key k of an operator at parallelism par
// (max parallelism 128).
func queryOwner(t *testing.T, k int64, par int) int {
	b, err := codec.DefaultKey[int64]().Append(nil, k)
	if err != nil {
		t.Fatal(err)
	}
	return state.OperatorIndexFor(state.KeyGroupFor(b, 128), 128, par)
}

// testutilAwait polls cond without a pause until it holds, under the
// safety net (queries are the load the test wants).
func testutilAwait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(safetyNet)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out (safety net) waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestQueryableValueStateRefusals: the names of queryable states are
// unique, their key type is the operator's, and only keyed process
// functions declare them.
func TestQueryableValueStateRefusals(t *testing.T) {
	d := state.ValueStateDescriptor[int64]{Name: "count"}
	for name, build := range map[string]func(env *sluice.Environment){
		"twice": func(env *sluice.Environment) {
			ks := sluice.KeyBy(sluice.FromSource(env, source.FromSlice([]int64{1}), sluice.NoWatermarks[int64](), "one"), func(v int64) int64 { return v })
			sluice.Process(ks, sluice.ProcessFunc[int64, int64, int64](nil), sluice.UID("a"), sluice.QueryableValueState[int64]("q", d))
			sluice.Process(ks, sluice.ProcessFunc[int64, int64, int64](nil), sluice.UID("b"), sluice.QueryableValueState[int64]("q", d))
		},
		"key type": func(env *sluice.Environment) {
			ks := sluice.KeyBy(sluice.FromSource(env, source.FromSlice([]int64{1}), sluice.NoWatermarks[int64](), "one"), func(v int64) int64 { return v })
			sluice.Process(ks, sluice.ProcessFunc[int64, int64, int64](nil), sluice.QueryableValueState[string]("q", d))
		},
		"not keyed": func(env *sluice.Environment) {
			sluice.Map(sluice.FromSource(env, source.FromSlice([]int64{1}), sluice.NoWatermarks[int64](), "one"), func(v int64) (int64, error) { return v, nil }, sluice.QueryableValueState[int64]("q", d))
		},
	} {
		env := newEnv()
		build(env)
		if _, err := env.ExecuteAsync(context.Background()); !errors.Is(err, sluice.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
}
