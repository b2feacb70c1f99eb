package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/table"
)

// The joins of package table in whole jobs, under the two-input tests'
// crashes (before, in and after the join, in the commits) and rescale
// 2 -> 3 from a savepoint: the right input is a table's changelog, the
// left a stream (temporal join) or another table.

// rightChanges makes the right input a changelog: record i sets its key
// to i, every fifth deletes it.
func rightChanges(right *sluice.Stream[twoEv]) *table.Table[int64, int64] {
	return table.FromChangelog(sluice.Map(right, func(e twoEv) (table.Change[int64, int64], error) {
		if e.I%5 == 0 {
			return table.Tombstone[int64, int64](e.Key), nil
		}
		return table.Upsert(e.Key, e.I), nil
	}, sluice.UID("right-changes")))
}

// crashAfter passes the join's results on, crashing when the run says.
func crashAfter(r *job[string], s *sluice.Stream[string]) *sluice.Stream[string] {
	c := r.opCrash
	return sluice.Map(s, func(v string) (string, error) {
		if c.hit() {
			return v, fmt.Errorf("after the join, at %s: %w", v, errInjectedCrash)
		}
		return v, nil
	}, sluice.UID("join-maybe-crash"), sluice.Parallelism(r.opPar))
}

func buildTemporalJoin(r *job[string], left, right *sluice.Stream[twoEv]) *sluice.Stream[string] {
	joined := table.TemporalLeftJoin(left, twoKey, rightChanges(right).Versioned(0), func(e twoEv, v *int64) (string, error) {
		if v == nil {
			return fmt.Sprintf("%d=nil", e.I), nil
		}
		return fmt.Sprintf("%d=%d", e.I, *v), nil
	}, sluice.UID("temporal-join"), sluice.Parallelism(r.opPar))
	return crashAfter(r, joined)
}

// wantTemporalJoin is the plain evaluation: each left record with the
// right record of its key valid at its timestamp (the latest at or before
// it), none when that one deleted the key. Timestamps of the two inputs
// never tie, and no record is late (they are out of order by less than
// the watermarks allow).
func wantTemporalJoin(n int64) []string {
	left, right := twoInputs(n)
	var out []string
	for _, l := range left {
		var best *twoEv
		for i, r := range right {
			if r.Key == l.Key && r.Ts <= l.Ts && (best == nil || r.Ts > best.Ts) {
				best = &right[i]
			}
		}
		if best == nil || best.I%5 == 0 {
			out = append(out, fmt.Sprintf("%d=nil", l.I))
		} else {
			out = append(out, fmt.Sprintf("%d=%d", l.I, best.I))
		}
	}
	return out
}

func TestTemporalJoinExactlyOnceUnderFailures(t *testing.T) {
	runTwoUnderFailures(t, buildTemporalJoin, wantTemporalJoin(2000))
}

func TestTemporalJoinRescale(t *testing.T) {
	runTwoRescale(t, buildTemporalJoin, wantTemporalJoin(2000))
}

// counts is the table of each key's number of records so far: a keyed
// reduce, so every key's changes come in order from one subtask.
func counts(s *sluice.Stream[twoEv], name string, key func(twoEv) int64) *table.Table[int64, int64] {
	ones := sluice.Map(s, func(e twoEv) (table.Change[int64, int64], error) { return table.Upsert(key(e), int64(1)), nil },
		sluice.UID(name+"-ones"))
	sums := sluice.Reduce(sluice.KeyBy(ones, func(c table.Change[int64, int64]) int64 { return c.Key }),
		func(a, b table.Change[int64, int64]) (table.Change[int64, int64], error) {
			return table.Upsert(a.Key, a.Value+b.Value), nil
		}, sluice.UID(name+"-count"))
	return table.FromChangelog(sums)
}

// countsOf is the plain evaluation of counts.
func countsOf(evs []twoEv, key func(twoEv) int64) map[int64]int64 {
	m := map[int64]int64{}
	for _, e := range evs {
		m[key(e)]++
	}
	return m
}

func parseJoinedCounts(s string) (k, l, r int64, err error) {
	f := strings.Split(s, "/")
	if len(f) != 3 {
		return 0, 0, 0, fmt.Errorf("result %q", s)
	}
	var n [3]int64
	for i := range f {
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return 0, 0, 0, err
		}
	}
	return n[0], n[1], n[2], nil
}

