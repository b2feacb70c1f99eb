package sluicetest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// testLogger returns a logger that writes the records at level and above
// to the test's log, until the test ends: a goroutine of the job that
// logs later is not reported (testing panics on a Log after the test).
func testLogger(tb testing.TB, level slog.Level) *slog.Logger {
	w := &testWriter{tb: tb}
	tb.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type testWriter struct {
	mu     sync.Mutex
	tb     testing.TB
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.tb.Log(strings.TrimSuffix(string(bytes.Clone(p)), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// discardLogger drops everything.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
