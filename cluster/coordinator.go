package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/cluster/control"
	"github.com/sluicehq/sluice/cluster/ha"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/runtime"
)

// ErrFingerprintMismatch: a worker built another plan than the
// coordinator's (other code or configuration); it is refused.
var ErrFingerprintMismatch = control.ErrFingerprintMismatch

// ErrWorkerLost fails the attempt whose tasks ran on a worker that
// stopped answering or whose connection broke.
var ErrWorkerLost = errors.New("worker lost")

// ErrLeadershipLost ends the job of a coordinator that lost its
// leadership (its lease expired, another coordinator was elected, a
// fenced write was refused): Job.Wait's error wraps it (and
// ErrJobSuspended: the new leader carries the job on). A suspension by
// the caller (SIGTERM, a cancelled context) does not.
var ErrLeadershipLost = errors.New("lost the job's leadership")

// StartCoordinator starts the coordinator of the job plan builds: the
// control plane on cfg.Listen, and the job itself (runtime.Execute) with
// an executor that places every attempt's tasks on the workers that
// register. With HA it first becomes the job's leader (standing by while
// another coordinator leads), resumes the job from the checkpoint the
// job's pointer in etcd names (checked against storage), moves the pointer,
// fenced by its epoch, before any sink commits, and suspends the job when
// it loses the leadership. The returned Job is the job as in one process:
// the API, metrics and savepoints work on it.
func StartCoordinator(ctx context.Context, plan *runtime.Plan, rcfg runtime.Config, cfg Config) (*runtime.Job, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g, err := runtime.Compile(plan, rcfg)
	if err != nil {
		return nil, err
	}
	logger := rcfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	jobID := runtime.JobIDOf(rcfg, g)
	fingerprint := planFingerprint(g, rcfg)
	c := &coordinator{cfg: cfg, logger: logger.With("role", "coordinator"), jobID: jobID, slots: g.Slots(),
		changed: make(chan struct{}), current: -1}
	auth, err := cfg.authenticator(c.logger)
	if err != nil {
		return nil, fmt.Errorf("coordinator of job %s: %w", jobID, err)
	}
	// Bound before the election: the address published in etcd is the
	// port bound (not :0), and a standby refuses a bad configuration now.
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("coordinator of job %s: listen on %s: %w", jobID, cfg.Listen, err)
	}
	if err := peerauth.CheckListen("the control plane", lis.Addr().String(), auth, cfg.Security.Insecure); err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("coordinator of job %s: %w: %w", jobID, ErrInvalidConfig, err)
	}
	var epoch int64
	var releaseOnce sync.Once
	var releaseFn func()
	release := func() {
		releaseOnce.Do(func() {
			if releaseFn != nil {
				releaseFn()
			}
		})
	}
	jobCtx, stop := context.WithCancelCause(ctx)
	if len(cfg.EtcdEndpoints) > 0 {
		services, err := ha.Open(ctx, cfg.haConfig(logger))
		if err != nil {
			_ = lis.Close()
			stop(nil)
			return nil, fmt.Errorf("coordinator of job %s: %w", jobID, err)
		}
		addr := cfg.advertised(lis.Addr().String())
		c.logger.Info("campaigning for the job's leadership", "job_id", jobID, "address", addr)
		if cfg.Standby != nil {
			cfg.Standby(true)
		}
		lead, err := services.Campaign(ctx, jobID, addr)
		if err != nil {
			services.Close()
			_ = lis.Close()
			stop(nil)
			return nil, fmt.Errorf("coordinator of job %s: leader election: %w", jobID, err)
		}
		if cfg.Standby != nil {
			cfg.Standby(false)
		}
		epoch = lead.Epoch()
		c.logger.Info("leading the job", "job_id", jobID, "epoch", epoch)
		rcfg.PublishCheckpoint = func(id int64, dir string) error {
			pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := lead.PublishCheckpoint(pctx, ha.Pointer{ID: id, Path: dir})
			if errors.Is(err, ha.ErrFenced) {
				return &lostLeadership{fmt.Errorf("%w: %w", ErrLeadershipLost, err)}
			}
			return err
		}
		// A coordinator taking over resumes from the checkpoint the last
		// leader published (runtime/lifecycle checks it against storage).
		rcfg.PublishedCheckpoint = func() (int64, string, bool, error) {
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, ok, err := services.LatestCheckpoint(rctx, jobID)
			return p.ID, p.Path, ok, err
		}
		rcfg.PublishResult = func(res *storage.JobResult) error { return publishJSON(res, lead.PublishResult) }
		// The parallelism the job runs at (a rescale, the autoscaler's
		// decisions) outlives the leader: the next one resumes at it.
		rcfg.PublishScaling = func(st runtime.ScalingState) error { return publishJSON(st, lead.PublishScaling) }
		rcfg.PublishedScaling = func() (runtime.ScalingState, bool, error) {
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var st runtime.ScalingState
			data, ok, err := services.Scaling(rctx, jobID)
			if err != nil || !ok {
				return st, ok, err
			}
			if err := json.Unmarshal(data, &st); err != nil {
				return st, false, fmt.Errorf("ha: the job's scaling state in etcd: %w", err)
			}
			return st, true, nil
		}
		// The leadership is the lock: a paused former leader still holding
		// the directory's flock must not keep its successor out. It is
		// given up where the lock would be released, before Wait returns:
		// a finishing leader resigns, and a standby takes over at once.
		rcfg.SkipLock = true
		rcfg.Unlock = func() error {
			release()
			return nil
		}
		go func() {
			select {
			case <-lead.Lost():
				c.logger.Error("lost the job's leadership; suspending the job here", "job_id", jobID, "epoch", epoch, "cause", lead.Err())
				stop(fmt.Errorf("%w: %w", ErrLeadershipLost, lead.Err()))
			case <-jobCtx.Done():
			}
		}()
		releaseFn = func() {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := lead.Resign(rctx); err != nil {
				c.logger.Warn("resign the job's leadership; a standby takes over once the lease expires", "err", err)
			}
			services.Close()
		}
	}
	srv, err := control.NewServer(control.ServerConfig{
		Listener: lis, Auth: auth, Insecure: cfg.Security.Insecure, HeartbeatInterval: cfg.HeartbeatInterval, HeartbeatTimeout: cfg.HeartbeatTimeout,
		Fingerprint: fingerprint, Epoch: epoch, JobID: jobID, Logger: logger,
	}, c)
	if err != nil {
		stop(nil)
		release()
		return nil, fmt.Errorf("coordinator of job %s: %w", jobID, err)
	}
	c.srv = srv
	c.logger.Info("coordinator listening", "address", srv.Addr(), "job_id", jobID, "slots_needed", c.slots, "fingerprint", fingerprint,
		"authentication", auth.Mode())
	rcfg.Executor = c
	job, err := runtime.Execute(jobCtx, plan, rcfg)
	if err != nil {
		_ = srv.Close()
		stop(nil)
		release()
		return nil, err
	}
	go func() {
		<-job.Done()
		_ = srv.Close()
		stop(nil)
		release()
	}()
	return job, nil
}

