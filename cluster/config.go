package cluster

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Role is what a process of a job does.
type Role string

const (
	// RoleSingle runs the whole job in this process (the default).
	RoleSingle Role = ""
	// RoleCoordinator runs the job's life and checkpoints; its tasks run
	// on workers.
	RoleCoordinator Role = "coordinator"
	// RoleWorker offers slots to a coordinator and runs the tasks it
	// places here.
	RoleWorker Role = "worker"
)

// Defaults, with Flink's names.
const (
	DefaultRPCPort           = 6123 // jobmanager.rpc.port
	DefaultDataPort          = 6121 // taskmanager.data.port
	DefaultSlots             = 1    // taskmanager.numberOfTaskSlots
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultHeartbeatTimeout  = 50 * time.Second
	DefaultSlotTimeout       = 5 * time.Minute // slot.request.timeout
)

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid cluster configuration")

// Config says which role a process has and how the processes find each
// other. Flink's keys are accepted by Set; FromEnv reads SLUICE_*
// variables, Flags the command line.
type Config struct {
	Role Role
	// Coordinator is the coordinator's control address (host:port), for
	// workers (jobmanager.rpc.address and jobmanager.rpc.port). With HA
	// (EtcdEndpoints) workers find the leader in etcd instead.
	Coordinator string
	// Listen is the coordinator's control listen address (":6123"); on a
	// worker, DataListen is the data plane's (":6121").
	Listen, DataListen string
	// Host is the host name or IP other processes reach this one at
	// (taskmanager.host); empty: the host of the listen address, else
	// the machine's host name.
	Host string
	// WorkerID names a worker (taskmanager.resource-id); empty: the host
	// name and the process id.
	WorkerID string
	// Slots a worker offers (taskmanager.numberOfTaskSlots).
	Slots int
	// HeartbeatInterval and HeartbeatTimeout (heartbeat.interval,
	// heartbeat.timeout).
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// SlotTimeout bounds how long an attempt waits for enough slots
	// (slot.request.timeout); the attempt then fails (and the restart
	// strategy decides).
	SlotTimeout time.Duration
	// EtcdEndpoints turn HA on (high-availability.type: etcd,
	// high-availability.etcd.endpoints): leader election and the job's
	// checkpoint pointer in etcd.
	EtcdEndpoints []string
	// EtcdPrefix is the root of the job's keys (high-availability.etcd.path.root).
	EtcdPrefix string
	// LeaseDuration is the leader's lease (high-availability.etcd.lease-duration).
	LeaseDuration time.Duration
	// TLS, when set, secures the control plane and the data plane: the
	// coordinator serves the control plane with it, a worker serves its
	// data plane with it; ClientTLS is what processes dial each other
	// with (its RootCAs, ServerName). Plain TCP when both are nil.
	TLS, ClientTLS *tls.Config
	// WorkerStarted, when set, is called once a worker runs, with its
	// view: what the metrics collector and API read of a job (Config,
	// Status, Restarts, Metrics, ...), for the worker's own tasks. A
	// worker serves its metrics itself (with a worker label) this way.
	WorkerStarted func(*WorkerView)

	// envErr is a bad SLUICE_* variable Flags read, reported by Start
	// and Run.
	envErr error
}

// ParseRole parses coordinator, worker, or single ("").
func ParseRole(s string) (Role, error) {
	switch Role(strings.ToLower(strings.TrimSpace(s))) {
	case RoleCoordinator:
		return RoleCoordinator, nil
	case RoleWorker:
		return RoleWorker, nil
	case "", "single":
		return RoleSingle, nil
	}
	return "", fmt.Errorf("%w: role %q: want coordinator, worker or single", ErrInvalidConfig, s)
}

// envKeys maps the environment variables FromEnv reads to option keys.
var envKeys = []struct{ env, key string }{
	{"SLUICE_ROLE", "cluster.role"},
	{"SLUICE_COORDINATOR", ""},
	{"SLUICE_HOST", "taskmanager.host"},
	{"SLUICE_WORKER_ID", "taskmanager.resource-id"},
	{"SLUICE_SLOTS", "taskmanager.numberOfTaskSlots"},
	{"SLUICE_HA_ETCD_ENDPOINTS", "high-availability.etcd.endpoints"},
}

// FromEnv applies SLUICE_ROLE, SLUICE_COORDINATOR (host:port),
// SLUICE_HOST, SLUICE_WORKER_ID, SLUICE_SLOTS and
// SLUICE_HA_ETCD_ENDPOINTS when set.
func (c *Config) FromEnv() error {
	for _, k := range envKeys {
		v, ok := os.LookupEnv(k.env)
		if !ok || v == "" {
			continue
		}
		if k.key == "" {
			c.Coordinator = v
			continue
		}
		if err := c.Set(k.key, v); err != nil {
			return fmt.Errorf("%s: %w", k.env, err)
		}
	}
	return nil
}

