package scaling

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Errors of the requirements and of the parallelism they ask for.
var (
	// ErrInvalidRequirements: requirements that name no vertex of the job,
	// or whose bounds are not 1 <= lower <= upper <= max parallelism.
	ErrInvalidRequirements = errors.New("invalid resource requirements")
	// ErrNotEnoughSlots: a vertex's lower bound is more than the slots
	// there are (or its forward-joined vertices') allow.
	ErrNotEnoughSlots = errors.New("not enough task slots for the resource requirements")
)

// Bounds are the parallelism a vertex may run at (Flink's
// JobVertexResourceRequirements.Parallelism): at least Lower, at most
// Upper.
type Bounds struct {
	Lower int `json:"lowerBound"`
	Upper int `json:"upperBound"`
}

func (b Bounds) String() string { return fmt.Sprintf("[%d,%d]", b.Lower, b.Upper) }

// Requirements are bounds by vertex index (JobGraph.Vertices); a vertex
// without an entry takes its mode's default.
type Requirements map[int]Bounds

// Vertex is what the machine knows of one vertex of the job graph.
type Vertex struct {
	Name string
	// Parallelism is the vertex's parallelism now; Initial the one it
	// was compiled with (the default requirement without the reactive
	// mode is the parallelism it runs at).
	Parallelism    int
	MaxParallelism int
	// Limit is a bound of its own in the reactive mode: a Kafka source's
	// partition count (more subtasks would read nothing); 0 for none.
	Limit int
	// Group: vertices with the same non-zero group are joined by forward
	// edges that are not chained and run at one parallelism.
	Group int
}

// Mode is the scheduler mode (Flink's scheduler-mode).
type Mode uint8

const (
	// Default: the parallelism changes only when requirements ask.
	Default Mode = iota
	// Reactive: the parallelism follows the slots there are.
	Reactive
)

func (m Mode) String() string {
	if m == Reactive {
		return "reactive"
	}
	return "default"
}

// ParseMode parses Flink's scheduler-mode: "reactive" or "default" (and
// the empty string), in any case.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "default":
		return Default, nil
	case "reactive":
		return Reactive, nil
	}
	return 0, fmt.Errorf("scheduler-mode %q: want reactive or default", s)
}

// Check validates req against the job's vertices: every index a vertex,
// 1 <= lower <= upper <= its max parallelism.
func Check(vs []Vertex, req Requirements) error {
	for _, i := range slices.Sorted(maps.Keys(req)) {
		b := req[i]
		if i < 0 || i >= len(vs) {
			return fmt.Errorf("%w: vertex %d: the job has %d vertices", ErrInvalidRequirements, i, len(vs))
		}
		v := vs[i]
		switch {
		case b.Lower < 1:
			return fmt.Errorf("%w: vertex %d (%s): lower bound %d must be at least 1", ErrInvalidRequirements, i, v.Name, b.Lower)
		case b.Upper < b.Lower:
			return fmt.Errorf("%w: vertex %d (%s): upper bound %d is below the lower bound %d", ErrInvalidRequirements, i, v.Name, b.Upper, b.Lower)
		case b.Upper > v.MaxParallelism:
			return fmt.Errorf("%w: vertex %d (%s): upper bound %d exceeds its max parallelism %d (pipeline.max-parallelism: its key groups)",
				ErrInvalidRequirements, i, v.Name, b.Upper, v.MaxParallelism)
		}
	}
	return nil
}

// Target is the parallelism of every vertex (by index) that req asks for
// with slots task slots (0: as many as asked; with slot sharing the job
// needs its highest parallelism in slots) in mode. A vertex runs at the
// most its bounds, its max parallelism and the slots allow; a vertex
// without requirements keeps its parallelism (Default) or asks for its
// max parallelism bounded by its Limit (Reactive); vertices of one group
// run at the lowest of their parallelisms. A lower bound left unmet is
// ErrNotEnoughSlots, naming the vertex.
func Target(vs []Vertex, req Requirements, slots int, mode Mode) ([]int, error) {
	if err := Check(vs, req); err != nil {
		return nil, err
	}
	out := make([]int, len(vs))
	lower := make([]int, len(vs))
	for i, v := range vs {
		b, ok := req[i]
		if !ok {
			if mode == Reactive {
				b = Bounds{Lower: 1, Upper: v.MaxParallelism}
				if v.Limit > 0 {
					b.Upper = min(b.Upper, v.Limit)
				}
			} else {
				b = Bounds{Lower: v.Parallelism, Upper: v.Parallelism}
			}
		}
		p := min(b.Upper, v.MaxParallelism)
		if slots > 0 {
			p = min(p, slots)
		}
		out[i], lower[i] = max(p, 1), b.Lower
	}
	groups := map[int]int{}
	for i, v := range vs {
		if v.Group != 0 {
			if p, ok := groups[v.Group]; !ok || out[i] < p {
				groups[v.Group] = out[i]
			}
		}
	}
	for i, v := range vs {
		if v.Group != 0 {
			out[i] = groups[v.Group]
		}
	}
	for i, v := range vs {
		if out[i] >= lower[i] {
			continue
		}
		why := fmt.Sprintf("%d slots", slots)
		if v.Group != 0 && (slots == 0 || out[i] < slots) {
			why = "the vertices joined to it by forward edges"
		}
		return nil, fmt.Errorf("%w: vertex %d (%s) needs at least %d subtasks; %s allow %d", ErrNotEnoughSlots, i, v.Name, lower[i], why, out[i])
	}
	return out, nil
}

// Slots is what parallelism needs with slot sharing: its highest.
func Slots(parallelism []int) int {
	n := 0
	for _, p := range parallelism {
		n = max(n, p)
	}
	return n
}
