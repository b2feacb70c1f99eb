package main

import (
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/importcheck"
)

// The example runs to its end on the embedded broker and its own check of
// the output (every word's counts 1..n, once each) passes.
func TestWordCountOnEmbeddedBroker(t *testing.T) {
	t.Setenv("KAFKA_BROKERS", "")
	os.Unsetenv("KAFKA_BROKERS")
	if err := run(100*time.Millisecond, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// A job of the root package, a Kafka source and sink and the heap backend
// links no AWS SDK, etcd client, gRPC or zap: S3 and the cluster plug in
// only when a program imports them.
func TestLinksNeitherS3NorTheCluster(t *testing.T) {
	importcheck.NoneOf(t, ".", importcheck.Heavy...)
}
