// Package testutil owns the helpers the module's tests share: waiting for
// a condition under a safety net, a context bounded for a test, and an
// in-process Kafka cluster (franz-go's kfake) for fast unit tests. Tests
// only; no production code imports it.
package testutil

import (
	"context"
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
