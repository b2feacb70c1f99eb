package table

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// TestGlobalJoinAgainstPlainEvaluation drives the global join of two
// subtasks: each gets every table change (the broadcast input) and its
// own share of the stream, in script order; each record joins its key's
// value at the time.
func TestGlobalJoinAgainstPlainEvaluation(t *testing.T) {
	for seed := range uint64(4) {
		for _, inner := range []bool{true, false} {
			steps := script(rand.New(rand.NewPCG(seed, 43)), 500)
			d := state.MapStateDescriptor[string, string]{Name: "global-table"}
			var subtasks [2]*operators.BroadcastProcess[ev, Change[string, string], string]
			outs := [2]*collect[string]{{}, {}}
			for i := range subtasks {
				j := &globalJoin[string, ev, string, string]{desc: d, keyOf: evKey, inner: inner,
					fn: func(s ev, v *string) (string, error) { return joined(s, v), nil }}
				subtasks[i] = operators.NewBroadcastProcess[ev, Change[string, string], string](j,
					[]operators.BroadcastStateDeclaration{sluice.DeclareBroadcastState(d)}, operators.Output[string](outs[i]))
				if err := subtasks[i].Open(opContext(t, "global")); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, st := range steps {
				var err error
				switch st.input {
				case 1:
					// Records stay on their subtask, whatever their key.
					i := st.ev.ID % 2
					n := len(outs[i].vals)
					err = subtasks[i].Input1().ProcessElement(st.ev, st.ts)
					got = append(got, outs[i].vals[n:]...)
				case 2:
					for _, s := range subtasks {
						if err = s.Input2().ProcessElement(st.change, st.ts); err != nil {
							break
						}
					}
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if want := plainStreamJoin(steps, inner); !slices.Equal(got, want) {
				t.Fatalf("seed %d inner %v: joined\n%v\nwant\n%v", seed, inner, got, want)
			}
		}
	}
}

// TestMaterializePassesChangesThatChangeTheTable: upserts pass, a delete
// of a key the table holds passes, one of a key it does not hold is
// dropped.
func TestMaterializePassesChangesThatChangeTheTable(t *testing.T) {
	out := &collect[Change[string, string]]{}
	m := &materializer[string, string]{desc: tableDesc()}
	in := []Change[string, string]{
		Upsert("a", "1"), Tombstone[string, string]("b"), Upsert("a", "2"), Tombstone[string, string]("a"), Tombstone[string, string]("a"), Upsert("b", "3"),
	}
	want := []Change[string, string]{in[0], in[2], in[3], in[5]}
	kop := operators.NewKeyedProcess(operators.KeyedProcessFunction[string, Change[string, string], Change[string, string]](m),
		changeKey[string, string], codec.String{}, operators.Output[Change[string, string]](out))
	if err := kop.Open(opContext(t, "materialize")); err != nil {
		t.Fatal(err)
	}
	for _, c := range in {
		if err := kop.ProcessElement(c, 0); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(out.vals, want) {
		t.Fatalf("passed %v, want %v", out.vals, want)
	}
}