// Flags registers the role flags on fs: --role, --coordinator, --listen,
// --data-listen, --host, --worker-id, --slots, --etcd, and -D key=value
// for any key Set takes. It first applies the SLUICE_* variables
// (FromEnv), which the flags override; a bad variable is reported when
// the job starts.
func (c *Config) Flags(fs *flag.FlagSet) {
	c.envErr = c.FromEnv()
	fs.Func("role", "process role: coordinator, worker, or single (default; $SLUICE_ROLE)", func(s string) (err error) {
		c.Role, err = ParseRole(s)
		return err
	})
	fs.StringVar(&c.Coordinator, "coordinator", c.Coordinator, "worker: the coordinator's control address host:port ($SLUICE_COORDINATOR)")
	fs.StringVar(&c.Listen, "listen", c.Listen, "coordinator: control listen address (default :6123)")
	fs.StringVar(&c.DataListen, "data-listen", c.DataListen, "worker: data plane listen address (default :6121)")
	fs.StringVar(&c.Host, "host", c.Host, "the host other processes reach this one at ($SLUICE_HOST)")
	fs.StringVar(&c.WorkerID, "worker-id", c.WorkerID, "worker: its id (default host name and pid; $SLUICE_WORKER_ID)")
	fs.IntVar(&c.Slots, "slots", c.Slots, "worker: task slots offered (taskmanager.numberOfTaskSlots; $SLUICE_SLOTS)")
	fs.Func("etcd", "HA: etcd endpoints, comma separated ($SLUICE_HA_ETCD_ENDPOINTS)", func(s string) error {
		return c.Set("high-availability.etcd.endpoints", s)
	})
	fs.Var(dynamicFlag{c}, "D", "key=value: a cluster option by its Flink key (repeatable)")
}

// dynamicFlag is Flags' -D. It is a config.KeyFlag: config.Flags,
// registered after it, hands it the -D arguments of the cluster's keys.
type dynamicFlag struct{ c *Config }

func (d dynamicFlag) String() string { return "" }

func (d dynamicFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%w: -D %q: want key=value", ErrInvalidConfig, s)
	}
	return d.c.Set(strings.TrimSpace(k), strings.TrimSpace(v))
}

// Takes reports whether a key is one of the cluster's.
func (d dynamicFlag) Takes(key string) bool { return configKeys.Takes(key) }

// withDefaults fills the unset fields and checks the others.
func (c Config) withDefaults() (Config, error) {
	if c.envErr != nil {
		return c, c.envErr
	}
	if c.Listen == "" {
		c.Listen = ":" + strconv.Itoa(DefaultRPCPort)
	}
	if c.DataListen == "" {
		c.DataListen = ":" + strconv.Itoa(DefaultDataPort)
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.Slots < 0 {
		return c, fmt.Errorf("%w: taskmanager.numberOfTaskSlots %d must be positive", ErrInvalidConfig, c.Slots)
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.HeartbeatTimeout <= c.HeartbeatInterval {
		return c, fmt.Errorf("%w: heartbeat.timeout %v must exceed heartbeat.interval %v", ErrInvalidConfig, c.HeartbeatTimeout, c.HeartbeatInterval)
	}
	if c.SlotTimeout == 0 {
		c.SlotTimeout = DefaultSlotTimeout
	}
	if c.WorkerID == "" {
		h, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if (c.TLS == nil) != (c.ClientTLS == nil) {
		return c, fmt.Errorf("%w: TLS needs both the server and the client configuration (TLS and ClientTLS)", ErrInvalidConfig)
	}
	if c.Role == RoleWorker && c.Coordinator == "" && len(c.EtcdEndpoints) == 0 {
		return c, fmt.Errorf("%w: a worker needs the coordinator's address (--coordinator, $SLUICE_COORDINATOR, jobmanager.rpc.address) or HA endpoints", ErrInvalidConfig)
	}
	return c, nil
}

// advertised returns the address others reach listen at: Host (or the
// listen address's host, else the host name) with listen's port.
func (c Config) advertised(listen string) string {
	host, port, _ := strings.Cut(listen, ":")
	if i := strings.LastIndexByte(listen, ':'); i >= 0 {
		host, port = listen[:i], listen[i+1:]
	}
	if c.Host != "" {
		host = c.Host
	}
	if host == "" || host == "0.0.0.0" || host == "::" || host == "[::]" {
		host, _ = os.Hostname()
	}
	return host + ":" + port
}