// publishJSON writes v's JSON with a leader's fenced write, within 30 s.
func publishJSON(v any, write func(context.Context, []byte) error) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return write(ctx, data)
}

// lostLeadership is a fenced write's failure: another coordinator leads;
// this one must not commit anything, nor restart.
type lostLeadership struct{ err error }

func (e *lostLeadership) Error() string          { return e.err.Error() }
func (e *lostLeadership) Unwrap() error          { return e.err }
func (e *lostLeadership) SuppressRestarts() bool { return true }

// Addr is where a started coordinator listens (for tests); "" before.
func (c *coordinator) Addr() string {
	if c.srv == nil {
		return ""
	}
	return c.srv.Addr()
}

// coordinator is the runtime.Executor of a job on several hosts and the
// control plane's handler.
type coordinator struct {
	cfg    Config
	logger *slog.Logger
	jobID  string
	// slots is what the plan's parallelism needs; an attempt at another
	// parallelism (a rescale) needs its own (slotsFor).
	slots int
	srv   *control.Server

	mu       sync.Mutex
	changed  chan struct{} // closed (and replaced) when a worker comes or goes
	current  int           // the attempt deployed, -1 before the first
	gw       runtime.CoordinatorGateway
	slotsOf  []string // the worker of each slot, current attempt
	previous []string // the last attempt's
	hosting  map[string][]checkpoint.TaskID
	// placement is the worker of each task, current attempt; regions says
	// its failover regions restart alone (runtime.RegionRestarter).
	placement []string
	regions   bool
	// metrics are the figures the workers last reported, current attempt.
	metrics map[string][]runtime.TaskMetrics
}

