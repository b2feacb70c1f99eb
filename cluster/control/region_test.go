package control

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime"
)

// regionEvent is a RegionHandler call: its step and what it carried.
type regionEvent struct {
	step    string
	attempt int
	tasks   []runtime.TaskRef
	d       runtime.RegionDeployment
}

// regionRecorder is a workerRecorder that restarts regions: it records
// every step; a stop waits for release when it is set, a step fails with
// err when it is.
type regionRecorder struct {
	workerRecorder
	release chan struct{}
	err     error
}

func (r *regionRecorder) StopTasks(ctx context.Context, attempt int, tasks []runtime.TaskRef) error {
	if r.release != nil {
		select {
		case <-r.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	_ = r.add(regionEvent{step: regionStop, attempt: attempt, tasks: tasks})
	return r.err
}

func (r *regionRecorder) DeployTasks(_ context.Context, d runtime.RegionDeployment) error {
	_ = r.add(regionEvent{step: regionDeploy, attempt: d.Attempt, d: d})
	return r.err
}

func (r *regionRecorder) StartTasks(attempt int, tasks []runtime.TaskRef) error {
	_ = r.add(regionEvent{step: regionStart, attempt: attempt, tasks: tasks})
	return r.err
}

// dialHandler registers worker id with s, handled by h.
func dialHandler(t *testing.T, s *Server, id string, h WorkerHandler) *Client {
	t.Helper()
	log, _ := testLogger(t)
	c, err := Dial(testutil.Context(t, 0), ClientConfig{CoordinatorAddr: s.Addr(), WorkerID: id, Slots: 1, DataAddr: "10.0.0.9:7000",
		Fingerprint: testFingerprint, Host: "host-" + id, Logger: log}, h)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The steps of a failover region's restart cross the wire whole, each
// answered: the worker's error comes back (wrapping ErrDeployFailed, its
// SuppressRestarts answer kept); a step of an attempt that is not current
// is refused before it is sent, and a worker that did not say it restarts
// regions (older code) is never asked.
func TestRegionMessagesRoundTrip(t *testing.T) {
	s, coord, _ := newServer(t, nil)
	rec := &regionRecorder{}
	dialHandler(t, s, "w1", rec)
	plain := &workerRecorder{}
	dialHandler(t, s, "w2", plain)
	coord.await(t, "the registrations", 2)
	for _, w := range s.Workers() {
		if want := w.ID == "w1"; w.RegionRestart != want {
			t.Errorf("worker %s: RegionRestart %t, want %t", w.ID, w.RegionRestart, want)
		}
	}
	deploy(t, s, "w1", 3, 5, 6)
	ctx := testutil.Context(t, 0)

	old := []runtime.TaskRef{ref(3, 5), ref(3, 6)}
	d := runtime.RegionDeployment{JobID: testJob, RunID: "run-1", Attempt: 3,
		Tasks:           []runtime.TaskRef{{JobID: testJob, Attempt: 3, Task: 5, Execution: 2}, {JobID: testJob, Attempt: 3, Task: 6, Execution: 2}},
		OperatorAttempt: 4, Restore: "s3://bucket/job-1/chk-42", RestoreOwned: true}
	requireAllSet(t, "RegionDeployment", d)
	if err := s.StopTasks(ctx, "w1", 3, old); err != nil {
		t.Fatalf("StopTasks: %v", err)
	}
	if err := s.DeployTasks(ctx, "w1", d); err != nil {
		t.Fatalf("DeployTasks: %v", err)
	}
	if err := s.StartTasks(ctx, "w1", 3, d.Tasks); err != nil {
		t.Fatalf("StartTasks: %v", err)
	}
	want := []any{
		regionEvent{step: regionStop, attempt: 3, tasks: old},
		regionEvent{step: regionDeploy, attempt: 3, d: d},
		regionEvent{step: regionStart, attempt: 3, tasks: d.Tasks},
	}
	got := rec.snapshot()[1:] // after the deployment
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the worker saw\n%#v\nwant\n%#v", got, want)
	}

	// The worker's error comes back as it was.
	rec.mu.Lock()
	rec.err = &suppressErr{msg: "restore of task 5: no such checkpoint"}
	rec.mu.Unlock()
	err := s.DeployTasks(ctx, "w1", d)
	if !errors.Is(err, ErrDeployFailed) || !suppressesRestarts(err) {
		t.Fatalf("a failed deploy: %v (suppresses restarts: %t), want ErrDeployFailed that suppresses restarts", err, suppressesRestarts(err))
	}
	mustContain(t, "the failed deploy's error", err.Error(), "restore of task 5: no such checkpoint", "w1")

	// Refused before they are sent.
	n := len(rec.snapshot())
	if err := s.StopTasks(ctx, "w1", 2, []runtime.TaskRef{ref(2, 5)}); !errors.Is(err, runtime.ErrStaleMessage) {
		t.Errorf("a stop of attempt 2 while 3 is current: %v, want ErrStaleMessage", err)
	}
	if err := s.StopTasks(ctx, "w2", 3, []runtime.TaskRef{ref(3, 7)}); !errors.Is(err, ErrRegionUnsupported) {
		t.Errorf("a stop on a worker that restarts no regions: %v, want ErrRegionUnsupported", err)
	}
	if got := len(rec.snapshot()); got != n {
		t.Errorf("the refused steps reached the worker: %d events, want %d", got, n)
	}
	for _, e := range plain.snapshot() {
		if _, ok := e.(regionEvent); ok {
			t.Errorf("the worker without regions got %#v", e)
		}
	}
}

// A stop waits for the tasks on a goroutine of its own: the gateway
// messages for the worker's other tasks are handled meanwhile, and the
// stop is answered once it is done.
func TestRegionStopDoesNotHoldOtherMessages(t *testing.T) {
	s, coord, _ := newServer(t, nil)
	rec := &regionRecorder{release: make(chan struct{})}
	dialHandler(t, s, "w1", rec)
	coord.await(t, "the registration", 1)
	deploy(t, s, "w1", 3, 5, 6)
	ctx := testutil.Context(t, 0)

	stopped := make(chan error, 1)
	go func() { stopped <- s.StopTasks(ctx, "w1", 3, []runtime.TaskRef{ref(3, 5)}) }()
	tg := s.TaskGateway(func(checkpoint.TaskID) string { return "w1" })
	notify := runtime.CheckpointNotification{To: ref(3, 6), CheckpointID: 9, Complete: true}
	if err := tg.NotifyCheckpoint(notify); err != nil {
		t.Fatal(err)
	}
	testutil.Await(t, "the notification of the task that runs on", func() bool {
		for _, e := range rec.snapshot() {
			if e == any(notify) {
				return true
			}
		}
		return false
	})
	select {
	case err := <-stopped:
		t.Fatalf("the stop was answered before its tasks stopped: %v", err)
	default:
	}
	close(rec.release)
	if err := <-stopped; err != nil {
		t.Fatalf("StopTasks: %v", err)
	}
}
