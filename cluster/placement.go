package cluster

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/runtime"
)

// ErrNotEnoughSlots: the registered workers offer fewer slots than the
// job needs (its highest parallelism, with slot sharing).
var ErrNotEnoughSlots = errors.New("not enough task slots")

// WorkerSlots is a registered worker's offer.
type WorkerSlots struct {
	Worker string
	Slots  int
}

// placeSlots gives each of the job's need slots to a worker: a slot keeps
// the worker it had in the previous attempt when that worker is still
// there and has room (its RocksDB state is then recovered locally), the
// others go to the workers with the most free slots, ties by id, which
// spreads the job over the workers (Flink's
// cluster.evenly-spread-out-slots).
func placeSlots(need int, workers []WorkerSlots, previous []string) ([]string, error) {
	free := map[string]int{}
	total := 0
	for _, w := range workers {
		if w.Slots > 0 {
			free[w.Worker] += w.Slots
			total += w.Slots
		}
	}
	if total < need {
		return nil, fmt.Errorf("%w: the job needs %d (its highest parallelism), %d workers offer %d", ErrNotEnoughSlots, need, len(free), total)
	}
	owner := make([]string, need)
	for i := range owner {
		if i < len(previous) && free[previous[i]] > 0 {
			owner[i] = previous[i]
			free[previous[i]]--
		}
	}
	ids := make([]string, 0, len(free))
	for id := range free {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i := range owner {
		if owner[i] != "" {
			continue
		}
		best := ""
		for _, id := range ids {
			if free[id] > 0 && (best == "" || free[id] > free[best]) {
				best = id
			}
		}
		owner[i] = best
		free[best]--
	}
	return owner, nil
}

// placeTasks maps every task to the worker of its slot: subtask i of every
// vertex shares slot i, so a chain's tasks and the subtasks of one index
// stay together.
func placeTasks(tasks []runtime.TaskSpec, slots []string) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = slots[t.Subtask]
	}
	return out
}
