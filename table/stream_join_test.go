package table

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
)

// ev is a stream record of the join tests: an id under a key.
type ev struct {
	Key string
	ID  int
}

func evKey(e ev) string { return e.Key }

// step is one step of a stream-table script: a stream record (input 1),
// a table change (input 2) or a watermark (input 0), with its timestamp.
type step struct {
	input  int
	ev     ev
	change Change[string, string]
	ts     int64
	wm     int64
}

var keys = []string{"a", "b", "c", "d"}

// script interleaves n stream records and table changes (a sixth of them
// tombstones) of a few keys, out of order by up to 30 ms, one in twelve
// 90 ms late, with watermarks 20 ms behind the largest timestamp so far.
func script(rng *rand.Rand, n int) []step {
	var steps []step
	var maxTs int64
	for i := range n {
		ts := int64(i)*3 + rng.Int64N(30)
		if rng.IntN(12) == 0 {
			ts = max(0, ts-90)
		}
		maxTs = max(maxTs, ts)
		k := keys[rng.IntN(len(keys))]
		if rng.IntN(2) == 0 {
			steps = append(steps, step{input: 1, ev: ev{Key: k, ID: i}, ts: ts})
		} else {
			c := Upsert(k, fmt.Sprintf("v%d", i))
			if rng.IntN(6) == 0 {
				c = Tombstone[string, string](k)
			}
			steps = append(steps, step{input: 2, change: c, ts: ts})
		}
		if rng.IntN(5) == 0 {
			steps = append(steps, step{wm: maxTs - 20})
		}
	}
	return append(steps, step{wm: operators.MaxWatermark})
}

// joined is what the join tests' functions make of a record and a value.
func joined(s ev, v *string) string {
	if v == nil {
		return fmt.Sprintf("%d/%s=nil", s.ID, s.Key)
	}
	return fmt.Sprintf("%d/%s=%s", s.ID, s.Key, *v)
}