// QueryState routes a query against the job's state to the worker
// running the task that owns the key (runtime.QueryRouter).
func (c *coordinator) QueryState(ctx context.Context, attempt int, task checkpoint.TaskID, name string, key []byte) ([]byte, bool, error) {
	return c.srv.QueryState(ctx, attempt, task, name, key)
}

var (
	_ runtime.QueryRouter        = (*coordinator)(nil)
	_ runtime.Executor           = (*coordinator)(nil)
	_ runtime.MetricsSource      = (*coordinator)(nil)
	_ runtime.SlotOffer          = (*coordinator)(nil)
	_ runtime.RegionRestarter    = (*coordinator)(nil)
	_ control.CoordinatorHandler = (*coordinator)(nil)
	_ control.MetricsReceiver    = (*coordinator)(nil)
)

// WorkerMetrics keeps a worker's latest task figures of the current
// attempt.
func (c *coordinator) WorkerMetrics(worker string, attempt int, tasks []runtime.TaskMetrics) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if attempt != c.current {
		return
	}
	for i := range tasks {
		tasks[i].Worker = worker
	}
	c.metrics[worker] = tasks
}

// TaskMetrics are the figures of every task of the current attempt, as
// their workers last reported them: the job's metrics on the coordinator.
func (c *coordinator) TaskMetrics() []runtime.TaskMetrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []runtime.TaskMetrics
	for w := range c.hosting {
		out = append(out, c.metrics[w]...)
	}
	slices.SortFunc(out, func(a, b runtime.TaskMetrics) int {
		return cmp.Or(cmp.Compare(a.Vertex, b.Vertex), cmp.Compare(a.Subtask, b.Subtask))
	})
	return out
}

// Deploy waits (up to the slot timeout) until the workers offer enough
// slots, places the tasks and deploys them on every worker at once.
func (c *coordinator) Deploy(ctx context.Context, d runtime.AttemptDeployment, gw runtime.CoordinatorGateway) (runtime.TaskGateway, error) {
	need := slotsFor(d.Tasks)
	workers, err := c.awaitSlots(ctx, need)
	if err != nil {
		return nil, err
	}
	var offers []WorkerSlots
	peers := map[string]string{}
	for _, w := range workers {
		offers = append(offers, WorkerSlots{Worker: w.ID, Slots: w.Slots})
		peers[w.ID] = w.DataAddr
	}
	c.mu.Lock()
	slots, err := placeSlots(need, offers, c.previous)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	placement := placeTasks(d.Tasks, slots)
	hosting := map[string][]checkpoint.TaskID{}
	for i, w := range placement {
		hosting[w] = append(hosting[w], checkpoint.TaskID(i))
	}
	// Regions restart alone where every worker of the attempt can.
	regions := d.RegionFailover
	for _, w := range workers {
		if len(hosting[w.ID]) > 0 && !w.RegionRestart {
			if regions {
				c.logger.Info("a worker restarts no failover regions (older code): a task failure restarts the whole job", "worker", w.ID)
			}
			regions = false
		}
	}
	c.current, c.gw, c.slotsOf, c.previous, c.hosting, c.placement, c.regions = d.Attempt, gw, slots, slots, hosting, placement, regions
	c.metrics = map[string][]runtime.TaskMetrics{}
	c.mu.Unlock()
	c.logger.Info("deploying attempt", "attempt", d.Attempt, "workers", len(hosting), "tasks", len(placement), "slots", need, "restore", d.Restore)

	errs := make(chan error, len(hosting))
	for w, tasks := range hosting {
		go func() {
			err := c.srv.Deploy(ctx, w, control.Deployment{
				JobID: d.JobID, Attempt: d.Attempt, Tasks: tasks, Placement: placement, Peers: peers,
				RunID: d.RunID, Restore: d.Restore, RestoreOwned: d.RestoreOwned, Parallelism: d.Parallelism,
				RegionFailover: regions,
			})
			if err != nil {
				err = fmt.Errorf("deploy %d tasks on worker %s: %w", len(tasks), w, err)
			}
			errs <- err
		}()
	}
	var all []error
	for range hosting {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return nil, err
	}
	return taskGateway{TaskGateway: c.srv.TaskGateway(func(id checkpoint.TaskID) string { return placement[id] }), srv: c.srv}, nil
}

// slotsFor is what an attempt's tasks need with slot sharing: subtask i
// of every vertex shares slot i.
func slotsFor(tasks []runtime.TaskSpec) int {
	n := 0
	for _, t := range tasks {
		n = max(n, t.Subtask+1)
	}
	return n
}

