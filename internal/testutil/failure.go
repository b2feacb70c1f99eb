package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recordingTB is a testing.TB whose failures and skips are recorded
// instead of ending the test: a test of a test kit checks that the kit
// fails (or skips) a user's test, and why. Everything else (cleanup,
// temporary directories, logs, environment) is the real test's.
type recordingTB struct {
	testing.TB
	mu      sync.Mutex
	msgs    []string
	failed  bool
	skipped bool
}

func (r *recordingTB) record(msg string, skip bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
	if skip {
		r.skipped = true
	} else {
		r.failed = true
	}
}

func (r *recordingTB) Helper()                      {}
func (r *recordingTB) Error(args ...any)            { r.record(fmt.Sprint(args...), false) }
func (r *recordingTB) Errorf(f string, args ...any) { r.record(fmt.Sprintf(f, args...), false) }
func (r *recordingTB) Fail()                        { r.record("Fail", false) }
func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *recordingTB) Fatal(args ...any) { r.record(fmt.Sprint(args...), false); runtime.Goexit() }
func (r *recordingTB) Fatalf(f string, args ...any) {
	r.record(fmt.Sprintf(f, args...), false)
	runtime.Goexit()
}
func (r *recordingTB) FailNow()         { r.record("FailNow", false); runtime.Goexit() }
func (r *recordingTB) Skip(args ...any) { r.record(fmt.Sprint(args...), true); runtime.Goexit() }
func (r *recordingTB) Skipf(f string, args ...any) {
	r.record(fmt.Sprintf(f, args...), true)
	runtime.Goexit()
}
func (r *recordingTB) SkipNow() { r.record("SkipNow", true); runtime.Goexit() }
func (r *recordingTB) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

// Outcome is how a test run by FailureOf or OutcomeOf ended.
type Outcome struct {
	Failed, Skipped bool
	// Message is what it failed or skipped with, lines joined.
	Message string
}

// OutcomeOf runs fn with a testing.TB that records failures and skips
// (fn runs on a goroutine of its own: a Fatal or Skip ends it) and returns
// how fn's test ended.
func OutcomeOf(t *testing.T, fn func(tb testing.TB)) Outcome {
	t.Helper()
	tb := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return Outcome{Failed: tb.failed, Skipped: tb.skipped, Message: strings.Join(tb.msgs, "\n")}
}

// FailureOf is OutcomeOf for a test that must fail: it fails t if fn's
// test did not, and returns what it failed with.
func FailureOf(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	o := OutcomeOf(t, fn)
	if !o.Failed {
		t.Fatalf("the kit passed a test it should have failed (skipped: %t %s)", o.Skipped, o.Message)
	}
	return o.Message
}
