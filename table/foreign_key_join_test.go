package table

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// The foreign-key join's three operators are wired here as a job wires
// them, with the lookup side at parallelism 2: subscriptions and right
// changes reach a lookup subtask on two channels, answers reach the
// resolve side on two channels, and the test picks which channel
// delivers next at random, so answers overtake each other as they do
// between subtasks.

// fkOf is the foreign key of a left value "L<i>:<right key>".
func fkOf(l string) string { _, fk, _ := strings.Cut(l, ":"); return fk }

// seqOf is the sequence number of a value "L<i>:..." or "R<i>".
func seqOf(v string) int {
	v = v[1:]
	if i := strings.IndexByte(v, ':'); i >= 0 {
		v = v[:i]
	}
	n, _ := strconv.Atoi(v)
	return n
}

type fkStep struct {
	left   bool
	change Change[string, string]
}

// fkScript makes n changes of a left table (10 keys, values referencing
// one of 6 right keys, so left keys move between right keys) and of a
// right table, a sixth of them tombstones.
func fkScript(rng *rand.Rand, n int) []fkStep {
	var steps []fkStep
	for i := range n {
		if rng.IntN(2) == 0 {
			k := fmt.Sprintf("k%d", rng.IntN(10))
			c := Upsert(k, fmt.Sprintf("L%d:r%d", i, rng.IntN(6)))
			if rng.IntN(6) == 0 {
				c = Tombstone[string, string](k)
			}
			steps = append(steps, fkStep{left: true, change: c})
			continue
		}
		k := fmt.Sprintf("r%d", rng.IntN(6))
		c := Upsert(k, fmt.Sprintf("R%d", i))
		if rng.IntN(6) == 0 {
			c = Tombstone[string, string](k)
		}
		steps = append(steps, fkStep{change: c})
	}
	return steps
}

// plainForeignKeyJoin is the join of the final tables.
func plainForeignKeyJoin(steps []fkStep, inner bool) map[string]string {
	left, right := map[string]string{}, map[string]string{}
	for _, st := range steps {
		m := right
		if st.left {
			m = left
		}
		if st.change.Delete {
			delete(m, st.change.Key)
		} else {
			m[st.change.Key] = st.change.Value
		}
	}
	out := map[string]string{}
	for k, l := range left {
		r, ok := right[fkOf(l)]
		if ok || !inner {
			out[k] = joinPair(&l, ptr(r, ok))
		}
	}
	return out
}

func TestForeignKeyJoinAgainstPlainEvaluation(t *testing.T) {
	for seed := range uint64(6) {
		for _, inner := range []bool{true, false} {
			rng := rand.New(rand.NewPCG(seed, 41))
			steps := fkScript(rng, 600)
			got := runForeignKeyJoin(t, rng, steps, inner)
			want := plainForeignKeyJoin(steps, inner)
			if !maps.Equal(got, want) {
				t.Fatalf("seed %d inner %v: the result is\n%v\nwant\n%v", seed, inner, got, want)
			}
		}
	}
}

