package snapshot

import (
	"maps"
	"slices"
)

// SharedRegistry counts, for every shared file, the checkpoints that
// reference it, so that a file is deleted only when no checkpoint that may
// still be restored references it (invariant 3 of DESIGN.md: a completed
// checkpoint never references a deleted file). It is plain bookkeeping, no
// I/O: the coordinator registers the references of each acknowledgement,
// releases a checkpoint when it is aborted or discarded, and deletes the
// files Release returns.
//
// A state backend may reuse a shared file only from a checkpoint it was
// notified complete (as in Flink): that checkpoint stays registered until a
// newer one completes, and the newer one registers the file too.
// Not safe for concurrent use.
type SharedRegistry struct {
	refs map[string]int            // file -> number of checkpoints referencing it
	by   map[int64]map[string]bool // checkpoint -> files
}

// NewSharedRegistry returns an empty registry.
func NewSharedRegistry() *SharedRegistry {
	return &SharedRegistry{refs: map[string]int{}, by: map[int64]map[string]bool{}}
}

// Register records that checkpoint id references the shared files names.
// Registering a reference twice counts it once.
func (r *SharedRegistry) Register(id int64, names []string) {
	set := r.by[id]
	if set == nil {
		set = map[string]bool{}
		r.by[id] = set
	}
	for _, n := range names {
		if !set[n] {
			set[n] = true
			r.refs[n]++
		}
	}
}

// Release drops every reference of checkpoint id and returns the files no
// checkpoint references any more, sorted: they may be deleted.
func (r *SharedRegistry) Release(id int64) []string {
	set := r.by[id]
	delete(r.by, id)
	var free []string
	for n := range set {
		r.refs[n]--
		if r.refs[n] == 0 {
			delete(r.refs, n)
			free = append(free, n)
		}
	}
	slices.Sort(free)
	return free
}

// Unreferenced returns those of names that no checkpoint references.
func (r *SharedRegistry) Unreferenced(names []string) []string {
	var out []string
	for _, n := range names {
		if r.refs[n] == 0 {
			out = append(out, n)
		}
	}
	return out
}

// Refs returns how many checkpoints reference the file.
func (r *SharedRegistry) Refs(name string) int { return r.refs[name] }

// Checkpoints returns the checkpoints holding references, ascending.
func (r *SharedRegistry) Checkpoints() []int64 {
	return slices.Sorted(maps.Keys(r.by))
}

// Files returns every referenced file, sorted.
func (r *SharedRegistry) Files() []string { return slices.Sorted(maps.Keys(r.refs)) }
