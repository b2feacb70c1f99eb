package cluster

import (
	"errors"
	"slices"
	"testing"
)

func TestPlaceSlots(t *testing.T) {
	for _, c := range []struct {
		name     string
		need     int
		workers  []WorkerSlots
		previous []string
		want     []string
		err      error
	}{
		{"spread", 6, []WorkerSlots{{"w1", 2}, {"w2", 2}, {"w3", 2}}, nil,
			[]string{"w1", "w2", "w3", "w1", "w2", "w3"}, nil},
		{"uneven", 3, []WorkerSlots{{"a", 4}, {"b", 1}}, nil,
			[]string{"a", "a", "a"}, nil},
		{"keep previous where possible", 4, []WorkerSlots{{"w1", 2}, {"w2", 2}, {"w4", 2}},
			[]string{"w2", "w3", "w1", "w2"}, []string{"w2", "w4", "w1", "w2"}, nil},
		{"too few", 5, []WorkerSlots{{"w1", 2}, {"w2", 2}}, nil, nil, ErrNotEnoughSlots},
		{"a worker without slots", 1, []WorkerSlots{{"w0", 0}, {"w1", 1}}, nil, []string{"w1"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := placeSlots(c.need, c.workers, c.previous)
			if !errors.Is(err, c.err) || (c.err == nil && !slices.Equal(got, c.want)) {
				t.Fatalf("placeSlots = %v, %v; want %v, %v", got, err, c.want, c.err)
			}
		})
	}
}
