package table

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// changeStep is one change of the left (input 1) or right (input 2)
// table.
type changeStep struct {
	input  int
	change Change[string, string]
}

// changeScript interleaves n changes of two tables over a few keys, a
// fifth of them tombstones (some of keys that have no value).
func changeScript(rng *rand.Rand, n int) []changeStep {
	var steps []changeStep
	for i := range n {
		input := 1 + rng.IntN(2)
		k := keys[rng.IntN(len(keys))]
		c := Upsert(k, fmt.Sprintf("%c%d", "LR"[input-1], i))
		if rng.IntN(5) == 0 {
			c = Tombstone[string, string](k)
		}
		steps = append(steps, changeStep{input: input, change: c})
	}
	return steps
}

func joinPair(l, r *string) string {
	s := func(p *string) string {
		if p == nil {
			return "nil"
		}
		return *p
	}
	return s(l) + "+" + s(r)
}

// plainTableJoin is the plain evaluation of a table-table join: after
// every change, the key's row of the result if it changed.
func plainTableJoin(steps []changeStep, kind joinKind) []Change[string, string] {
	left, right := map[string]string{}, map[string]string{}
	var out []Change[string, string]
	for _, st := range steps {
		k := st.change.Key
		_, lok := left[k]
		_, rok := right[k]
		had := kind.has(lok, rok)
		side := left
		if st.input == 2 {
			side = right
		}
		if st.change.Delete {
			delete(side, k)
		} else {
			side[k] = st.change.Value
		}
		l, lok := left[k]
		r, rok := right[k]
		switch {
		case kind.has(lok, rok):
			out = append(out, Upsert(k, joinPair(ptr(l, lok), ptr(r, rok))))
		case had:
			out = append(out, Tombstone[string, string](k))
		}
	}
	return out
}

func TestTableJoinAgainstPlainEvaluation(t *testing.T) {
	for seed := range uint64(4) {
		for _, kind := range []joinKind{innerJoin, leftJoin, outerJoin} {
			steps := changeScript(rand.New(rand.NewPCG(seed, 37)), 400)
			j := &tableTableJoin[string, string, string, string]{leftDesc: tableDesc(), rightDesc: tableDesc(), kind: kind,
				fn: func(l, r *string) (string, error) { return joinPair(l, r), nil }}
			j.leftDesc.Name, j.rightDesc.Name = "left", "right"
			h := newCoHarness[string, Change[string, string], Change[string, string], Change[string, string]](t, j,
				changeKey[string, string], changeKey[string, string])
			for _, st := range steps {
				var err error
				if st.input == 1 {
					err = h.op.Input1().ProcessElement(st.change, 0)
				} else {
					err = h.op.Input2().ProcessElement(st.change, 0)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			want := plainTableJoin(steps, kind)
			if !slices.Equal(h.out.vals, want) {
				t.Fatalf("seed %d kind %d: emitted\n%v\nwant\n%v", seed, kind, h.out.vals, want)
			}
			tombstones, nils := 0, 0
			for _, c := range want {
				if c.Delete {
					tombstones++
				} else if len(c.Value) > 3 && (c.Value[:3] == "nil" || c.Value[len(c.Value)-3:] == "nil") {
					nils++
				}
			}
			if tombstones == 0 || (kind != innerJoin) != (nils > 0) {
				t.Fatalf("seed %d kind %d: %d tombstones, %d one-sided rows: the script does not test the join", seed, kind, tombstones, nils)
			}
		}
	}
}
