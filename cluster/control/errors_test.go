package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/runtime/network"
)

// A worker's error that wraps a sentinel of wireSentinels matches it on
// the coordinator's side after the JSON round trip; other errors do not.
func TestWireErrorKeepsSentinel(t *testing.T) {
	sent := fmt.Errorf("deploy: %w", network.ErrInsufficientNetworkBuffers)
	for _, c := range []struct {
		err  error
		want bool
	}{{sent, true}, {errors.New("something else"), false}} {
		raw, err := json.Marshal(toWire(c.err))
		if err != nil {
			t.Fatal(err)
		}
		var w wireError
		if err := json.Unmarshal(raw, &w); err != nil {
			t.Fatal(err)
		}
		got := w.err()
		if errors.Is(got, network.ErrInsufficientNetworkBuffers) != c.want || got.Error() != c.err.Error() {
			t.Errorf("%v crossed as %v (matches the sentinel: %v, want %v)", c.err, got, !c.want, c.want)
		}
	}
}
