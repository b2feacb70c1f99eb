package control

import (
	"context"
	"errors"
	"math"
	"net"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime"
)

func TestRegisterDeployCancel(t *testing.T) {
	s, coord, _ := newServer(t, nil)
	c, worker, _ := dial(t, s, "w1", nil)

	ev := coord.await(t, "the registration", 1)
	w, ok := ev[0].(WorkerInfo)
	if !ok {
		t.Fatalf("first event %#v, want the WorkerRegistered", ev[0])
	}
	if w.ID != "w1" || w.Slots != 4 || w.DataAddr != "10.0.0.9:7000" || w.Fingerprint != testFingerprint ||
		w.Host != "host-w1" || w.RemoteAddr == "" || w.Registered.IsZero() {
		t.Errorf("registered %+v", w)
	}
	if got := s.Workers(); len(got) != 1 || !reflect.DeepEqual(got[0], w) {
		t.Errorf("Workers() = %+v, want [%+v]", got, w)
	}
	if c.Epoch() != testEpoch || c.JobID() != testJob {
		t.Errorf("client epoch %d job %q, want %d %q", c.Epoch(), c.JobID(), testEpoch, testJob)
	}

	d := Deployment{
		JobID: testJob, Attempt: 3, Epoch: 0, // Deploy sets the epoch
		Tasks:          []checkpoint.TaskID{1, 4},
		Placement:      []string{"w2", "w1", "w2", "w2", "w1"},
		Peers:          map[string]string{"w1": "10.0.0.9:7000", "w2": "10.0.0.8:7000"},
		RunID:          "run-42",
		Restore:        "s3://bucket/ckpt/job-1/chk-17",
		RestoreOwned:   true,
		Parallelism:    []int{3, 5},
		RegionFailover: true,
		Extra:          []byte{1, 2, 3, 0xff},
	}
	if err := s.Deploy(context.Background(), "w1", d); err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	got := worker.snapshot()
	if len(got) != 1 {
		t.Fatalf("worker handler calls %#v, want the deployment (Deploy returns after the worker took it)", got)
	}
	want := d
	want.Epoch = testEpoch
	requireAllSet(t, "Deployment", got[0])
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("worker received\n%#v\nwant\n%#v", got[0], want)
	}

	// A deployment the worker fails: its error, with the same
	// SuppressRestarts answer.
	worker.setDeployErr(&suppressErr{"no room for task 4: slots exhausted"})
	err := s.Deploy(context.Background(), "w1", Deployment{Attempt: 4, Tasks: []checkpoint.TaskID{4}})
	if !errors.Is(err, ErrDeployFailed) || !suppressesRestarts(err) {
		t.Fatalf("failed Deploy: %v (suppresses restarts: %t), want ErrDeployFailed that suppresses restarts", err, suppressesRestarts(err))
	}
	mustContain(t, "the error", err.Error(), "no room for task 4: slots exhausted", "w1", "attempt 4")
	worker.setDeployErr(nil)

	if err := s.Cancel("w1", testJob, 4); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	got = worker.await(t, "the cancel", 3)
	if got[2] != (cancelEvent{testJob, 4}) {
		t.Errorf("worker handler got %#v, want the cancel of attempt 4", got[2])
	}

	if err := s.Deploy(context.Background(), "w9", Deployment{Attempt: 4}); !errors.Is(err, ErrUnknownWorker) {
		t.Errorf("Deploy to an unknown worker: %v, want ErrUnknownWorker", err)
	}
	if err := s.Cancel("w9", testJob, 4); !errors.Is(err, ErrUnknownWorker) {
		t.Errorf("Cancel on an unknown worker: %v, want ErrUnknownWorker", err)
	}
	if err := s.Deploy(context.Background(), "w1", Deployment{JobID: "job-2", Attempt: 5}); !errors.Is(err, runtime.ErrStaleMessage) {
		t.Errorf("Deploy of another job: %v, want ErrStaleMessage", err)
	}
	if err := s.Deploy(context.Background(), "w1", Deployment{Attempt: 2}); !errors.Is(err, runtime.ErrStaleMessage) {
		t.Errorf("Deploy of an older attempt: %v, want ErrStaleMessage", err)
	}
}

