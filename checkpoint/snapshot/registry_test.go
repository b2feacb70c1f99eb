package snapshot

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSharedRegistryNeverFreesAReferencedFile drives the registry with
// random registrations and releases and checks it against a model:
// a file is returned by Release exactly when the last checkpoint
// referencing it goes (invariant 3), never earlier, and never leaks.
func TestSharedRegistryNeverFreesAReferencedFile(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		r := NewSharedRegistry()
		model := map[int64]map[string]bool{}
		deleted := map[string]bool{}
		for step := 0; step < 200; step++ {
			id := rng.Int64N(12)
			if rng.IntN(3) > 0 {
				var names []string
				for range rng.IntN(4) {
					n := fmt.Sprintf("f%d", rng.IntN(15))
					if deleted[n] {
						continue // deleted files are never referenced again
					}
					names = append(names, n)
				}
				r.Register(id, names)
				if model[id] == nil {
					model[id] = map[string]bool{}
				}
				for _, n := range names {
					model[id][n] = true
				}
				continue
			}
			free := r.Release(id)
			delete(model, id)
			for _, n := range free {
				for other, files := range model {
					if files[n] {
						t.Fatalf("seed %d: released %s while checkpoint %d references it", seed, n, other)
					}
				}
				deleted[n] = true
			}
			// No leak: every file not referenced any more was released.
			for _, n := range r.Files() {
				found := false
				for _, files := range model {
					found = found || files[n]
				}
				if !found {
					t.Fatalf("seed %d: %s kept but unreferenced", seed, n)
				}
			}
		}
		if got, want := r.Checkpoints(), sortedKeys(model); !slices.Equal(got, want) {
			t.Fatalf("seed %d: checkpoints %v, want %v", seed, got, want)
		}
	}
}

func sortedKeys(m map[int64]map[string]bool) []int64 {
	var out []int64
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestSharedRegistryCounts(t *testing.T) {
	r := NewSharedRegistry()
	r.Register(1, []string{"a", "b", "a"})
	r.Register(2, []string{"b", "c"})
	if r.Refs("a") != 1 || r.Refs("b") != 2 {
		t.Fatalf("refs a=%d b=%d", r.Refs("a"), r.Refs("b"))
	}
	if got := r.Unreferenced([]string{"a", "z"}); !slices.Equal(got, []string{"z"}) {
		t.Fatalf("unreferenced %v", got)
	}
	if got := r.Release(1); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("release 1: %v", got)
	}
	if got := r.Release(1); got != nil {
		t.Fatalf("release 1 twice: %v", got)
	}
	if got := r.Release(2); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("release 2: %v", got)
	}
}
