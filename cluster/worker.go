package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/cluster/control"
	"github.com/sluicehq/sluice/cluster/ha"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/runtime/network"
)

// RunWorker runs a worker of the job plan builds until ctx is done or the
// job has ended: it serves the data plane on cfg.DataListen, registers
// with the coordinator (found in etcd with HA) offering cfg.Slots slots,
// and runs the tasks each attempt places here. A lost coordinator cancels
// the tasks; the worker registers again, with the new leader when there
// is one, and returns nil once the job's recorded result says it ended.
// A coordinator that runs other code (another plan fingerprint) is an
// error, not retried.
func RunWorker(ctx context.Context, plan *runtime.Plan, rcfg runtime.Config, cfg Config) error {
	cfg.Role = RoleWorker
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	g, err := runtime.Compile(plan, rcfg)
	if err != nil {
		return err
	}
	logger := rcfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("role", "worker", "worker", cfg.WorkerID)
	rcfg.Logger = logger
	jobID := runtime.JobIDOf(rcfg, g)
	auth, err := cfg.authenticator(logger)
	if err != nil {
		return fmt.Errorf("worker %s: %w", cfg.WorkerID, err)
	}
	tr, err := network.NewTransport(network.TransportConfig{ListenAddr: cfg.DataListen, Auth: auth, Insecure: cfg.Security.Insecure,
		Limits: cfg.DataLimits, Logger: logger})
	if err != nil {
		return fmt.Errorf("worker %s: data plane: %w", cfg.WorkerID, err)
	}
	defer tr.Close()
	w := &worker{cfg: cfg, rcfg: rcfg, plan: plan, logger: logger, jobID: jobID, fingerprint: planFingerprint(g, rcfg), tr: tr,
		dataAddr: cfg.advertised(tr.Addr())}
	if cfg.WorkerStarted != nil {
		cfg.WorkerStarted(&WorkerView{w: w})
	}
	var services ha.Services
	if len(cfg.EtcdEndpoints) > 0 {
		hc := cfg.haConfig(logger)
		hc.SessionTTL = 0 // a worker campaigns for nothing
		services, err = ha.Open(ctx, hc)
		if err != nil {
			return fmt.Errorf("worker %s: %w", cfg.WorkerID, err)
		}
		defer services.Close()
	}
	defer w.stopRunner()
	// With HA, a change of the job's leader in etcd ends the wait between
	// two attempts to reach a coordinator: a worker that lost its leader
	// registers with the next one as soon as it is elected, not after a
	// backoff grown while the former leader's lease ran out.
	var leaderChanged <-chan struct{}
	if services != nil {
		changed := make(chan struct{}, 1)
		leaderChanged = changed
		watch := services.WatchLeader(ctx, jobID)
		go func() {
			last := ha.LeaderInfo{}
			for li := range watch {
				if li == last || li.Epoch == 0 {
					continue
				}
				if last.Epoch != 0 {
					logger.Info("the job's leader changed", "coordinator", li.Candidate, "epoch", li.Epoch)
				}
				last = li
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}()
	}
	var epoch int64
	backoff := 100 * time.Millisecond
	instance := control.NewInstance()
	// What the worker last said at INFO about reaching its coordinator:
	// a repeat of the same is logged at DEBUG only.
	lastSaid := ""
	say := func(msg string, args ...any) {
		line := fmt.Sprint(msg, args)
		level := slog.LevelInfo
		if line == lastSaid {
			level = slog.LevelDebug
		}
		lastSaid = line
		logger.Log(context.Background(), level, msg, args...)
	}
	logger.Info("worker data plane listening", "address", tr.Addr(), "advertised", w.dataAddr, "authentication", auth.Mode())
	for {
		if ended, err := w.jobEnded(); err != nil {
			logger.Warn("read the job's result", "err", err)
		} else if ended != nil {
			logger.Info("the job has ended; worker exits", "job_id", jobID, "result", ended.String())
			return nil
		}
		addr := cfg.Coordinator
		if services != nil {
			if leader, _, err := services.Leader(ctx, jobID); err == nil {
				addr = leader
			} else if errors.Is(err, ha.ErrNoLeader) {
				say("no coordinator leads the job yet; waiting for one in etcd", "job_id", jobID, "etcd", cfg.EtcdEndpoints)
			} else {
				say("cannot read the job's leader from etcd", "etcd", cfg.EtcdEndpoints, "err", err)
			}
		}
		var client *control.Client
		if addr != "" {
			w.beginSession()
			dctx, cancel := context.WithTimeout(ctx, cfg.HeartbeatTimeout)
			client, err = control.Dial(dctx, control.ClientConfig{
				CoordinatorAddr: addr, Auth: auth, Instance: instance, WorkerID: cfg.WorkerID, Slots: cfg.Slots, DataAddr: w.dataAddr,
				Fingerprint: w.fingerprint, Host: cfg.Host, HeartbeatInterval: cfg.HeartbeatInterval,
				HeartbeatTimeout: cfg.HeartbeatTimeout, MinEpoch: epoch, Logger: logger,
			}, w)
			cancel()
			w.setClient(client)
			if errors.Is(err, control.ErrFingerprintMismatch) {
				return fmt.Errorf("worker %s: %w", cfg.WorkerID, err)
			}
		}
		if client != nil {
			backoff = 100 * time.Millisecond
			epoch = client.Epoch()
			lastSaid = ""
			logger.Info("registered with the coordinator", "coordinator", addr, "epoch", epoch, "slots", cfg.Slots, "data", w.dataAddr)
			report := time.NewTicker(metricsInterval)
		session:
			for {
				select {
				case cause := <-client.Lost():
					if ended, _ := w.jobEnded(); ended != nil {
						logger.Info("the coordinator is gone and the job has ended", "coordinator", addr, "result", ended.String())
					} else {
						logger.Info("coordinator lost; cancelling the tasks", "coordinator", addr, "cause", control.Reason(cause))
					}
					break session
				case <-ctx.Done():
					break session
				case <-report.C:
					w.reportMetrics(client)
				}
			}
			report.Stop()
			w.stopRunner()
			_ = client.Close()
		} else if err != nil {
			say("cannot reach the coordinator; retrying", "coordinator", addr, "err", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-time.After(backoff):
			backoff = min(2*backoff, 5*time.Second)
		case <-leaderChanged:
			backoff = 100 * time.Millisecond
		case <-ctx.Done():
			return nil
		}
	}
}

// metricsInterval is how often a worker reports its tasks' figures to
// the coordinator, which serves them for the whole job.
const metricsInterval = time.Second

// reportMetrics sends the current runner's task figures.
func (w *worker) reportMetrics(c *control.Client) {
	w.mu.Lock()
	r := w.runner
	w.mu.Unlock()
	if r == nil {
		return
	}
	ms := r.Metrics()
	for i := range ms {
		ms[i].Worker = w.cfg.WorkerID
	}
	if err := c.ReportMetrics(w.jobID, r.Attempt(), ms); err != nil {
		w.logger.Debug("report task metrics", "err", err)
	}
}

// worker is the control plane's handler on a worker.
type worker struct {
	cfg         Config
	rcfg        runtime.Config
	plan        *runtime.Plan
	logger      *slog.Logger
	jobID       string
	fingerprint string
	tr          *network.Transport
	dataAddr    string

	mu     sync.Mutex
	client *control.Client
	ready  chan struct{} // closed once the registration ended (client set or not)
	runner *runtime.TaskRunner
}

var (
	_ control.WorkerHandler    = (*worker)(nil)
	_ control.SavepointLocator = (*worker)(nil)
	_ control.QueryHandler     = (*worker)(nil)
	_ runtime.TaskStopper      = (*worker)(nil)
	_ control.RegionHandler    = (*worker)(nil)
)

// beginSession starts a registration: until setClient, the handler's
// messages to the coordinator wait for the session's client.
func (w *worker) beginSession() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.client, w.ready = nil, make(chan struct{})
}

// setClient ends the registration begun by beginSession (c nil: it failed).
func (w *worker) setClient(c *control.Client) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.client = c
	close(w.ready)
}

