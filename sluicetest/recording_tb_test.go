package sluicetest_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recordingTB is a testing.TB whose failures are recorded instead of
// failing the test: a test of the kit checks that the kit fails a user's
// test, and why. Everything else (cleanup, temporary directories, logs)
// is the real test's.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	msgs   []string
	failed bool
}

func (r *recordingTB) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
	r.failed = true
}

func (r *recordingTB) Helper()                      {}
func (r *recordingTB) Error(args ...any)            { r.record(fmt.Sprint(args...)) }
func (r *recordingTB) Errorf(f string, args ...any) { r.record(fmt.Sprintf(f, args...)) }
func (r *recordingTB) Fail()                        { r.record("Fail") }
func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *recordingTB) Fatal(args ...any) { r.record(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recordingTB) Fatalf(f string, args ...any) {
	r.record(fmt.Sprintf(f, args...))
	runtime.Goexit()
}
func (r *recordingTB) FailNow() { r.record("FailNow"); runtime.Goexit() }

// failureOf runs fn with a recordingTB on a goroutine of its own (a
// Fatal ends it) and returns what fn's test would have failed with; the
// real test fails if fn's did not.
func failureOf(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	tb := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	if !tb.Failed() {
		t.Fatalf("the kit passed a test it should have failed")
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return strings.Join(tb.msgs, "\n")
}