// runForeignKeyJoin runs the script through the three operators and
// returns the result table; it fails the test on a result that goes back
// to an older version of either side, or a tombstone for a key the result
// did not have.
func runForeignKeyJoin(t *testing.T, rng *rand.Rand, steps []fkStep, inner bool) map[string]string {
	t.Helper()
	kc := codec.String{}
	fn := func(l string, r *string) (string, error) { return joinPair(&l, r), nil }
	type sub = subscription[string, string, string]
	type resp = response[string, string, string]

	// Channels: A -> lookup i, right table -> lookup i, lookup i -> resolve.
	var rightQ [2][]Change[string, string]
	var subMsgs [2][]sub
	var respMsgs [2][]resp
	part := func(fk string) int { return int(fk[len(fk)-1]-'0') % 2 }

	result := map[string]string{}
	lastLeft, lastRight := map[string]int{}, map[[2]string]int{}
	resolveOut := &collect[Change[string, string]]{then: func(c Change[string, string], _ int64) error {
		if c.Delete {
			if _, ok := result[c.Key]; !ok {
				t.Fatalf("tombstone for %s, which the result does not have", c.Key)
			}
			delete(result, c.Key)
			return nil
		}
		l, r, _ := strings.Cut(c.Value, "+")
		if inner && r == "nil" {
			t.Fatalf("inner join emitted %s=%s", c.Key, c.Value)
		}
		if s := seqOf(l); s < lastLeft[c.Key] {
			t.Fatalf("%s=%s after a newer left value (L%d)", c.Key, c.Value, lastLeft[c.Key])
		} else {
			lastLeft[c.Key] = s
		}
		if r != "nil" {
			kr := [2]string{c.Key, fkOf(l)}
			if s := seqOf(r); s < lastRight[kr] {
				t.Fatalf("%s=%s after a newer right value (R%d)", c.Key, c.Value, lastRight[kr])
			} else {
				lastRight[kr] = s
			}
		}
		result[c.Key] = c.Value
		return nil
	}}
	resolve := operators.NewKeyedProcess(operators.KeyedProcessFunction[string, resp, Change[string, string]](
		&fkResolve[string, string, string, string]{inner: inner, fn: fn, desc: state.ValueStateDescriptor[fkResolved]{Name: "answered"}}),
		func(r resp) string { return r.Key }, kc, operators.Output[Change[string, string]](resolveOut))

	var lookups [2]*operators.KeyedCoProcess[string, sub, Change[string, string], resp]
	for i := range lookups {
		out := &collect[resp]{then: func(r resp, _ int64) error { respMsgs[i] = append(respMsgs[i], r); return nil }}
		lookups[i] = operators.NewKeyedCoProcess(operators.KeyedCoProcessFunction[string, sub, Change[string, string], resp](&fkLookup[string, string, string, string]{
			rightDesc: tableDesc(),
			subsDesc:  state.MapStateDescriptor[string, subscriber[string]]{Name: "subscribers", KeyCodec: kc, ValueCodec: subscriberCodec[string]{kc}},
		}), func(s sub) string { return s.FK }, changeKey[string, string], kc, operators.Output[resp](out))
	}
	subOut := &collect[sub]{then: func(s sub, _ int64) error {
		i := part(s.FK)
		subMsgs[i] = append(subMsgs[i], s)
		return nil
	}}
	subscribe := operators.NewKeyedProcess(operators.KeyedProcessFunction[string, Change[string, string], sub](
		&fkSubscribe[string, string, string]{fk: fkOf, desc: state.ValueStateDescriptor[fkLeft[string]]{Name: "foreign-key", Codec: fkLeftCodec[string]{kc}}}),
		changeKey[string, string], kc, operators.Output[sub](subOut))
	for _, op := range []operators.Operator{resolve, lookups[0], lookups[1], subscribe} {
		if err := op.Open(opContext(t, "fk")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = op.Close() })
	}
	// Messages cross their codecs, as over the network.
	subC := subscriptionCodec[string, string, string]{k: kc, kr: kc, l: kc}
	respC := responseCodec[string, string, string]{k: kc, l: kc, r: kc}

	var leftQ []Change[string, string]
	for _, st := range steps {
		if st.left {
			leftQ = append(leftQ, st.change)
		} else {
			rightQ[part(st.change.Key)] = append(rightQ[part(st.change.Key)], st.change)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for {
		var ready []func()
		if len(leftQ) > 0 {
			ready = append(ready, func() { must(subscribe.ProcessElement(leftQ[0], 0)); leftQ = leftQ[1:] })
		}
		for i := range 2 {
			if len(subMsgs[i]) > 0 {
				ready = append(ready, func() {
					b, err := subC.Append(nil, subMsgs[i][0])
					must(err)
					s, err := subC.Decode(b)
					must(err)
					must(lookups[i].Input1().ProcessElement(s, 0))
					subMsgs[i] = subMsgs[i][1:]
				})
			}
			if len(rightQ[i]) > 0 {
				ready = append(ready, func() { must(lookups[i].Input2().ProcessElement(rightQ[i][0], 0)); rightQ[i] = rightQ[i][1:] })
			}
			if len(respMsgs[i]) > 0 {
				ready = append(ready, func() {
					b, err := respC.Append(nil, respMsgs[i][0])
					must(err)
					r, err := respC.Decode(b)
					must(err)
					must(resolve.ProcessElement(r, 0))
					respMsgs[i] = respMsgs[i][1:]
				})
			}
		}
		if len(ready) == 0 {
			return result
		}
		ready[rng.IntN(len(ready))]()
	}
}
