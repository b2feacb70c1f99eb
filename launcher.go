package sluice

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime"
)

// Launcher runs a job other than wholly in this process: package
// cluster's roles, a coordinator whose tasks run on workers and a worker
// that runs the tasks a coordinator places on it (cluster.With, the
// cluster.* keys, SLUICE_ROLE). The root package knows no launcher: the
// cluster plugs in when a program imports it (RegisterLaunchers), so a
// program that runs in one process links no gRPC or etcd.
type Launcher interface {
	// Worker reports whether this process runs the tasks a coordinator
	// places on it: Execute then runs them until the job ended, and
	// ExecuteAsync refuses (ErrWorkerRole).
	Worker() bool
	// Start starts the job and returns its handle (a coordinator's; the
	// whole job in this process for a launcher of that role). A
	// coordinator with HA calls standby with true while it waits for the
	// job's leadership, and with false once it leads.
	Start(ctx context.Context, plan *runtime.Plan, cfg runtime.Config, standby func(waiting bool)) (*Job, error)
	// Run runs the tasks placed on this process until the job ended,
	// calling started with the worker's view once it runs.
	Run(ctx context.Context, plan *runtime.Plan, cfg runtime.Config, started func(WorkerView)) error
}

// WorkerView is what a worker process shows of its job, its own tasks'
// figures, for its own /metrics: package cluster's *cluster.WorkerView.
type WorkerView interface {
	WorkerID() string
	Config() runtime.Config
	Status() runtime.JobStatus
	Restarts() int64
	Metrics() []runtime.TaskMetrics
	CheckpointStats() (checkpoint.JobStats, bool)
	LastRestore() (runtime.RestoreInfo, bool)
}

// ErrWorkerRole: ExecuteAsync was called in a worker process; a worker
// runs with Execute, which returns when the job has ended.
var ErrWorkerRole = errors.New("a worker process has no job handle: use Execute")

// ErrClusterNotLinked: the environment (SLUICE_ROLE) gives this process
// a role in a job on several hosts, but the program does not import
// package cluster.
var ErrClusterNotLinked = errors.New("the process has a cluster role but the program does not import github.com/sluicehq/sluice/cluster")

// Launchers is how package cluster plugs into every Environment.
type Launchers struct {
	// FromConfiguration returns the launcher of a configuration's keys
	// over the one an earlier option set (nil: none); set is false when
	// the configuration has none of its keys. WithConfiguration calls it.
	FromConfiguration func(c *Configuration, earlier Launcher) (l Launcher, set bool, err error)
	// FromEnv returns the launcher the process's environment names
	// (SLUICE_ROLE and the other SLUICE_* variables), for an environment
	// that has none; nil: the job runs in this process.
	FromEnv func() (Launcher, error)
}

var launchers struct {
	sync.RWMutex
	l *Launchers
}

// RegisterLaunchers plugs a package that runs jobs on several processes
// (package cluster, in its init function) into every Environment. A
// second registration panics.
func RegisterLaunchers(l Launchers) {
	launchers.Lock()
	defer launchers.Unlock()
	if launchers.l != nil {
		panic("sluice: RegisterLaunchers called twice")
	}
	launchers.l = &l
}

func registeredLaunchers() *Launchers {
	launchers.RLock()
	defer launchers.RUnlock()
	return launchers.l
}

// WithLauncher runs the job with l, whatever the environment says
// (package cluster's cluster.With calls it).
func WithLauncher(l Launcher) Option {
	return func(e *Environment) { e.launch, e.launchSet = l, true }
}

// Launcher returns the launcher the job starts with: the one of
// WithLauncher or the configuration, else the one the process's
// environment names (SLUICE_ROLE, with package cluster linked); nil: the
// job runs in this process.
func (e *Environment) Launcher() (Launcher, error) {
	if e.launchSet {
		return e.launch, nil
	}
	if l := registeredLaunchers(); l != nil && l.FromEnv != nil {
		return l.FromEnv()
	}
	switch role := strings.ToLower(strings.TrimSpace(os.Getenv("SLUICE_ROLE"))); role {
	case "", "single":
		return nil, nil
	default:
		return nil, fmt.Errorf("%w: SLUICE_ROLE=%s", ErrClusterNotLinked, role)
	}
}

// configureLauncher applies the launcher of the configuration's keys.
func (e *Environment) configureLauncher(c *Configuration) {
	l := registeredLaunchers()
	if l == nil || l.FromConfiguration == nil {
		return
	}
	earlier := e.launch
	if !e.launchSet {
		earlier = nil
	}
	launch, set, err := l.FromConfiguration(c, earlier)
	e.addErr(err)
	if set && err == nil {
		WithLauncher(launch)(e)
	}
}

// standby tells the StandbyObservers whether a coordinator waits for
// the job's leadership.
func (e *Environment) standby(waiting bool) {
	for _, o := range e.standbyObservers {
		o.ObserveStandby(waiting)
	}
}

// workerStarted hands a worker's view to the WorkerObservers.
func (e *Environment) workerStarted(v WorkerView) {
	for _, o := range e.workerObservers {
		o.ObserveWorker(v)
	}
}
