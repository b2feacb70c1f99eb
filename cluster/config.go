package cluster

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cluster/ha"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/runtime/network"
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
	// Etcd's credentials (high-availability.etcd.username,
	// high-availability.etcd.password) and TLS, PEM files
	// (high-availability.etcd.tls.ca, high-availability.etcd.tls.cert and
	// high-availability.etcd.tls.key; the certificate and key only when
	// etcd wants client certificates).
	EtcdUsername, EtcdPassword         string
	EtcdTLSCA, EtcdTLSCert, EtcdTLSKey string
	// Security is how the processes authenticate each other on the
	// control and data planes: mutual TLS (security.ssl.internal.*), a
	// shared secret (security.internal.secret, ...-file), or, beyond the
	// loopback interface, nothing only with security.internal.insecure.
	Security peerauth.Config
	// DataLimits bound what peers can make a worker's data plane hold
	// (taskmanager.network.max-pending-requests-per-connection,
	// max-connections-per-peer, connection.idle-timeout).
	DataLimits network.TransportLimits
	// Standby, when set, is called on a coordinator with HA with true
	// when it starts waiting for the job's leadership (a standby, which
	// serves its health endpoint meanwhile) and false once it leads.
	Standby func(waiting bool)
	// WorkerStarted, when set, is called once a worker runs, with its
	// view: what the metrics collector and API read of a job (Config,
	// Status, Restarts, Metrics, ...), for the worker's own tasks. A
	// worker serves its metrics itself (with a worker label) this way.
	WorkerStarted func(*WorkerView)

	// envErr is a bad SLUICE_* variable Flags read, reported by Start
	// and Run.
	envErr error
}

// haConfig is the HA services' configuration of this process.
func (c Config) haConfig(logger *slog.Logger) ha.Config {
	return ha.Config{Endpoints: c.EtcdEndpoints, Prefix: c.EtcdPrefix, SessionTTL: c.LeaseDuration, Logger: logger,
		Username: c.EtcdUsername, Password: c.EtcdPassword, TLSCAFile: c.EtcdTLSCA, TLSCertFile: c.EtcdTLSCert, TLSKeyFile: c.EtcdTLSKey}
}

// authenticator checks the security configuration and says, at WARN,
// when this process runs without authentication on purpose.
func (c Config) authenticator(logger *slog.Logger) (*peerauth.Authenticator, error) {
	sec := c.Security
	sec.Logger = logger
	a, err := peerauth.New(sec)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if a == nil && sec.Insecure {
		logger.Warn("the control and data planes are not authenticated (" + peerauth.KeyInsecure + " is true): " +
			"anyone who reaches this process's ports can join the job, read its records and write its state; " +
			"set " + peerauth.KeyTLSEnabled + " with certificates, or " + peerauth.KeySecretFile)
	}
	return a, nil
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
	{"SLUICE_HA_ETCD_USERNAME", ha.KeyUsername.Name()},
	{"SLUICE_HA_ETCD_PASSWORD", ha.KeyPassword.Name()},
	{"SLUICE_HA_ETCD_TLS_CA", ha.KeyTLSCA.Name()},
	{"SLUICE_HA_ETCD_TLS_CERT", ha.KeyTLSCert.Name()},
	{"SLUICE_HA_ETCD_TLS_KEY", ha.KeyTLSKey.Name()},
	{"SLUICE_TLS_CERT", peerauth.KeyTLSCert},
	{"SLUICE_TLS_KEY", peerauth.KeyTLSKey},
	{"SLUICE_TLS_CA", peerauth.KeyTLSTruststore},
	{"SLUICE_INTERNAL_SECRET", peerauth.KeySecret},
	{"SLUICE_INTERNAL_SECRET_FILE", peerauth.KeySecretFile},
	{"SLUICE_INSECURE", peerauth.KeyInsecure},
}

