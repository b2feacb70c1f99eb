// Package testutil owns the helpers the module's tests share: waiting for
// a condition under a safety net, a context bounded for a test, an
// in-process Kafka cluster (franz-go's kfake) for fast unit tests, what a
// read_committed consumer sees of a topic, the clickstream of the "Flink
// habits" tests with its plain evaluations (clickstream.go), and an
// environment without the SLUICE_* variables. Tests
// only; no production code imports it.
package testutil

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// SafetyNet bounds every wait: a passing test never reaches it, it only
// turns a hang into a failure. It asserts no timing.
const SafetyNet = 60 * time.Second

// Await polls cond until it holds, failing the test past the safety net.
func Await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(SafetyNet)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out (safety net) waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// AwaitClosed waits for ch to be closed, under the safety net.
func AwaitClosed(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(SafetyNet):
		t.Fatalf("timed out (safety net) waiting for %s", what)
	}
}

// Context returns a context that ends after d (the safety net when d is
// 0) or when the test ends, so a deadlock fails the test instead of
// hanging it.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	if d <= 0 {
		d = SafetyNet
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// KafkaCluster starts a one-broker kfake cluster with the topics (each of
// partitions partitions), closed when the test ends, and returns its seed
// addresses.
func KafkaCluster(t testing.TB, partitions int32, topics ...string) []string {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// ClearSluiceEnv unsets the SLUICE_* variables for the test (they are
// restored after it), so that the machine's environment cannot change
// what a configuration or a cluster role reads.
func ClearSluiceEnv(t testing.TB) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SLUICE_") {
			t.Setenv(name, "") // restored after the test
			os.Unsetenv(name)
		}
	}
}

// WriteConfig writes a configuration file (Flink's config.yaml shape) in
// the test's temporary directory and returns its path.
func WriteConfig(t testing.TB, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