// Slots is the number of task slots the registered workers offer, and a
// channel closed when a worker comes or goes (runtime.SlotOffer: the
// job's parallelism is bounded by them, and follows them in the reactive
// mode).
func (c *coordinator) Slots() (int, <-chan struct{}) {
	c.mu.Lock()
	changed := c.changed
	c.mu.Unlock()
	total := 0
	for _, w := range c.srv.Workers() {
		total += w.Slots
	}
	return total, changed
}

// awaitSlots returns the registered workers once they offer the need
// slots an attempt needs, waiting for registrations up to the slot
// timeout.
func (c *coordinator) awaitSlots(ctx context.Context, need int) ([]control.WorkerInfo, error) {
	deadline := time.NewTimer(c.cfg.SlotTimeout)
	defer deadline.Stop()
	logged := false
	for {
		c.mu.Lock()
		changed := c.changed
		c.mu.Unlock()
		workers := c.srv.Workers()
		total := 0
		for _, w := range workers {
			total += w.Slots
		}
		if total >= need {
			return workers, nil
		}
		if !logged {
			c.logger.Info("waiting for task slots", "needed", need, "offered", total, "workers", len(workers), "timeout", c.cfg.SlotTimeout)
			logged = true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return nil, fmt.Errorf("%w: the job needs %d slots, %d workers offer %d after %v (slot.request.timeout)",
				ErrNotEnoughSlots, need, len(workers), total, c.cfg.SlotTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Cancel tells every worker of the attempt to stop its tasks. It does not
// wait: a worker deploys the next attempt only once the tasks of the
// previous one have exited.
func (c *coordinator) Cancel(ctx context.Context, attempt int) error {
	c.mu.Lock()
	var workers []string
	if attempt == c.current {
		for w := range c.hosting {
			workers = append(workers, w)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, w := range workers {
		if err := c.srv.Cancel(w, c.jobID, attempt); err != nil && !errors.Is(err, control.ErrUnknownWorker) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CanRestartRegions: the attempt is the deployed one, and every worker
// running its tasks restarts failover regions (runtime.RegionRestarter).
func (c *coordinator) CanRestartRegions(attempt int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.regions && attempt == c.current
}

// byWorker splits tasks by the worker running them in the current
// attempt.
func (c *coordinator) byWorker(attempt int, tasks []runtime.TaskRef) (map[string][]runtime.TaskRef, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if attempt != c.current {
		return nil, fmt.Errorf("coordinator of job %s: attempt %d is not the deployed one (%d): %w", c.jobID, attempt, c.current, runtime.ErrStaleMessage)
	}
	out := map[string][]runtime.TaskRef{}
	for _, t := range tasks {
		if int(t.Task) < 0 || int(t.Task) >= len(c.placement) {
			return nil, fmt.Errorf("coordinator of job %s: task %d has no worker in attempt %d", c.jobID, t.Task, attempt)
		}
		w := c.placement[t.Task]
		out[w] = append(out[w], t)
	}
	return out, nil
}

// onWorkers carries out step on every worker running some of tasks, at
// once, and returns when all answered.
func (c *coordinator) onWorkers(attempt int, tasks []runtime.TaskRef, step func(worker string, tasks []runtime.TaskRef) error) error {
	split, err := c.byWorker(attempt, tasks)
	if err != nil {
		return err
	}
	errs := make(chan error, len(split))
	for w, ts := range split {
		go func() { errs <- step(w, ts) }()
	}
	var all []error
	for range split {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// StopTasks has the workers running a failover region's tasks cancel
// them, and waits until they exited (runtime.RegionRestarter).
func (c *coordinator) StopTasks(ctx context.Context, attempt int, tasks []runtime.TaskRef) error {
	return c.onWorkers(attempt, tasks, func(w string, ts []runtime.TaskRef) error {
		return c.srv.StopTasks(ctx, w, attempt, ts)
	})
}

// DeployTasks deploys the new executions of a failover region's tasks on
// the workers running them: the same workers, so that their state
// recovers from local files where it can (runtime.RegionRestarter).
func (c *coordinator) DeployTasks(ctx context.Context, d runtime.RegionDeployment) error {
	c.logger.Info("deploying a failover region's tasks", "attempt", d.Attempt, "tasks", len(d.Tasks), "restore", d.Restore)
	return c.onWorkers(d.Attempt, d.Tasks, func(w string, ts []runtime.TaskRef) error {
		wd := d
		wd.Tasks = ts
		return c.srv.DeployTasks(ctx, w, wd)
	})
}

// StartTasks runs the new executions DeployTasks made
// (runtime.RegionRestarter).
func (c *coordinator) StartTasks(attempt int, tasks []runtime.TaskRef) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.HeartbeatTimeout)
	defer cancel()
	return c.onWorkers(attempt, tasks, func(w string, ts []runtime.TaskRef) error {
		return c.srv.StartTasks(ctx, w, attempt, ts)
	})
}

func (c *coordinator) gateway() (runtime.CoordinatorGateway, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gw == nil {
		return nil, fmt.Errorf("coordinator of job %s: no attempt deployed: %w", c.jobID, runtime.ErrStaleMessage)
	}
	return c.gw, nil
}

// Acknowledge, Decline and Report hand the workers' messages to the
// current attempt's coordinator gateway, which drops a stale attempt's.
func (c *coordinator) Acknowledge(m runtime.AcknowledgeCheckpoint) error {
	gw, err := c.gateway()
	if err != nil {
		return err
	}
	return gw.Acknowledge(m)
}

func (c *coordinator) Decline(m runtime.DeclineCheckpoint) error {
	gw, err := c.gateway()
	if err != nil {
		return err
	}
	return gw.Decline(m)
}

func (c *coordinator) Report(m runtime.TaskEvent) error {
	gw, err := c.gateway()
	if err != nil {
		return err
	}
	return gw.Report(m)
}

func (c *coordinator) WorkerRegistered(w control.WorkerInfo) {
	c.logger.Info("worker registered", "worker", w.ID, "slots", w.Slots, "data", w.DataAddr, "host", w.Host)
	c.signal()
}

// WorkerLost fails the current attempt when the worker ran some of its
// tasks: the job restarts whole on the slots there are, even under region
// failover (the worker's slot is gone, and the tasks that restart need
// new places that their peers' channels must learn).
func (c *coordinator) WorkerLost(id string, cause error) {
	c.mu.Lock()
	tasks := c.hosting[id]
	gw, attempt := c.gw, c.current
	if len(tasks) > 0 {
		c.regions = false
	}
	c.mu.Unlock()
	c.signal()
	if errors.Is(cause, control.ErrClosed) {
		return
	}
	// The one line of the event, its cause in words.
	c.logger.Info("worker lost", "worker", id, "tasks", len(tasks), "cause", control.Reason(cause), "attempt", attempt)
	if len(tasks) == 0 || gw == nil {
		return
	}
	err := &workerLost{id: id, tasks: len(tasks), attempt: attempt, cause: cause}
	_ = gw.Report(runtime.TaskEvent{From: runtime.TaskRef{JobID: c.jobID, Attempt: attempt, Task: tasks[0]}, Kind: runtime.ReportFailed, Err: err})
}

// workerLost fails the attempt that ran tasks on a lost worker. It is an
// expected failure (the runtime logs the restart it causes at INFO): its
// coordinator said why, once.
type workerLost struct {
	id             string
	tasks, attempt int
	cause          error
}

func (e *workerLost) Error() string {
	return fmt.Sprintf("worker %s lost: %s (it ran %d tasks of attempt %d)", e.id, control.Reason(e.cause), e.tasks, e.attempt)
}
func (e *workerLost) Unwrap() []error       { return []error{ErrWorkerLost, e.cause} }
func (e *workerLost) ExpectedFailure() bool { return true }

func (c *coordinator) signal() {
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// taskGateway is the control plane's gateway to the tasks, which also
// tells the workers where savepoints go.
type taskGateway struct {
	runtime.TaskGateway
	srv *control.Server
}

func (g taskGateway) SetSavepointDir(id int64, dir string) error {
	return g.srv.SetSavepointDir(id, dir)
}

func (g taskGateway) StopTask(to runtime.TaskRef) error {
	if s, ok := g.TaskGateway.(runtime.TaskStopper); ok {
		return s.StopTask(to)
	}
	return errors.ErrUnsupported
}

func (g taskGateway) DrainEventTime(to runtime.TaskRef) error {
	if s, ok := g.TaskGateway.(runtime.TaskStopper); ok {
		return s.DrainEventTime(to)
	}
	return errors.ErrUnsupported
}