// coordinatorGateway is the session's way to the coordinator, once Dial
// returned it (a Deploy may arrive first).
func (w *worker) coordinatorGateway() (runtime.CoordinatorGateway, error) {
	w.mu.Lock()
	ready := w.ready
	w.mu.Unlock()
	if ready == nil {
		return nil, fmt.Errorf("worker %s: no session with the coordinator", w.cfg.WorkerID)
	}
	<-ready
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.client == nil {
		return nil, fmt.Errorf("worker %s: the registration with the coordinator failed", w.cfg.WorkerID)
	}
	return w.client.CoordinatorGateway(), nil
}

// Deploy runs the deployment's tasks, once the previous attempt's tasks
// here have exited (two attempts never write state or output at once).
func (w *worker) Deploy(d control.Deployment) error {
	w.stopRunner()
	gw, err := w.coordinatorGateway()
	if err != nil {
		return err
	}
	ex := &exchange{tr: w.tr, placement: d.Placement, peers: d.Peers}
	r, err := runtime.RunTasks(w.plan, w.rcfg, runtime.WorkerDeployment{
		JobID: d.JobID, RunID: d.RunID, Attempt: d.Attempt, Tasks: d.Tasks, Restore: d.Restore, RestoreOwned: d.RestoreOwned,
		Parallelism: d.Parallelism, RegionFailover: d.RegionFailover,
	}, ex, gw)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.runner = r
	w.mu.Unlock()
	return nil
}

