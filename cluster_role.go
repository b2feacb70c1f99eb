package sluice

import (
	"errors"
	"flag"

	"github.com/sluicehq/sluice/cluster"
)

// ClusterConfig says which role this process has in a job on several
// hosts and how the processes find each other (see package cluster):
// Flink's keys through Set, SLUICE_* variables through FromEnv, flags
// through Flags.
type ClusterConfig = cluster.Config

// Roles of a process.
const (
	RoleSingle      = cluster.RoleSingle
	RoleCoordinator = cluster.RoleCoordinator
	RoleWorker      = cluster.RoleWorker
)

// ErrWorkerRole: ExecuteAsync was called in a worker process; a worker
// runs with Execute, which returns when the job has ended.
var ErrWorkerRole = errors.New("a worker process has no job handle: use Execute")

// WithCluster runs the job as c.Role says: in this process (the default),
// as the coordinator of a job on several hosts (its tasks run on
// workers; the Job, API and savepoints work as in one process), or as a
// worker that runs the tasks the coordinator places on it. Every process
// must build the same plan from the same code and configuration: a worker
// whose plan differs is refused. Without this option the role comes from
// SLUICE_ROLE and the other SLUICE_* variables (ClusterConfig.FromEnv).
func WithCluster(c ClusterConfig) Option {
	return func(e *Environment) {
		e.cluster = &c
	}
}

// ClusterFlags registers --role, --coordinator, --listen, --data-listen,
// --host, --worker-id, --slots, --etcd (and etcd's credentials), the
// processes' authentication (--tls-cert, --tls-key, --tls-ca,
// --secret-file, --insecure) and -D key=value on fs, over the SLUICE_*
// variables' values; pass the result to WithCluster after fs.Parse.
func ClusterFlags(fs *flag.FlagSet) *ClusterConfig {
	c := &ClusterConfig{}
	c.Flags(fs) // a bad SLUICE_* variable is reported when the job starts
	return c
}

// clusterConfig is the configured role, or the environment's, with the
// worker observers after the configuration's WorkerStarted.
func (e *Environment) clusterConfig() (cluster.Config, error) {
	var c cluster.Config
	var err error
	if e.cluster != nil {
		c = *e.cluster
	} else {
		err = c.FromEnv()
	}
	if len(e.workerObservers) > 0 {
		started, observers := c.WorkerStarted, e.workerObservers
		c.WorkerStarted = func(v *cluster.WorkerView) {
			if started != nil {
				started(v)
			}
			for _, o := range observers {
				o.ObserveWorker(v)
			}
		}
	}
	if len(e.standbyObservers) > 0 {
		standby, observers := c.Standby, e.standbyObservers
		c.Standby = func(waiting bool) {
			if standby != nil {
				standby(waiting)
			}
			for _, o := range observers {
				o.ObserveStandby(waiting)
			}
		}
	}
	return c, err
}

// Role returns the role this environment's job runs with in this
// process (WithCluster, else SLUICE_ROLE): RoleSingle, RoleCoordinator or
// RoleWorker.
func (e *Environment) Role() (cluster.Role, error) {
	c, err := e.clusterConfig()
	return c.Role, err
}
