package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime"
)

// TestMain fails the package if any goroutine outlives the tests: Close
// on either side must leave nothing behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testJob         = "job-1"
	testFingerprint = "plan-fingerprint-1"
	testEpoch       = 7
)

// logs is a test's log: written to the test's output and kept for checks.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func testLogger(t *testing.T) (*slog.Logger, *logs) {
	l := &logs{}
	w := io.MultiWriter(t.Output(), l)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})), l
}

// lostEvent is a WorkerLost call.
type lostEvent struct {
	worker string
	cause  error
}

// coordRecorder is a CoordinatorHandler that records every call in order.
type coordRecorder struct {
	mu     sync.Mutex
	events []any
}

func (r *coordRecorder) add(e any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	return nil
}

func (r *coordRecorder) Acknowledge(m runtime.AcknowledgeCheckpoint) error { return r.add(m) }
func (r *coordRecorder) Decline(m runtime.DeclineCheckpoint) error         { return r.add(m) }
func (r *coordRecorder) Report(m runtime.TaskEvent) error                  { return r.add(m) }
func (r *coordRecorder) WorkerRegistered(w WorkerInfo)                     { _ = r.add(w) }
func (r *coordRecorder) WorkerLost(id string, cause error)                 { _ = r.add(lostEvent{id, cause}) }

func (r *coordRecorder) snapshot() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// await waits for n events and returns them all.
func (r *coordRecorder) await(t *testing.T, what string, n int) []any {
	t.Helper()
	testutil.Await(t, what, func() bool { return len(r.snapshot()) >= n })
	return r.snapshot()
}

// lost waits for a WorkerLost of worker and returns its cause.
func (r *coordRecorder) lost(t *testing.T, worker string) error {
	t.Helper()
	var cause error
	testutil.Await(t, "worker "+worker+" reported lost", func() bool {
		for _, e := range r.snapshot() {
			if l, ok := e.(lostEvent); ok && l.worker == worker {
				cause = l.cause
				return true
			}
		}
		return false
	})
	return cause
}

// cancelEvent is a WorkerHandler.Cancel call.
type cancelEvent struct {
	job     string
	attempt int
}

type stopEvent struct{ to runtime.TaskRef }
type drainEvent struct{ to runtime.TaskRef }
type savepointEvent struct {
	id  int64
	dir string
}

// workerRecorder is a WorkerHandler (also a TaskStopper and a
// SavepointLocator) that records every call in order.
type workerRecorder struct {
	mu        sync.Mutex
	events    []any
	deployErr error
}

func (r *workerRecorder) add(e any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	return nil
}

func (r *workerRecorder) Deploy(d Deployment) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, d)
	return r.deployErr
}

func (r *workerRecorder) setDeployErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deployErr = err
}

func (r *workerRecorder) Cancel(job string, attempt int) { _ = r.add(cancelEvent{job, attempt}) }
func (r *workerRecorder) TriggerCheckpoint(m runtime.TriggerCheckpoint) error {
	return r.add(m)
}
func (r *workerRecorder) NotifyCheckpoint(m runtime.CheckpointNotification) error {
	return r.add(m)
}
func (r *workerRecorder) AllowFinish(to runtime.TaskRef) error    { return r.add(to) }
func (r *workerRecorder) StopTask(to runtime.TaskRef) error       { return r.add(stopEvent{to}) }
func (r *workerRecorder) DrainEventTime(to runtime.TaskRef) error { return r.add(drainEvent{to}) }
func (r *workerRecorder) SetSavepointDir(id int64, dir string)    { _ = r.add(savepointEvent{id, dir}) }

func (r *workerRecorder) snapshot() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *workerRecorder) await(t *testing.T, what string, n int) []any {
	t.Helper()
	testutil.Await(t, what, func() bool { return len(r.snapshot()) >= n })
	return r.snapshot()
}

// worker is worker id's session, nil when it has none.
func (s *Server) worker(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workers[id]
}

// newServer starts a server on loopback, closed when the test ends.
func newServer(t *testing.T, mod func(*ServerConfig)) (*Server, *coordRecorder, *logs) {
	t.Helper()
	log, l := testLogger(t)
	cfg := ServerConfig{ListenAddr: "127.0.0.1:0", Fingerprint: testFingerprint, Epoch: testEpoch, JobID: testJob, Logger: log}
	if mod != nil {
		mod(&cfg)
	}
	rec := &coordRecorder{}
	s, err := NewServer(cfg, rec)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, rec, l
}