func TestFingerprintMismatchRefused(t *testing.T) {
	s, coord, _ := newServer(t, nil)
	_, _, _, err := tryDial(t, s.Addr(), "w1", func(c *ClientConfig) { c.Fingerprint = "plan-fingerprint-OTHER" })
	if !errors.Is(err, ErrFingerprintMismatch) || !errors.Is(err, ErrRefused) {
		t.Fatalf("Dial with another plan: %v, want ErrFingerprintMismatch and ErrRefused", err)
	}
	mustContain(t, "the error", err.Error(), "plan-fingerprint-OTHER", testFingerprint, "runs different code", "w1")
	if w := s.Workers(); len(w) != 0 {
		t.Errorf("a refused worker is registered: %+v", w)
	}
	if ev := coord.snapshot(); len(ev) != 0 {
		t.Errorf("a refused worker was reported: %#v", ev)
	}

	// A worker that followed a newer leader refuses this one.
	_, _, _, err = tryDial(t, s.Addr(), "w1", func(c *ClientConfig) { c.MinEpoch = testEpoch + 1 })
	if !errors.Is(err, ErrStaleEpoch) || !errors.Is(err, ErrRefused) {
		t.Fatalf("Dial of a coordinator of an older epoch: %v, want ErrStaleEpoch and ErrRefused", err)
	}
	// The worker still registers with the right plan.
	dial(t, s, "w1", func(c *ClientConfig) { c.MinEpoch = testEpoch })
	coord.await(t, "the registration", 1)
}

