package kafka

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/kafkaclient"
)

// The client configuration is validated by the shared kafkaclient; the
// error reads as before and matches both sentinels.
func TestNewSourceRefusesClientConfig(t *testing.T) {
	_, err := NewSource(nil, Topics("t"), ValueDecoder[string](codec.String{}))
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, kafkaclient.ErrInvalidConfig) {
		t.Fatalf("no seeds: %v, want ErrInvalidConfig (the source's and kafkaclient's)", err)
	}
	if want := "no seed brokers: kafka source: invalid configuration"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
