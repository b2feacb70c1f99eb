package main

import (
	"os"
	"testing"
	"time"
)

// The example runs to its end on the embedded broker, through its
// injected failure, and its own exactly-once check of the output passes.
func TestEnrichmentOnEmbeddedBroker(t *testing.T) {
	t.Setenv("KAFKA_BROKERS", "")
	os.Unsetenv("KAFKA_BROKERS")
	if err := run(300, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