func buildOuterJoin(r *job[string], left, right *sluice.Stream[twoEv]) *sluice.Stream[string] {
	j := table.OuterJoin(counts(left, "left", twoKey), counts(right, "right", twoKey), func(l, r *int64) (string, error) {
		var lc, rc int64
		if l != nil {
			lc = *l
		}
		if r != nil {
			rc = *r
		}
		return fmt.Sprintf("%d/%d", lc, rc), nil
	}, sluice.UID("outer-join"), sluice.Parallelism(r.opPar))
	keyed := sluice.Map(j.Changes(), func(c table.Change[int64, string]) (string, error) {
		return fmt.Sprintf("%d/%s", c.Key, c.Value), nil
	}, sluice.UID("outer-rows"), sluice.Parallelism(r.opPar))
	return crashAfter(r, keyed)
}

// checkOuterJoin: each change of either count table is one row of the
// outer join, so a key's committed rows are every (left, right) pair on
// a path from its first change to its final counts, each once: a row
// twice, or one missing, is a change processed twice or lost.
func checkOuterJoin(n int64) func([]string) string {
	left, right := twoInputs(n)
	lc, rc := countsOf(left, twoKey), countsOf(right, twoKey)
	return func(got []string) string {
		rows := map[int64][][2]int64{}
		seen := map[string]bool{}
		for _, s := range got {
			if seen[s] {
				return fmt.Sprintf("row %s committed twice", s)
			}
			seen[s] = true
			k, l, r, err := parseJoinedCounts(s)
			if err != nil {
				return err.Error()
			}
			rows[k] = append(rows[k], [2]int64{l, r})
		}
		for k := range int64(twoKeys) {
			path := rows[k]
			if int64(len(path)) != lc[k]+rc[k] {
				return fmt.Sprintf("key %d: %d rows, want %d (%d + %d changes)", k, len(path), lc[k]+rc[k], lc[k], rc[k])
			}
			slices.SortFunc(path, func(a, b [2]int64) int { return int(a[0] + a[1] - b[0] - b[1]) })
			prev := [2]int64{}
			for _, p := range path {
				if d := p[0] - prev[0] + p[1] - prev[1]; d != 1 || p[0] < prev[0] || p[1] < prev[1] {
					return fmt.Sprintf("key %d: row %v after %v", k, p, prev)
				}
				prev = p
			}
			if prev != [2]int64{lc[k], rc[k]} {
				return fmt.Sprintf("key %d: final row %v, want %v", k, prev, [2]int64{lc[k], rc[k]})
			}
		}
		return ""
	}
}

func TestTableJoinExactlyOnceUnderFailures(t *testing.T) {
	runTwoUnderFailuresCheck(t, buildOuterJoin, 4000, checkOuterJoin(2000))
}

func TestTableJoinRescale(t *testing.T) {
	runTwoRescaleCheck(t, buildOuterJoin, checkOuterJoin(2000))
}

// The foreign-key join: the left table is each key's count of left
// records, referencing right key count % 3 (so left keys move between
// right keys as they count); the right table counts right records by key
// % 3.
func fkRightKey(e twoEv) int64 { return e.Key % 3 }

func buildForeignKeyJoin(r *job[string], left, right *sluice.Stream[twoEv]) *sluice.Stream[string] {
	j := table.ForeignKeyJoin("fk-join", counts(left, "left", twoKey), counts(right, "right", fkRightKey),
		func(l int64) int64 { return l % 3 },
		func(l, rc int64) (string, error) { return fmt.Sprintf("%d/%d", l, rc), nil },
		sluice.Parallelism(r.opPar))
	keyed := sluice.Map(j.Changes(), func(c table.Change[int64, string]) (string, error) {
		if c.Delete {
			// A left key that moved to a right key without records yet.
			return fmt.Sprintf("%d/deleted", c.Key), nil
		}
		return fmt.Sprintf("%d/%s", c.Key, c.Value), nil
	}, sluice.UID("fk-rows"), sluice.Parallelism(r.opPar))
	return crashAfter(r, keyed)
}

