package state_test

import (
	"testing"

	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/statetest"
)

func newHeap(t testing.TB, cfg statetest.Config) state.KeyedBackend {
	t.Helper()
	b, err := state.NewHeapKeyedBackend(state.HeapOptions{MaxParallelism: cfg.MaxParallelism, KeyGroups: cfg.KeyGroups, Clock: cfg.Clock})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHeapBackendSuite(t *testing.T) {
	statetest.Run(t, newHeap)
}
