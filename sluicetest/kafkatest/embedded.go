package kafkatest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// startEmbedded starts a one-broker kfake cluster in the test's process.
func startEmbedded(tb testing.TB, o Options) ([]string, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(int(o.Partitions)))
	if err != nil {
		return nil, fmt.Errorf("kfake: %w", err)
	}
	tb.Cleanup(c.Close)
	return c.ListenAddrs(), nil
}

// startExternal uses the broker of KAFKA_BROKERS.
func startExternal(testing.TB, Options) ([]string, error) {
	v := strings.TrimSpace(os.Getenv("KAFKA_BROKERS"))
	if v == "" {
		return nil, fmt.Errorf("KAFKA_BROKERS is unset: %w", ErrUnavailable)
	}
	var seeds []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			seeds = append(seeds, b)
		}
	}
	return seeds, nil
}