// checkForeignKeyJoin: no row twice (every left and right change gives
// rows with new counts; tombstones aside), and each key's last row (the largest left count,
// then right count) is the join of the final tables.
func checkForeignKeyJoin(n int64) func([]string) string {
	left, right := twoInputs(n)
	lc, rc := countsOf(left, twoKey), countsOf(right, fkRightKey)
	return func(got []string) string {
		last := map[int64][2]int64{}
		seen := map[string]bool{}
		for _, s := range got {
			if strings.HasSuffix(s, "/deleted") {
				continue
			}
			if seen[s] {
				return fmt.Sprintf("row %s committed twice", s)
			}
			seen[s] = true
			k, l, r, err := parseJoinedCounts(s)
			if err != nil {
				return err.Error()
			}
			if p := last[k]; l > p[0] || (l == p[0] && r > p[1]) {
				last[k] = [2]int64{l, r}
			}
		}
		for k := range int64(twoKeys) {
			if want := [2]int64{lc[k], rc[lc[k]%3]}; last[k] != want {
				return fmt.Sprintf("key %d: last row %v, want %v", k, last[k], want)
			}
		}
		return ""
	}
}

func TestForeignKeyJoinExactlyOnceUnderFailures(t *testing.T) {
	runTwoUnderFailuresCheck(t, buildForeignKeyJoin, 4000, checkForeignKeyJoin(2000))
}

func TestForeignKeyJoinRescale(t *testing.T) {
	runTwoRescaleCheck(t, buildForeignKeyJoin, checkForeignKeyJoin(2000))
}

// TestGlobalTableRescale: every subtask of a global join holds the whole
// table, also after a restore at another parallelism. The first run loads
// the table into both subtasks (the stream is held back) and stops with a
// savepoint; the second, at parallelism 3, joins the stream only, with no
// table change but what it restored: every record finds its key, on
// whichever subtask it lands.
func TestGlobalTableRescale(t *testing.T) {
	const tableKeys = 40
	var streaming atomic.Bool
	var loaded atomic.Int64
	build := func(par int, opts ...sluice.Option) (*sluice.Environment, *sink.Collect[string]) {
		env := newEnv(append([]sluice.Option{sluice.WithParallelism(2), sluice.WithCheckpointing(20*time.Millisecond, t.TempDir())}, opts...)...)
		changes := sluice.FromSource(env, source.NewDatagen(func(i int64) table.Change[int64, int64] {
			return table.Upsert(i%tableKeys, 10*(i%tableKeys))
		}, source.DatagenRate(2000)), sluice.NoWatermarks[table.Change[int64, int64]](), "table", sluice.UID("table"), sluice.Parallelism(1))
		// The table changes in the first run only: the second has only
		// what it restored.
		changes = sluice.Filter(changes, func(table.Change[int64, int64]) (bool, error) {
			loaded.Add(1)
			return !streaming.Load(), nil
		}, sluice.UID("table-loaded"), sluice.Parallelism(1))
		stream := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }, source.DatagenRate(2000)),
			sluice.NoWatermarks[int64](), "stream", sluice.UID("stream"))
		stream = sluice.Filter(stream, func(int64) (bool, error) { return streaming.Load(), nil }, sluice.UID("held-back"))
		joined := table.GlobalLeftJoin(stream, func(i int64) int64 { return i % tableKeys }, table.Global(table.FromChangelog(changes)),
			func(i int64, v *int64) (string, error) {
				if v == nil {
					return fmt.Sprintf("%d=nil", i), nil
				}
				return fmt.Sprintf("%d=%d", i, *v), nil
			}, sluice.UID("global-join"), sluice.Parallelism(par))
		out := sink.NewCollect[string]()
		sluice.SinkTo(joined, out, sluice.UID("out"), sluice.Parallelism(par))
		return env, out
	}
	env, _ := build(2)
	job := mustStart(t, env)
	await(t, "the whole table loaded", func() bool { return loaded.Load() > 2*tableKeys })
	sp := stopWithSavepoint(t, job)

	streaming.Store(true)
	env, out := build(3, sluice.WithRestoreFrom(sp))
	job = mustStart(t, env)
	await(t, "300 records joined", func() bool { return out.Len() >= 300 })
	job.Cancel()
	_ = job.Wait()
	for _, s := range out.Values() {
		var i, v int64
		if _, err := fmt.Sscanf(s, "%d=%d", &i, &v); err != nil || v != 10*(i%tableKeys) {
			t.Fatalf("record joined as %q: its subtask does not hold the whole table", s)
		}
	}
}
