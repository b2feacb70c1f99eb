package cluster

import (
	"cmp"
	"context"
	"flag"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/runtime"
)

// The cluster plugs into every Environment of a program that imports it:
// the cluster.* keys of a configuration and the SLUICE_* variables give
// the process its role.
func init() {
	sluice.RegisterLaunchers(sluice.Launchers{
		FromConfiguration: func(c *sluice.Configuration, earlier sluice.Launcher) (sluice.Launcher, bool, error) {
			var prev *Config
			if l, ok := earlier.(*launcher); ok {
				prev = &l.cfg
			}
			cc, set, err := FromConfiguration(c, prev)
			return &launcher{cfg: cc}, set, err
		},
		FromEnv: func() (sluice.Launcher, error) {
			var c Config
			err := c.FromEnv()
			return &launcher{cfg: c}, err
		},
	})
}

// With runs the job as c.Role says: in this process (RoleSingle), as the
// coordinator of a job on several hosts (its tasks run on workers; the
// Job, API and savepoints work as in one process), or as a worker that
// runs the tasks the coordinator places on it. Every process must build
// the same plan from the same code and configuration: a worker whose
// plan differs is refused. Without this option the role comes from the
// configuration's keys (cluster.role, ...) and the SLUICE_* variables
// (Config.FromEnv).
func With(c Config) sluice.Option { return sluice.WithLauncher(&launcher{cfg: c}) }

// Flags registers --role, --coordinator, --listen, --data-listen,
// --host, --worker-id, --slots, --etcd and -D key=value on fs, over the
// SLUICE_* variables' values (Config.Flags); pass the result to With
// after fs.Parse. Register it before sluice.ConfigFlags, which then
// shares -D: a cluster key reaches both.
func Flags(fs *flag.FlagSet) *Config {
	c := &Config{}
	c.Flags(fs) // a bad SLUICE_* variable is reported when the job starts
	return c
}

// ConfigOf returns the cluster configuration env's job runs with in this
// process (With, the configuration's keys, else the SLUICE_* variables):
// its Role says whether it is a coordinator, a worker or the whole job.
func ConfigOf(env *sluice.Environment) (Config, error) {
	l, err := env.Launcher()
	if cl, ok := l.(*launcher); ok {
		return cl.cfg, err
	}
	return Config{}, err
}

// launcher is the sluice.Launcher of a Config.
type launcher struct{ cfg Config }

func (l *launcher) Worker() bool { return l.cfg.Role == RoleWorker }

// Slots is the task slots the process offers as a worker
// (taskmanager.numberOfTaskSlots), by which the root package sizes the
// default Go limit of a worker (memory.DefaultGoLimit): a one-slot
// worker runs a part of the job.
func (l *launcher) Slots() int { return cmp.Or(l.cfg.Slots, DefaultSlots) }

// Coordinator says the process coordinates and runs no task: the root
// package keeps its default Go limit at the memory default
// (memory.DefaultGoLimit(0)) rather than growing it with the job's
// parallelism.
func (l *launcher) Coordinator() bool { return l.cfg.Role == RoleCoordinator }

func (l *launcher) Start(ctx context.Context, plan *runtime.Plan, rcfg runtime.Config, standby func(waiting bool)) (*sluice.Job, error) {
	if l.cfg.Role == RoleCoordinator {
		cfg := l.cfg
		if prev := cfg.Standby; standby != nil {
			cfg.Standby = func(waiting bool) {
				if prev != nil {
					prev(waiting)
				}
				standby(waiting)
			}
		}
		return StartCoordinator(ctx, plan, rcfg, cfg)
	}
	return runtime.Execute(ctx, plan, rcfg)
}

func (l *launcher) Run(ctx context.Context, plan *runtime.Plan, rcfg runtime.Config, started func(sluice.WorkerView)) error {
	cfg := l.cfg
	if prev := cfg.WorkerStarted; started != nil {
		cfg.WorkerStarted = func(v *WorkerView) {
			if prev != nil {
				prev(v)
			}
			started(v)
		}
	}
	return RunWorker(ctx, plan, rcfg, cfg)
}
