package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/ha"
	"github.com/sluicehq/sluice/internal/etcdtest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/runtime/autoscaler"
)

// The parallelism the autoscaler decided outlives the leader: a job the
// autoscaler scaled from 2 to 4 (its count) runs at 4 once a checkpoint
// completed there, the leader stores that in etcd with its fenced
// writes, and the standby that takes over resumes at 4 with the
// decision, without a rescale of its own, instead of the plan's 2. The
// output is exact.
func TestStandbyResumesTheAutoscaledParallelism(t *testing.T) {
	const count = 1 // the count and files vertex; the generator (0) keeps 2
	done := make(chan int64, 1000)
	h := startTakeover(t, []sluice.Option{sluice.WithCheckpointListener(func(s checkpoint.Stats) {
		if s.Status == checkpoint.StatusCompleted {
			done <- s.ID
		}
	})}, nil)
	leader, ctx, etcd, logsB := h.leader, h.ctx, h.etcd, &h.logsB
	awaitCheckpoints := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-done:
			case <-ctx.Done():
				t.Fatal("the leader completed no checkpoint")
			}
		}
	}
	awaitCheckpoints(2)
	if err := leader.Autoscale(map[int]int{count: 4}); err != nil {
		t.Fatalf("autoscale: %v", err)
	}
	testutil.Await(t, "the leader running the count at 4", func() bool {
		hist := leader.RescaleHistory()
		return leader.Graph().Parallelism()[count] == 4 && len(hist) == 1 && hist[0].Outcome == "rescaled"
	})
	services, err := ha.Open(ctx, ha.Config{Endpoints: etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer services.Close()
	var stored runtime.ScalingState
	testutil.Await(t, "the scaling state in etcd at 4", func() bool {
		data, ok, err := services.Scaling(ctx, leader.ID())
		if err != nil {
			t.Fatal(err)
		}
		return ok && json.Unmarshal(data, &stored) == nil && slices.Equal(stored.Parallelism, []int{2, 4})
	})
	if stored.Autoscaled[count] != 4 {
		t.Fatalf("the stored scaling state %+v does not hold the autoscaler's decision", stored)
	}
	next := h.takeOver(t)
	if _, finished := next.PreviousResult(); finished {
		t.Fatal("the job finished before the standby took over; the test needs it midway")
	}
	if got := next.Graph().Parallelism(); !slices.Equal(got, []int{2, 4}) {
		t.Fatalf("the standby runs the job at %v, want the autoscaled [2 4]", got)
	}
	if err := next.Wait(); err != nil {
		t.Fatalf("the second leader's job: %v", err)
	}
	if hist := next.RescaleHistory(); len(hist) != 0 {
		t.Errorf("the standby rescaled the job (%+v); it should have resumed at the autoscaled parallelism", hist)
	}
	if said := logsB.Find("resuming the job's scaling as the last leader left it"); len(said) != 1 {
		t.Errorf("the standby logged %q, want one line saying it resumed the scaling", said)
	}
	h.finish(t)
}

// The autoscaler's memory outlives the leader: its metrics window,
// collected while the first leader ran the job, is the one the standby
// that takes over goes on with (its stabilization clock too): the
// standby's autoscaler collects until the time the first leader's would
// have (Flink's autoscaler keeps its collected metrics in a ConfigMap).
// Without it, the standby stabilizes and collects a whole window of its
// own, from when it took over. The output is exact.
func TestStandbyResumesTheAutoscalersWindow(t *testing.T) {
	// A window that does not fill while the job runs: the autoscaler
	// collects, and says until when.
	withAutoscaler := sluice.WithAutoscaler(func(c *sluice.AutoscalerConfig) {
		c.Enabled, c.Interval, c.Stabilization, c.MetricsWindow = true, 100*time.Millisecond, 300*time.Millisecond, 10*time.Minute
	})
	h := startTakeover(t, []sluice.Option{withAutoscaler}, []sluice.Option{withAutoscaler})
	leader, ctx, etcd := h.leader, h.ctx, h.etcd
	services, err := ha.Open(ctx, ha.Config{Endpoints: etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer services.Close()
	// The first leader's autoscaler collects, and its samples are in
	// etcd.
	var until time.Time
	testutil.Await(t, "the first leader's autoscaler collecting, 5 samples of its window in etcd", func() bool {
		d := autoscaler.Of(leader)
		if d == nil || d.Last().Outcome != autoscaler.Collecting {
			return false
		}
		until = d.Last().Until
		data, ok, err := services.Scaling(ctx, leader.ID())
		if err != nil {
			t.Fatal(err)
		}
		var stored struct {
			Autoscaler struct {
				Machine autoscaler.State `json:"machine"`
			} `json:"autoscaler"`
		}
		return ok && json.Unmarshal(data, &stored) == nil && len(stored.Autoscaler.Machine.Samples) >= 5
	})
	next := h.takeOver(t)
	var outcomes []string
	testutil.Await(t, "the standby's autoscaler evaluating the running job", func() bool {
		d := autoscaler.Of(next)
		if d == nil {
			_, finished := next.Result()
			if finished {
				t.Fatal("the job finished before the standby's autoscaler evaluated it; the test needs it midway")
			}
			return false
		}
		ev := d.Last()
		if n := len(outcomes); ev.Outcome != "" && (n == 0 || outcomes[n-1] != string(ev.Outcome)) {
			outcomes = append(outcomes, string(ev.Outcome))
		}
		return ev.Outcome != "" && ev.Outcome != autoscaler.NotRunning
	})
	if ev := autoscaler.Of(next).Last(); ev.Outcome != autoscaler.Collecting || !ev.Until.Equal(until) {
		t.Errorf("the standby's autoscaler: %s until %v (outcomes %v), want collecting until %v as the first leader's: its window",
			ev.Outcome, ev.Until, outcomes, until)
	}
	if said := h.logsB.Find("autoscaler resumes the state kept"); len(said) != 1 {
		t.Errorf("the standby logged %q, want one line saying its autoscaler resumed", said)
	}
	h.finish(t)
}

// takeover is the keyed count on two workers under etcd HA, led by one
// coordinator with a standby campaigning beside it (whose logs logsB
// records).
type takeover struct {
	j       job
	etcd    *etcdtest.Server
	ctx     context.Context
	leader  *sluice.Job
	suspend func()
	standby chan *sluice.Job
	next    *sluice.Job
	logsB   testutil.LogRecorder
	workers []func() []error
}

// startTakeover starts the leader (with leaderOpts), the standby (with
// standbyOpts) and the workers.
func startTakeover(t *testing.T, leaderOpts, standbyOpts []sluice.Option) *takeover {
	t.Helper()
	h := &takeover{j: job{records: 12000, keys: 12, rate: 2000, par: 2, cpDir: t.TempDir(), out: t.TempDir()}, etcd: etcdtest.StartServer(t),
		standby: make(chan *sluice.Job, 1)}
	coordinator := cluster.Config{Role: cluster.RoleCoordinator, Listen: "127.0.0.1:0", Host: "127.0.0.1", EtcdEndpoints: h.etcd.Endpoints(),
		LeaseDuration: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second}
	ctxA, suspend := context.WithCancel(context.Background())
	t.Cleanup(suspend)
	h.suspend = suspend
	var err error
	if h.leader, err = h.j.env(coordinator, leaderOpts...).ExecuteAsync(ctxA); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	t.Cleanup(cancel)
	h.ctx = ctx
	go func() {
		jb, err := h.j.env(coordinator, append(standbyOpts, sluice.WithLogger(h.logsB.Logger()))...).ExecuteAsync(ctx)
		if err != nil {
			t.Errorf("standby coordinator: %v", err)
		}
		h.standby <- jb
	}()
	for i := range 2 {
		h.workers = append(h.workers, haWorker(t, h.j, h.etcd, i))
	}
	return h
}

// takeOver suspends the leader and returns the standby's job once it
// took over.
func (h *takeover) takeOver(t *testing.T) *sluice.Job {
	t.Helper()
	h.suspend()
	if err := h.leader.Wait(); !errors.Is(err, sluice.ErrJobSuspended) {
		t.Fatalf("the first leader: %v, want suspended", err)
	}
	select {
	case h.next = <-h.standby:
	case <-h.ctx.Done():
		t.Fatal("the standby never took over")
	}
	if h.next == nil {
		t.FailNow()
	}
	return h.next
}

// finish waits for the second leader's job and the workers to end, and
// checks the output is exact.
func (h *takeover) finish(t *testing.T) {
	t.Helper()
	if err := h.next.Wait(); err != nil {
		t.Fatalf("the second leader's job: %v", err)
	}
	for _, w := range h.workers {
		for i, err := range w() {
			if err != nil {
				t.Errorf("worker %d: %v", i, err)
			}
		}
	}
	checkExact(t, h.j.out, h.j.records, h.j.keys)
}

// haWorker starts worker i of two slots, finding its coordinator in etcd;
// it runs until the job ends.
func haWorker(t *testing.T, j job, etcd *etcdtest.Server, i int) func() []error {
	t.Helper()
	errs := make(chan error, 1)
	go func() {
		c := cluster.Config{Role: cluster.RoleWorker, Slots: 2, WorkerID: "w" + string(rune('0'+i)), DataListen: "127.0.0.1:0",
			Host: "127.0.0.1", EtcdEndpoints: etcd.Endpoints(), HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
		defer cancel()
		errs <- j.env(c).Execute(ctx)
	}()
	return func() []error { return []error{<-errs} }
}