// stopRunner cancels the current runner's tasks and waits for them (at
// most the cancellation timeout, as the runner does).
func (w *worker) stopRunner() {
	w.mu.Lock()
	r := w.runner
	w.runner = nil
	w.mu.Unlock()
	if r == nil {
		return
	}
	r.Cancel()
	<-r.Done()
}

func (w *worker) Cancel(jobID string, attempt int) {
	w.mu.Lock()
	r := w.runner
	w.mu.Unlock()
	if r != nil && r.Attempt() == attempt {
		w.logger.Info("attempt cancelled by the coordinator", "attempt", attempt)
		r.Cancel()
	}
}

// runnerOf is the runner of the attempt, for a step of a failover
// region's restart.
func (w *worker) runnerOf(attempt int) (*runtime.TaskRunner, error) {
	r := w.runnerNow()
	if r == nil || r.Attempt() != attempt {
		return nil, fmt.Errorf("worker %s: attempt %d runs no tasks here: %w", w.cfg.WorkerID, attempt, runtime.ErrStaleMessage)
	}
	return r, nil
}

// StopTasks, DeployTasks and StartTasks restart a failover region's tasks
// of the current runner (control.RegionHandler).
func (w *worker) StopTasks(ctx context.Context, attempt int, tasks []runtime.TaskRef) error {
	r, err := w.runnerOf(attempt)
	if err != nil {
		return err
	}
	return r.StopTasks(ctx, attempt, tasks)
}

func (w *worker) DeployTasks(ctx context.Context, d runtime.RegionDeployment) error {
	r, err := w.runnerOf(d.Attempt)
	if err != nil {
		return err
	}
	return r.DeployTasks(ctx, d)
}

func (w *worker) StartTasks(attempt int, tasks []runtime.TaskRef) error {
	r, err := w.runnerOf(attempt)
	if err != nil {
		return err
	}
	return r.StartTasks(attempt, tasks)
}

func (w *worker) current() (runtime.TaskGateway, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runner == nil {
		return nil, fmt.Errorf("worker %s: no tasks deployed: %w", w.cfg.WorkerID, runtime.ErrStaleMessage)
	}
	return w.runner.Gateway(), nil
}

func (w *worker) TriggerCheckpoint(m runtime.TriggerCheckpoint) error {
	g, err := w.current()
	if err != nil {
		return err
	}
	return g.TriggerCheckpoint(m)
}

func (w *worker) NotifyCheckpoint(m runtime.CheckpointNotification) error {
	g, err := w.current()
	if err != nil {
		return err
	}
	return g.NotifyCheckpoint(m)
}

func (w *worker) AllowFinish(to runtime.TaskRef) error {
	g, err := w.current()
	if err != nil {
		return err
	}
	return g.AllowFinish(to)
}

func (w *worker) StopTask(to runtime.TaskRef) error {
	g, err := w.current()
	if err != nil {
		return err
	}
	return g.(runtime.TaskStopper).StopTask(to)
}