// dial registers worker id with s, closed when the test ends.
func dial(t *testing.T, s *Server, id string, mod func(*ClientConfig)) (*Client, *workerRecorder, *logs) {
	t.Helper()
	c, rec, l, err := tryDial(t, s.Addr(), id, mod)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	return c, rec, l
}

func tryDial(t *testing.T, addr, id string, mod func(*ClientConfig)) (*Client, *workerRecorder, *logs, error) {
	t.Helper()
	log, l := testLogger(t)
	cfg := ClientConfig{
		CoordinatorAddr: addr, WorkerID: id, Slots: 4, DataAddr: "10.0.0.9:7000",
		Fingerprint: testFingerprint, Host: "host-" + id, Logger: log,
	}
	if mod != nil {
		mod(&cfg)
	}
	rec := &workerRecorder{}
	c, err := Dial(testutil.Context(t, 0), cfg, rec)
	if err != nil {
		return nil, rec, l, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, rec, l, nil
}

// awaitLost waits for the client's Lost and returns the cause.
func awaitLost(t *testing.T, c *Client) error {
	t.Helper()
	select {
	case err := <-c.Lost():
		return err
	case <-testutil.Context(t, 0).Done():
		t.Fatal("timed out (safety net) waiting for the client to lose its coordinator")
		return nil
	}
}

// deploy deploys attempt to worker w1 running tasks, all on w1.
func deploy(t *testing.T, s *Server, worker string, attempt int, tasks ...checkpoint.TaskID) {
	t.Helper()
	placement := make([]string, 8)
	for i := range placement {
		placement[i] = worker
	}
	err := s.Deploy(context.Background(), worker, Deployment{Attempt: attempt, Tasks: tasks, Placement: placement,
		Peers: map[string]string{worker: "10.0.0.9:7000"}})
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
}

func ref(attempt int, task checkpoint.TaskID) runtime.TaskRef {
	// An execution too (a failover region's restart): every field must
	// cross the wire.
	return runtime.TaskRef{JobID: testJob, Attempt: attempt, Task: task, Execution: 1}
}

// suppressErr is an error that suppresses restarts, as the runtime's and
// the Kafka sink's terminal errors do.
type suppressErr struct{ msg string }

func (e *suppressErr) Error() string          { return e.msg }
func (e *suppressErr) SuppressRestarts() bool { return true }

// requireAllSet fails for every zero, nil or empty field reachable from v,
// and for every unexported one (JSON would not carry it): a round trip of
// such a value shows that every field travels. A field added to a message
// fails here until the test fills it, and then the round trip checks it.
func requireAllSet(t *testing.T, name string, v any) {
	t.Helper()
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Interface:
			if v.IsNil() {
				t.Errorf("%s is nil", path)
			}
		case reflect.Pointer:
			if v.IsNil() {
				t.Errorf("%s is nil", path)
				return
			}
			walk(path, v.Elem())
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if !f.IsExported() {
					t.Errorf("%s.%s is unexported: the wire does not carry it", path, f.Name)
					continue
				}
				walk(path+"."+f.Name, v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			if v.Len() == 0 {
				t.Errorf("%s is empty", path)
			}
			for i := range v.Len() {
				walk(fmt.Sprintf("%s[%d]", path, i), v.Index(i))
			}
		case reflect.Map:
			if v.Len() == 0 {
				t.Errorf("%s is empty", path)
			}
			for _, k := range v.MapKeys() {
				walk(fmt.Sprintf("%s[%v]", path, k), v.MapIndex(k))
			}
		default:
			if v.IsZero() {
				t.Errorf("%s is zero", path)
			}
		}
	}
	walk(name, reflect.ValueOf(v))
}

// sameError reports whether got is a RemoteError with want's text and
// SuppressRestarts answer.
func sameError(t *testing.T, what string, got, want error) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("%s: error %v, want %v", what, got, want)
	}
	if want == nil {
		return
	}
	var re *RemoteError
	if !errors.As(got, &re) {
		t.Errorf("%s: error %T is not a *RemoteError", what, got)
	}
	if got.Error() != want.Error() {
		t.Errorf("%s: error text %q, want %q", what, got, want)
	}
	if suppressesRestarts(got) != suppressesRestarts(want) {
		t.Errorf("%s: SuppressRestarts %t, want %t", what, suppressesRestarts(got), suppressesRestarts(want))
	}
}

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s %q does not say %q", what, s, sub)
		}
	}
}