// Dial fails when nobody listens, and when the other end never answers
// (bounded by heartbeat.timeout, or by ctx).
func TestDialBounded(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	if _, _, _, err := tryDial(t, addr, "w1", nil); !errors.Is(err, ErrDisconnected) {
		t.Errorf("Dial with nobody listening: %v, want ErrDisconnected", err)
	}

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- conn // held open, never answered
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		for conn := range accepted {
			conn.Close()
		}
	})
	_, _, _, err = tryDial(t, silent.Addr().String(), "w1", func(c *ClientConfig) {
		c.HeartbeatInterval, c.HeartbeatTimeout = testInterval, testShortTimeout
	})
	if !errors.Is(err, ErrHeartbeatTimeout) {
		t.Errorf("Dial of a silent peer: %v, want ErrHeartbeatTimeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Dial(ctx, ClientConfig{CoordinatorAddr: silent.Addr().String(), WorkerID: "w1", Fingerprint: "f"}, &workerRecorder{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Dial with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestInvalidConfig(t *testing.T) {
	for name, cfg := range map[string]ServerConfig{
		"no address":     {Fingerprint: "f", JobID: "j"},
		"no job":         {ListenAddr: "127.0.0.1:0", Fingerprint: "f"},
		"no fingerprint": {ListenAddr: "127.0.0.1:0", JobID: "j"},
		"timeout <= interval": {ListenAddr: "127.0.0.1:0", Fingerprint: "f", JobID: "j",
			HeartbeatInterval: 10, HeartbeatTimeout: 10},
	} {
		if _, err := NewServer(cfg, &coordRecorder{}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: NewServer: %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := Dial(context.Background(), ClientConfig{CoordinatorAddr: "127.0.0.1:1", Fingerprint: "f"}, &workerRecorder{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Dial without a worker id: %v, want ErrInvalidConfig", err)
	}
}

func TestStaleMessagesDropped(t *testing.T) {
	s, coord, slogs := newServer(t, nil)
	c, worker, clog := dial(t, s, "w1", nil)
	coord.await(t, "the registration", 1)
	deploy(t, s, "w1", 3, 0, 1)
	worker.await(t, "the deployment", 1)
	ss := s.worker("w1")

	// Coordinator -> worker. Raw frames past the server's own checks.
	raw := func(l *link, f *frame) {
		t.Helper()
		b, err := encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.enqueue(chunks(b)...); err != nil {
			t.Fatal(err)
		}
	}
	trigger := func(attempt int, id int64) *frame {
		m := runtime.TriggerCheckpoint{To: ref(attempt, 1), Barrier: checkpoint.Barrier{ID: id}}
		return &frame{Epoch: testEpoch, JobID: testJob, Attempt: attempt, Trigger: &m}
	}
	old := trigger(3, 100)
	old.Epoch = testEpoch - 1
	raw(ss.l, old)                                                                                                  // an older leader's
	raw(ss.l, trigger(2, 101))                                                                                      // an older attempt's
	raw(ss.l, &frame{Epoch: testEpoch, JobID: testJob, Attempt: 2, Cancel: &cancelMsg{JobID: testJob, Attempt: 2}}) // cancel of an older attempt
	other := trigger(3, 102)
	other.JobID, other.Trigger.To.JobID = "job-2", "job-2"
	raw(ss.l, other)                // another job's
	inconsistent := trigger(3, 103) // header attempt 3, payload attempt 2
	inconsistent.Trigger.To.Attempt = 2
	raw(ss.l, inconsistent)
	if err := s.Cancel("w1", testJob, 1); err != nil { // the server sends it; the worker drops it
		t.Fatal(err)
	}
	tg := s.TaskGateway(nil)
	if err := tg.TriggerCheckpoint(runtime.TriggerCheckpoint{To: ref(2, 1), Barrier: checkpoint.Barrier{ID: 104}}); !errors.Is(err, runtime.ErrStaleMessage) {
		t.Errorf("task gateway, an older attempt: %v, want ErrStaleMessage", err)
	}
	if err := tg.AllowFinish(runtime.TaskRef{JobID: "job-2", Attempt: 3, Task: 1}); !errors.Is(err, runtime.ErrStaleMessage) {
		t.Errorf("task gateway, another job: %v, want ErrStaleMessage", err)
	}
	if err := tg.AllowFinish(ref(3, 99)); !errors.Is(err, ErrUnknownWorker) {
		t.Errorf("task gateway, a task placed nowhere: %v, want ErrUnknownWorker", err)
	}
	if err := tg.TriggerCheckpoint(runtime.TriggerCheckpoint{To: ref(3, 1), Barrier: checkpoint.Barrier{ID: 105}}); err != nil {
		t.Fatal(err)
	}
	got := worker.await(t, "the current trigger", 2)
	if m, ok := got[1].(runtime.TriggerCheckpoint); len(got) != 2 || !ok || m.Barrier.ID != 105 {
		t.Errorf("worker handler calls after the deployment: %#v, want only trigger 105 (stale ones dropped)", got[1:])
	}

	// Worker -> coordinator.
	ack := func(attempt int, id int64) *frame {
		m := runtime.AcknowledgeCheckpoint{From: ref(attempt, 1), CheckpointID: id}
		return &frame{Epoch: testEpoch, JobID: testJob, Attempt: attempt, Ack: &m}
	}
	oldAck := ack(3, 200)
	oldAck.Epoch = testEpoch - 1
	raw(c.l, oldAck)
	raw(c.l, ack(2, 201))
	cg := c.CoordinatorGateway()
	if err := cg.Acknowledge(runtime.AcknowledgeCheckpoint{From: ref(2, 1), CheckpointID: 202}); !errors.Is(err, runtime.ErrStaleMessage) {
		t.Errorf("coordinator gateway, an older attempt: %v, want ErrStaleMessage", err)
	}
	if err := cg.Report(runtime.TaskEvent{From: runtime.TaskRef{JobID: "job-2", Attempt: 3}}); !errors.Is(err, runtime.ErrStaleMessage) {
		t.Errorf("coordinator gateway, another job: %v, want ErrStaleMessage", err)
	}
	if err := cg.Acknowledge(runtime.AcknowledgeCheckpoint{From: ref(3, 1), CheckpointID: 203}); err != nil {
		t.Fatal(err)
	}
	ev := coord.await(t, "the current acknowledgement", 2)
	if m, ok := ev[1].(runtime.AcknowledgeCheckpoint); len(ev) != 2 || !ok || m.CheckpointID != 203 {
		t.Errorf("coordinator handler calls after the registration: %#v, want only ack 203", ev[1:])
	}

	// Both sides said so at debug level.
	mustContain(t, "the worker's log", clog.String(), `level=DEBUG msg="control: stale message dropped: another leader epoch"`,
		`level=DEBUG msg="control: stale message dropped"`, "message=cancel", "job=job-2", `level=WARN msg="control: malformed message dropped`)
	mustContain(t, "the coordinator's log", slogs.String(), `level=DEBUG msg="control: stale message dropped: another leader epoch"`,
		`level=DEBUG msg="control: stale message dropped"`, "attempt=2")
}

// A worker that registers again replaces its session: WorkerLost of the
// old one (ErrReplaced) comes before WorkerRegistered of the new one.
func TestReregistrationReplaces(t *testing.T) {
	s, coord, _ := newServer(t, nil)
	first, _, _ := dial(t, s, "w1", func(c *ClientConfig) { c.Instance = "process-1" })
	coord.await(t, "the first registration", 1)
	// Another process with the id is refused while the session lives.
	if _, _, _, err := tryDial(t, s.Addr(), "w1", func(c *ClientConfig) { c.Instance = "process-2" }); !errors.Is(err, ErrIdentityMismatch) {
		t.Fatalf("Dial of another process as w1: %v, want ErrIdentityMismatch", err)
	}
	dial(t, s, "w1", func(c *ClientConfig) { c.DataAddr, c.Instance = "10.0.0.9:7001", "process-1" })
	ev := coord.await(t, "the second registration", 3)
	if l, ok := ev[1].(lostEvent); !ok || l.worker != "w1" || !errors.Is(l.cause, ErrReplaced) {
		t.Errorf("second event %#v, want w1 lost with ErrReplaced", ev[1])
	}
	if w, ok := ev[2].(WorkerInfo); !ok || w.DataAddr != "10.0.0.9:7001" {
		t.Errorf("third event %#v, want the new registration", ev[2])
	}
	if err := awaitLost(t, first); !errors.Is(err, ErrDisconnected) {
		t.Errorf("the replaced client lost its coordinator with %v, want ErrDisconnected", err)
	}
	if w := s.Workers(); len(w) != 1 || w[0].DataAddr != "10.0.0.9:7001" {
		t.Errorf("Workers() = %+v, want the new session only", w)
	}
}

func TestClientCloseReportedLost(t *testing.T) {
	s, coord, _ := newServer(t, nil)
	c, _, _ := dial(t, s, "w1", nil)
	coord.await(t, "the registration", 1)
	deploy(t, s, "w1", 1, 0)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := coord.lost(t, "w1"); !errors.Is(err, ErrDisconnected) {
		t.Errorf("worker lost with %v, want ErrDisconnected", err)
	}
	if err := awaitLost(t, c); !errors.Is(err, ErrClosed) {
		t.Errorf("the closed client's Lost: %v, want ErrClosed", err)
	}
	if _, open := <-c.Lost(); open {
		t.Error("Lost is not closed after its cause")
	}
	if err := c.CoordinatorGateway().Report(runtime.TaskEvent{From: ref(1, 0), Kind: runtime.ReportFinished}); !errors.Is(err, ErrClosed) {
		t.Errorf("gateway of a closed client: %v, want ErrClosed", err)
	}
	if w := s.Workers(); len(w) != 0 {
		t.Errorf("Workers() = %+v after the worker left", w)
	}
	if err := s.TaskGateway(nil).AllowFinish(ref(1, 0)); !errors.Is(err, ErrUnknownWorker) {
		t.Errorf("task gateway to a lost worker: %v, want ErrUnknownWorker", err)
	}
}

func TestServerCloseReportedLost(t *testing.T) {
	s, coord, _ := newServer(t, nil)
	c, _, _ := dial(t, s, "w1", nil)
	coord.await(t, "the registration", 1)
	deploy(t, s, "w1", 1, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := awaitLost(t, c); !errors.Is(err, ErrDisconnected) {
		t.Errorf("client lost its coordinator with %v, want ErrDisconnected", err)
	}
	// Close returned after the handler's last call: WorkerLost is there.
	ev := coord.snapshot()
	if l, ok := ev[len(ev)-1].(lostEvent); !ok || !errors.Is(l.cause, ErrClosed) {
		t.Errorf("last event %#v, want w1 lost with ErrClosed", ev[len(ev)-1])
	}
	if err := c.CoordinatorGateway().Report(runtime.TaskEvent{From: ref(1, 0)}); !errors.Is(err, ErrDisconnected) {
		t.Errorf("gateway after the coordinator left: %v, want ErrDisconnected", err)
	}
	if err := s.Deploy(context.Background(), "w1", Deployment{Attempt: math.MaxInt32}); !errors.Is(err, ErrClosed) {
		t.Errorf("Deploy after Close: %v, want ErrClosed", err)
	}
	if err := s.TaskGateway(nil).AllowFinish(ref(1, 0)); !errors.Is(err, ErrClosed) {
		t.Errorf("task gateway after Close: %v, want ErrClosed", err)
	}
}