func (w *worker) DrainEventTime(to runtime.TaskRef) error {
	g, err := w.current()
	if err != nil {
		return err
	}
	return g.(runtime.TaskStopper).DrainEventTime(to)
}

// QueryState answers a query routed to one of the worker's tasks
// (control.QueryHandler).
func (w *worker) QueryState(ctx context.Context, attempt int, task checkpoint.TaskID, name string, key []byte) ([]byte, bool, error) {
	r := w.runnerNow()
	if r == nil {
		return nil, false, fmt.Errorf("worker: query %q of task %d: %w: no tasks deployed", name, task, runtime.ErrQueryUnavailable)
	}
	return r.QueryState(ctx, attempt, task, name, key)
}

func (w *worker) SetSavepointDir(id int64, dir string) {
	w.mu.Lock()
	r := w.runner
	w.mu.Unlock()
	if r != nil {
		r.SetSavepointDir(id, dir)
	}
}

// jobEnded reads the job's recorded result from checkpoint storage: a
// worker whose coordinator is gone exits once the job has ended.
func (w *worker) jobEnded() (*storage.JobResult, error) {
	if w.rcfg.Checkpoint.Directory == "" {
		return nil, nil
	}
	st, err := storage.New(w.rcfg.CheckpointFS, w.rcfg.Checkpoint.Directory, w.jobID, storage.Options{Schemes: w.rcfg.CheckpointSchemes})
	if err != nil {
		return nil, err
	}
	return st.ReadJobResult()
}

// exchange is the runtime's Exchange on the worker's data-plane transport.
type exchange struct {
	tr        *network.Transport
	placement []string
	peers     map[string]string
}

func (e *exchange) Publish(id string, p *network.ResultPartition) {
	e.tr.Publish(network.PartitionID(id), p)
}
func (e *exchange) Unpublish(id string) { e.tr.Unpublish(network.PartitionID(id)) }

func (e *exchange) ConnectRemote(g *network.InputGate, ch int, producer checkpoint.TaskID, id string, sub int) error {
	if int(producer) >= len(e.placement) {
		return fmt.Errorf("task %d has no worker in the placement", producer)
	}
	w := e.placement[producer]
	addr, ok := e.peers[w]
	if !ok {
		return fmt.Errorf("worker %s (of task %d) has no data address", w, producer)
	}
	return e.tr.ConnectRemote(g, ch, addr, network.PartitionID(id), sub)
}

// WorkerView is what a worker shows of the job: its own tasks' figures.
// It has the method set metrics.Collector.AddJob and api.Server.AddJob
// read, so a worker serves its metrics like a job in one process.
type WorkerView struct{ w *worker }

// WorkerID is the worker's id (the label of its metrics).
func (v *WorkerView) WorkerID() string { return v.w.cfg.WorkerID }

// Config is the job's configuration as the worker built it.
func (v *WorkerView) Config() runtime.Config { return v.w.rcfg }

// Status is RUNNING while tasks of an attempt run here, CREATED before.
func (v *WorkerView) Status() runtime.JobStatus {
	if r := v.w.runnerNow(); r != nil {
		select {
		case <-r.Done():
		default:
			return runtime.JobRunning
		}
	}
	return runtime.JobCreated
}

// Restarts is the number of the attempt running here.
func (v *WorkerView) Restarts() int64 {
	if r := v.w.runnerNow(); r != nil {
		return int64(r.Attempt())
	}
	return 0
}

// Metrics are the figures of the worker's tasks.
func (v *WorkerView) Metrics() []runtime.TaskMetrics {
	r := v.w.runnerNow()
	if r == nil {
		return nil
	}
	ms := r.Metrics()
	for i := range ms {
		ms[i].Worker = v.w.cfg.WorkerID
	}
	return ms
}

// CheckpointStats: checkpoints are the coordinator's; a worker has none.
func (v *WorkerView) CheckpointStats() (checkpoint.JobStats, bool) {
	return checkpoint.JobStats{}, false
}

// LastRestore: the coordinator reports restores.
func (v *WorkerView) LastRestore() (runtime.RestoreInfo, bool) { return runtime.RestoreInfo{}, false }

func (w *worker) runnerNow() *runtime.TaskRunner {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runner
}
