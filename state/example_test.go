package state_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/state"
)

// clock is a TTL clock the example moves by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// Keyed state is declared by a descriptor (its name, codec and TTL) and
// read and written for the current key, which the runtime sets before
// each record and timer of a keyed function. In a job, declare the state
// in your function's Open from ctx.KeyedState; here the heap backend is
// driven by hand. A TTL makes entries expire a fixed time after they were
// written (as Flink's StateTtlConfig): expired entries are invisible,
// removed when read, and left out of checkpoints.
func ExampleTTLConfig() {
	c := &clock{now: time.Unix(0, 0)}
	backend, err := state.NewHeapKeyedBackend(state.HeapOptions{Clock: c})
	if err != nil {
		panic(err)
	}
	// [start ttl]
	seen, err := state.GetValueState(backend, state.ValueStateDescriptor[bool]{
		Name: "seen",
		TTL:  state.TTLConfig{TTL: time.Hour}, // forgotten an hour after it was written
	})
	// [end ttl]

	if err != nil {
		panic(err)
	}
	key := []byte("click-42")
	backend.SetCurrentKey(key, state.KeyGroupFor(key, backend.MaxParallelism()))
	_ = seen.Update(true)
	c.now = c.now.Add(59 * time.Minute)
	v, ok, _ := seen.Value()
	fmt.Println("after 59 minutes:", v, ok)
	c.now = c.now.Add(time.Minute)
	v, ok, _ = seen.Value()
	fmt.Println("after an hour:", v, ok)
	// Output:
	// after 59 minutes: true true
	// after an hour: false false
}

// The kinds of keyed state, each declared by its descriptor, as Flink's.
func Example_kinds() {
	backend, err := state.NewHeapKeyedBackend(state.HeapOptions{})
	if err != nil {
		panic(err)
	}
	// [start kinds]
	total, _ := state.GetValueState(backend, state.ValueStateDescriptor[int64]{Name: "total"})
	recent, _ := state.GetListState(backend, state.ListStateDescriptor[string]{Name: "recent"})
	perPage, _ := state.GetMapState(backend, state.MapStateDescriptor[string, int]{Name: "per-page"})
	maxima, _ := state.GetReducingState(backend, state.ReducingStateDescriptor[int64]{
		Name: "max", Reduce: func(a, b int64) int64 { return max(a, b) }})
	// [end kinds]

	key := []byte("ann")
	backend.SetCurrentKey(key, state.KeyGroupFor(key, backend.MaxParallelism()))
	_ = total.Update(12)
	_ = recent.Add("/cart")
	_ = perPage.Put("/cart", 2)
	_ = maxima.Add(7)
	_ = maxima.Add(3)
	t, _, _ := total.Value()
	r, _ := recent.Get()
	n, _, _ := perPage.Get("/cart")
	m, _, _ := maxima.Get()
	fmt.Println(t, r, n, m)
	// Output: 12 [/cart] 2 7
}
