package statetest

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// model is what a backend should hold: per "key|ns", the value, the list
// and the map of the three states the randomized test uses.
type model struct {
	vals  map[string]int64
	lists map[string][]int64
	maps  map[string]map[string]int64
}

func (m *model) clone() *model {
	c := &model{vals: maps.Clone(m.vals), lists: map[string][]int64{}, maps: map[string]map[string]int64{}}
	for k, l := range m.lists {
		c.lists[k] = slices.Clone(l)
	}
	for k, mm := range m.maps {
		c.maps[k] = maps.Clone(mm)
	}
	return c
}

type randHandles struct {
	v state.ValueState[int64]
	l state.ListState[int64]
	m state.MapState[string, int64]
}

func getRandHandles(t testing.TB, b state.KeyedBackend) randHandles {
	return randHandles{
		v: must[state.ValueState[int64]](t)(state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "rv"})),
		l: must[state.ListState[int64]](t)(state.GetListState(b, state.ListStateDescriptor[int64]{Name: "rl"})),
		m: must[state.MapState[string, int64]](t)(state.GetMapState(b, state.MapStateDescriptor[string, int64]{Name: "rm"})),
	}
}

func (h randHandles) setNamespace(ns []byte) {
	h.v.SetNamespace(ns)
	h.l.SetNamespace(ns)
	h.m.SetNamespace(ns)
}

// testRandomizedSnapshots applies random operations to random keys and
// namespaces, takes snapshots at random points, writes and releases them
// out of order while the operations go on, and checks every written
// snapshot against the model as it was at its synchronous part.
func (s *suite) testRandomizedSnapshots(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	b := s.backend(t, Config{})
	h := getRandHandles(t, b)
	cur := &model{vals: map[string]int64{}, lists: map[string][]int64{}, maps: map[string]map[string]int64{}}
	namespaces := [][]byte{nil, []byte("w1"), []byte("a-namespace-long-enough-for-no-inline")}
	type pending struct {
		snap state.StateSnapshot
		want *model
	}
	var open []pending
	var written []struct {
		data []byte
		want *model
	}
	for step := range 6000 {
		k := fmt.Sprint("k", rng.IntN(300))
		nsi := rng.IntN(len(namespaces))
		id := k + "|" + string(namespaces[nsi])
		setKey(b, k)
		h.setNamespace(namespaces[nsi])
		switch op := rng.IntN(100); {
		case op < 30:
			v := rng.Int64N(1000)
			check(t, h.v.Update(v))
			cur.vals[id] = v
		case op < 38:
			check(t, h.v.Clear())
			delete(cur.vals, id)
		case op < 55:
			v := rng.Int64N(1000)
			check(t, h.l.Add(v))
			cur.lists[id] = append(cur.lists[id], v)
		case op < 60:
			check(t, h.l.Clear())
			delete(cur.lists, id)
		case op < 80:
			uk, v := fmt.Sprint("u", rng.IntN(5)), rng.Int64N(1000)
			check(t, h.m.Put(uk, v))
			if cur.maps[id] == nil {
				cur.maps[id] = map[string]int64{}
			}
			cur.maps[id][uk] = v
		case op < 90:
			uk := fmt.Sprint("u", rng.IntN(5))
			check(t, h.m.Remove(uk))
			delete(cur.maps[id], uk)
			if len(cur.maps[id]) == 0 {
				delete(cur.maps, id)
			}
		case op < 93:
			snap, err := b.Snapshot(int64(step))
			check(t, err)
			open = append(open, pending{snap, cur.clone()})
		case op < 97 && len(open) > 0:
			i := rng.IntN(len(open))
			p := open[i]
			open = slices.Delete(open, i, i+1)
			if rng.IntN(4) == 0 {
				p.snap.Release() // aborted checkpoint
				continue
			}
			var buf bytes.Buffer
			_, err := p.snap.WriteTo(&buf)
			check(t, err)
			written = append(written, struct {
				data []byte
				want *model
			}{buf.Bytes(), p.want})
		}
	}
	for _, p := range open {
		p.snap.Release()
	}
	written = append(written, struct {
		data []byte
		want *model
	}{snapshotBytes(t, b, 1<<40), cur.clone()})
	if len(written) < 5 {
		t.Fatalf("only %d snapshots written: the test does not test much", len(written))
	}
	for i, w := range written {
		r := s.restored(t, Config{}, w.data)
		s.checkModel(t, fmt.Sprintf("snapshot %d of %d", i+1, len(written)), r, w.want, namespaces)
	}
	s.checkModel(t, "live backend", b, cur, namespaces)
}

func (s *suite) checkModel(t *testing.T, what string, b state.KeyedBackend, want *model, namespaces [][]byte) {
	t.Helper()
	h := getRandHandles(t, b)
	got := &model{vals: map[string]int64{}, lists: map[string][]int64{}, maps: map[string]map[string]int64{}}
	for _, ns := range namespaces {
		h.setNamespace(ns)
		for _, name := range []string{"rv", "rl", "rm"} {
			err := b.Keys(name, ns, func(k []byte, kg int) error {
				b.SetCurrentKey(k, kg)
				id := string(k) + "|" + string(ns)
				switch name {
				case "rv":
					v, ok, err := h.v.Value()
					if err != nil || !ok {
						return fmt.Errorf("key %s listed without a value: %v", id, err)
					}
					got.vals[id] = v
				case "rl":
					l, err := h.l.Get()
					if err != nil || len(l) == 0 {
						return fmt.Errorf("key %s listed with an empty list: %v", id, err)
					}
					got.lists[id] = l
				case "rm":
					mm := map[string]int64{}
					if err := h.m.Iterate(func(k string, v int64) bool { mm[k] = v; return true }); err != nil {
						return err
					}
					got.maps[id] = mm
				}
				return nil
			})
			check(t, err)
		}
	}
	if !maps.Equal(got.vals, want.vals) {
		t.Fatalf("%s: values differ:\n got %v\nwant %v", what, got.vals, want.vals)
	}
	if !maps.EqualFunc(got.lists, want.lists, slices.Equal) {
		t.Fatalf("%s: lists differ:\n got %v\nwant %v", what, got.lists, want.lists)
	}
	if !maps.EqualFunc(got.maps, want.maps, maps.Equal) {
		t.Fatalf("%s: maps differ:\n got %v\nwant %v", what, got.maps, want.maps)
	}
}