// FromEnv applies SLUICE_ROLE, SLUICE_COORDINATOR (host:port),
// SLUICE_HOST, SLUICE_WORKER_ID, SLUICE_SLOTS, SLUICE_HA_ETCD_ENDPOINTS,
// etcd's SLUICE_HA_ETCD_USERNAME, _PASSWORD, _TLS_CA, _TLS_CERT and
// _TLS_KEY, and the processes' SLUICE_TLS_CERT, SLUICE_TLS_KEY and
// SLUICE_TLS_CA (mutual TLS, on when any is set), SLUICE_INTERNAL_SECRET,
// SLUICE_INTERNAL_SECRET_FILE and SLUICE_INSECURE when set.
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
		if strings.HasPrefix(k.env, "SLUICE_TLS_") {
			c.Security.TLS = true
		}
	}
	return nil
}

// Flags registers the role flags on fs: --role, --coordinator, --listen,
// --data-listen, --host, --worker-id, --slots, --etcd, etcd's
// --etcd-username, --etcd-tls-ca, --etcd-tls-cert and --etcd-tls-key, the
// processes' authentication --tls-cert, --tls-key, --tls-ca (mutual TLS),
// --secret-file and --insecure, and -D key=value for any key Set takes.
// It first applies the SLUICE_* variables (FromEnv), which the flags
// override; a bad variable is reported when the job starts.
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
	fs.StringVar(&c.EtcdUsername, "etcd-username", c.EtcdUsername, "HA: etcd user ("+ha.KeyUsername.Name()+"; its password from $SLUICE_HA_ETCD_PASSWORD or "+ha.KeyPassword.Name()+")")
	fs.StringVar(&c.EtcdTLSCA, "etcd-tls-ca", c.EtcdTLSCA, "HA: PEM file of the CA of etcd's certificate ("+ha.KeyTLSCA.Name()+"; $SLUICE_HA_ETCD_TLS_CA)")
	fs.StringVar(&c.EtcdTLSCert, "etcd-tls-cert", c.EtcdTLSCert, "HA: PEM client certificate for etcd ("+ha.KeyTLSCert.Name()+"; $SLUICE_HA_ETCD_TLS_CERT)")
	fs.StringVar(&c.EtcdTLSKey, "etcd-tls-key", c.EtcdTLSKey, "HA: PEM key of the etcd client certificate ("+ha.KeyTLSKey.Name()+"; $SLUICE_HA_ETCD_TLS_KEY)")
	tlsFile := func(dst *string) func(string) error {
		return func(s string) error {
			*dst, c.Security.TLS = s, true
			return nil
		}
	}
	fs.Func("tls-cert", "mutual TLS between the processes: this process's PEM certificate ("+peerauth.KeyTLSCert+"; $SLUICE_TLS_CERT)", tlsFile(&c.Security.CertFile))
	fs.Func("tls-key", "mutual TLS: the PEM key of --tls-cert ("+peerauth.KeyTLSKey+"; $SLUICE_TLS_KEY)", tlsFile(&c.Security.KeyFile))
	fs.Func("tls-ca", "mutual TLS: PEM certificates of the CA of every process's certificate ("+peerauth.KeyTLSTruststore+"; $SLUICE_TLS_CA)", tlsFile(&c.Security.TrustFile))
	fs.StringVar(&c.Security.SecretFile, "secret-file", c.Security.SecretFile, "a file holding the deployment's shared secret, every process proves it holds ("+peerauth.KeySecretFile+"; $SLUICE_INTERNAL_SECRET_FILE)")
	fs.BoolVar(&c.Security.Insecure, "insecure", c.Security.Insecure, "listen beyond loopback without mutual TLS or a secret: anyone who reaches the ports joins the job ("+peerauth.KeyInsecure+"; $SLUICE_INSECURE)")
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
	if len(c.EtcdEndpoints) > 0 {
		if err := ha.CheckLinked("--etcd, $SLUICE_HA_ETCD_ENDPOINTS"); err != nil {
			return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
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
