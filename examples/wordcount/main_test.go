package main

import (
	"os"
	"testing"
	"time"
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
