package ha

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
)

// Defaults, with Flink's high-availability option names.
const (
	// DefaultPrefix is the root of the keys (high-availability.etcd.path.root).
	DefaultPrefix = "/sluice"
	// DefaultSessionTTL is the lease of a candidate's key
	// (high-availability.etcd.lease-duration), Flink's high-availability
	// lease duration: how long a leader that stops answering (paused,
	// partitioned, dead) keeps its leadership before a standby takes over.
	DefaultSessionTTL = 15 * time.Second
	// DefaultDialTimeout bounds connecting to etcd when opening
	// (high-availability.etcd.client.connection-timeout), as Flink's
	// ZooKeeper connection timeout.
	DefaultDialTimeout = 15 * time.Second
)

// Config configures the HA services. Endpoints is required; the zero
// value of every other field takes its default.
type Config struct {
	// Endpoints are etcd's client URLs (high-availability.etcd.endpoints,
	// comma separated), e.g. http://10.0.0.1:2379.
	Endpoints []string
	// Prefix is the root of the keys (high-availability.etcd.path.root),
	// DefaultPrefix when empty. Jobs of one prefix share a job id space.
	Prefix string
	// SessionTTL is a candidate's lease (high-availability.etcd.lease-duration),
	// DefaultSessionTTL when 0. etcd counts leases in whole seconds (it is
	// rounded up) and raises one shorter than its minimum (1.5 election
	// timeouts, 2 s with etcd's defaults).
	SessionTTL time.Duration
	// DialTimeout bounds connecting (high-availability.etcd.client.connection-timeout),
	// DefaultDialTimeout when 0.
	DialTimeout time.Duration
	// Username and Password authenticate with etcd
	// (high-availability.etcd.username, high-availability.etcd.password).
	Username, Password string
	// TLS, when set, is used to connect (https endpoints).
	TLS *tls.Config
	// Logger receives the services' log lines and the etcd client's
	// warnings; slog.Default() when nil.
	Logger *slog.Logger
}

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid high-availability configuration")

// Set applies a Flink-named option to c: high-availability.etcd.endpoints
// (a list), high-availability.etcd.path.root,
// high-availability.etcd.lease-duration and
// high-availability.etcd.client.connection-timeout (durations: "15 s",
// "500 ms", "1 min"), high-availability.etcd.username,
// high-availability.etcd.password.
func (c *Config) Set(key, value string) error {
	var err error
	switch key {
	case KeyEndpoints.Name():
		c.Endpoints, err = KeyEndpoints.Parse(value)
	case KeyPathRoot.Name():
		c.Prefix = value
	case KeyLeaseDuration.Name():
		c.SessionTTL, err = KeyLeaseDuration.Parse(value)
	case "high-availability.etcd.client.connection-timeout":
		c.DialTimeout, err = config.ParseDuration(value)
	case "high-availability.etcd.username":
		c.Username = value
	case "high-availability.etcd.password":
		c.Password = value
	default:
		return fmt.Errorf("%w: unknown option %q", ErrInvalidConfig, key)
	}
	if err != nil {
		return fmt.Errorf("%w: %s=%q: %w", ErrInvalidConfig, key, value, err)
	}
	return nil
}

// withDefaults fills the zero fields and checks the others.
func (c Config) withDefaults() (Config, error) {
	if len(c.Endpoints) == 0 {
		return c, fmt.Errorf("%w: no etcd endpoint (high-availability.etcd.endpoints)", ErrInvalidConfig)
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	c.Prefix = strings.TrimRight(c.Prefix, "/")
	if c.Prefix != "" && !strings.HasPrefix(c.Prefix, "/") {
		c.Prefix = "/" + c.Prefix
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.SessionTTL < 0 {
		return c, fmt.Errorf("%w: high-availability.etcd.lease-duration %v is negative", ErrInvalidConfig, c.SessionTTL)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.DialTimeout < 0 {
		return c, fmt.Errorf("%w: high-availability.etcd.client.connection-timeout %v is negative", ErrInvalidConfig, c.DialTimeout)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// ttlSeconds is the lease in etcd's whole seconds, rounded up.
func (c Config) ttlSeconds() int64 {
	s := int64((c.SessionTTL + time.Second - 1) / time.Second)
	return max(s, 1)
}