// run drives a stream-table join through a script.
func (h *coHarness[K, A, B, OUT]) run(t *testing.T, steps []step, toA func(step) A, toB func(step) B) {
	t.Helper()
	for _, st := range steps {
		var err error
		switch st.input {
		case 0:
			err = h.op.ProcessWatermark(st.wm)
		case 1:
			err = h.op.Input1().ProcessElement(toA(st), st.ts)
		case 2:
			err = h.op.Input2().ProcessElement(toB(st), st.ts)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func stepEv(st step) ev                         { return st.ev }
func stepChange(st step) Change[string, string] { return st.change }

// plainStreamJoin is the plain evaluation of StreamJoin and
// StreamLeftJoin: each record with its key's value when it arrives.
func plainStreamJoin(steps []step, inner bool) []string {
	table := map[string]string{}
	var out []string
	for _, st := range steps {
		switch st.input {
		case 1:
			v, ok := table[st.ev.Key]
			if ok || !inner {
				out = append(out, joined(st.ev, ptr(v, ok)))
			}
		case 2:
			if st.change.Delete {
				delete(table, st.change.Key)
			} else {
				table[st.change.Key] = st.change.Value
			}
		}
	}
	return out
}

func TestStreamJoinAgainstPlainEvaluation(t *testing.T) {
	for seed := range uint64(4) {
		for _, inner := range []bool{true, false} {
			steps := script(rand.New(rand.NewPCG(seed, 29)), 500)
			j := &streamTableJoin[string, ev, string, string]{desc: tableDesc(),
				left: func(s ev, v *string) (string, error) { return joined(s, v), nil }}
			if inner {
				j.left, j.inner = nil, func(s ev, v string) (string, error) { return joined(s, &v), nil }
			}
			h := newCoHarness[string, ev, Change[string, string], string](t, j, evKey, changeKey[string, string])
			h.run(t, steps, stepEv, stepChange)
			want := plainStreamJoin(steps, inner)
			if !slices.Equal(h.out.vals, want) {
				t.Fatalf("seed %d inner %v: joined\n%v\nwant\n%v", seed, inner, h.out.vals, want)
			}
			if nils := countNil(want); inner == (nils > 0) || len(want) < 100 {
				t.Fatalf("seed %d inner %v: %d results, %d without a value: the script does not test the join", seed, inner, len(want), nils)
			}
		}
	}
}

func countNil(out []string) (n int) {
	for _, s := range out {
		if len(s) > 4 && s[len(s)-4:] == "=nil" {
			n++
		}
	}
	return n
}

// plainTemporalJoin is the plain evaluation of TemporalJoin and
// TemporalLeftJoin over the whole history of the table: a record waits
// until the watermark passes its timestamp, then joins with the change
// valid at its timestamp among those that arrived (the latest of equal
// timestamps); a record below the watermark minus the retention when it
// arrives is late, as is a table change (it is not applied).
func plainTemporalJoin(steps []step, retention int64, inner bool) (main, late []string, lateChanges []Change[string, string]) {
	type change struct {
		ts  int64
		c   Change[string, string]
		seq int
	}
	hist := map[string][]change{}
	wm := int64(math.MinInt64)
	var waiting []step
	join := func(st step) {
		var best *change
		for i, c := range hist[st.ev.Key] {
			if c.ts <= st.ts && (best == nil || c.ts > best.ts || (c.ts == best.ts && c.seq > best.seq)) {
				best = &hist[st.ev.Key][i]
			}
		}
		var v *string
		if best != nil && !best.c.Delete {
			v = &best.c.Value
		}
		if v != nil || !inner {
			main = append(main, joined(st.ev, v))
		}
	}
	for i, st := range steps {
		switch st.input {
		case 0:
			wm = max(wm, st.wm)
			var still []step
			for _, w := range waiting {
				if w.ts <= wm {
					join(w)
				} else {
					still = append(still, w)
				}
			}
			waiting = still
		case 1:
			switch {
			case st.ts > wm:
				waiting = append(waiting, st)
			case wm == math.MinInt64 || st.ts >= wm-retention:
				join(st)
			default:
				late = append(late, joined(st.ev, nil))
			}
		case 2:
			if wm != math.MinInt64 && st.ts < wm-retention {
				lateChanges = append(lateChanges, st.change)
				continue
			}
			hist[st.change.Key] = append(hist[st.change.Key], change{ts: st.ts, c: st.change, seq: i})
		}
	}
	return main, late, lateChanges
}

func TestTemporalJoinAgainstPlainEvaluation(t *testing.T) {
	for seed := range uint64(4) {
		for _, retention := range []time.Duration{0, 40 * time.Millisecond} {
			for _, inner := range []bool{true, false} {
				steps := script(rand.New(rand.NewPCG(seed, 31)), 600)
				j := newTemporalJoin[string](codec.Default[ev](), codec.String{}, retention, inner,
					func(s ev, v *string) (string, error) { return joined(s, v), nil })
				h := newCoHarness[string, ev, Change[string, string], string](t, j, evKey, changeKey[string, string])
				h.run(t, steps, stepEv, stepChange)
				wantMain, wantLate, wantLateChanges := plainTemporalJoin(steps, retention.Milliseconds(), inner)
				got := slices.Sorted(slices.Values(h.out.vals))
				slices.Sort(wantMain)
				name := fmt.Sprintf("seed %d retention %v inner %v", seed, retention, inner)
				if !slices.Equal(got, wantMain) {
					t.Fatalf("%s: joined\n%v\nwant\n%v", name, got, wantMain)
				}
				var gotLate []string
				for _, e := range h.late.vals {
					gotLate = append(gotLate, joined(e, nil))
				}
				if !slices.Equal(gotLate, wantLate) {
					t.Fatalf("%s: late %v, want %v", name, gotLate, wantLate)
				}
				if !slices.Equal(h.lateChanges.vals, wantLateChanges) {
					t.Fatalf("%s: late changes %v, want %v", name, h.lateChanges.vals, wantLateChanges)
				}
				if len(wantLate) == 0 || len(wantLateChanges) == 0 || countNil(wantMain) == 0 && !inner || len(wantMain) < 100 {
					t.Fatalf("%s: %d results, %d late: the script does not test the join", name, len(wantMain), len(wantLate))
				}
				// Results carry their record's timestamp.
				for i, s := range h.out.vals {
					var id int
					var rest string
					if _, err := fmt.Sscanf(s, "%d/%s", &id, &rest); err != nil {
						t.Fatal(err)
					}
					if ts := tsOf(steps, id); h.out.ts[i] != ts {
						t.Fatalf("%s: result %s at %d, its record at %d", name, s, h.out.ts[i], ts)
					}
				}
			}
		}
	}
}

func tsOf(steps []step, id int) int64 {
	for _, st := range steps {
		if st.input == 1 && st.ev.ID == id {
			return st.ts
		}
	}
	return -1
}

// TestTemporalJoinHoldsRecordsForTheTable: a record waits for the
// table's watermark, not only the stream's, and the versions the
// watermark no longer needs are dropped from state.
func TestTemporalJoinHoldsRecordsForTheTable(t *testing.T) {
	j := newTemporalJoin[string](codec.Default[ev](), codec.String{}, 0, true,
		func(s ev, v *string) (string, error) { return joined(s, v), nil })
	h := newCoHarness[string, ev, Change[string, string], string](t, j, evKey, changeKey[string, string])
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.op.Input2().ProcessElement(Upsert("a", "v1"), 10))
	must(h.op.Input1().ProcessElement(ev{Key: "a", ID: 1}, 50))
	// The table's change at 40 arrives after the record at 50 and before
	// the watermark: the record joins with it.
	must(h.op.Input2().ProcessElement(Upsert("a", "v2"), 40))
	must(h.op.Input2().ProcessElement(Upsert("a", "v3"), 60))
	if len(h.out.vals) != 0 {
		t.Fatalf("joined %v before the watermark passed the record", h.out.vals)
	}
	must(h.op.ProcessWatermark(55))
	if want := []string{"1/a=v2"}; !slices.Equal(h.out.vals, want) {
		t.Fatalf("joined %v, want %v", h.out.vals, want)
	}
	vers, _, err := j.versions.Value()
	must(err)
	// v1 ended at 40, before the watermark: dropped at the timer.
	if len(vers) != 2 || vers[0].Value != "v2" || vers[1].Value != "v3" {
		t.Fatalf("versions kept %+v, want v2 and v3", vers)
	}
	must(h.op.ProcessWatermark(70))
	must(h.op.Input2().ProcessElement(Tombstone[string, string]("a"), 80))
	must(h.op.ProcessWatermark(100))
	must(h.op.Input2().ProcessElement(Upsert("b", "x"), 120)) // prunes only b's
	must(h.op.Input1().ProcessElement(ev{Key: "a", ID: 2}, 100))
	must(h.op.Input1().ProcessElement(ev{Key: "a", ID: 3}, 99))
	if want := []string{"1/a=v2"}; !slices.Equal(h.out.vals, want) {
		t.Fatalf("joined %v, want %v (a deleted at 80)", h.out.vals, want)
	}
	if len(h.late.vals) != 1 || h.late.vals[0].ID != 3 {
		t.Fatalf("late %v, want record 3", h.late.vals)
	}
}
