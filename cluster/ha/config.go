package ha

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
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
	// TLSCAFile, TLSCertFile and TLSKeyFile make TLS from PEM files when
	// it is nil (high-availability.etcd.tls.ca: the CA of etcd's
	// certificate; high-availability.etcd.tls.cert and .key: a client
	// certificate, for an etcd that asks for one).
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// Logger receives the services' log lines and the etcd client's
	// warnings; slog.Default() when nil.
	Logger *slog.Logger
}

// ---- Keys of etcd's credentials and TLS ----

// Keys of Config's credentials and TLS files.
const (
	KeyUsername = "high-availability.etcd.username"
	KeyPassword = "high-availability.etcd.password"
	KeyTLSCA    = "high-availability.etcd.tls.ca"
	KeyTLSCert  = "high-availability.etcd.tls.cert"
	KeyTLSKey   = "high-availability.etcd.tls.key"
)

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid high-availability configuration")

// Set applies a Flink-named option to c: high-availability.etcd.endpoints
// (comma separated), high-availability.etcd.path.root,
// high-availability.etcd.lease-duration and
// high-availability.etcd.client.connection-timeout (Flink durations: "15
// s", "500 ms", "1 min", a Go duration, or milliseconds),
// high-availability.etcd.username, high-availability.etcd.password.
func (c *Config) Set(key, value string) error {
	var err error
	switch key {
	case "high-availability.etcd.endpoints":
		c.Endpoints = nil
		for _, e := range strings.Split(value, ",") {
			if e = strings.TrimSpace(e); e != "" {
				c.Endpoints = append(c.Endpoints, e)
			}
		}
		if len(c.Endpoints) == 0 {
			err = errors.New("no endpoint")
		}
	case "high-availability.etcd.path.root":
		c.Prefix = value
	case "high-availability.etcd.lease-duration":
		c.SessionTTL, err = parseDuration(value)
	case "high-availability.etcd.client.connection-timeout":
		c.DialTimeout, err = parseDuration(value)
	case KeyUsername:
		c.Username = value
	case KeyPassword:
		c.Password = value
	case KeyTLSCA:
		c.TLSCAFile = value
	case KeyTLSCert:
		c.TLSCertFile = value
	case KeyTLSKey:
		c.TLSKeyFile = value
	default:
		return fmt.Errorf("%w: unknown option %q", ErrInvalidConfig, key)
	}
	if err != nil {
		return fmt.Errorf("%w: %s=%q: %w", ErrInvalidConfig, key, value, err)
	}
	return nil
}

// tlsFromFiles is the client TLS of the PEM files.
func (c Config) tlsFromFiles() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCAFile != "" {
		b, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, KeyTLSCA, err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%w: %s %s holds no PEM certificate", ErrInvalidConfig, KeyTLSCA, c.TLSCAFile)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return nil, fmt.Errorf("%w: %s and %s go together", ErrInvalidConfig, KeyTLSCert, KeyTLSKey)
	}
	if c.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s and %s: %w", ErrInvalidConfig, KeyTLSCert, KeyTLSKey, err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

// flinkUnits are the duration units of Flink's TimeUtils.
var flinkUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "nano": time.Nanosecond, "nanos": time.Nanosecond, "nanosecond": time.Nanosecond, "nanoseconds": time.Nanosecond,
	"us": time.Microsecond, "µs": time.Microsecond, "micro": time.Microsecond, "micros": time.Microsecond, "microsecond": time.Microsecond, "microseconds": time.Microsecond,
	"": time.Millisecond, "ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// parseDuration reads a Flink duration (a number and an optional unit,
// milliseconds without one) or a Go duration ("1m30s").
func parseDuration(v string) (time.Duration, error) {
	s := strings.TrimSpace(v)
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i > 0 {
		if unit, ok := flinkUnits[strings.ToLower(strings.TrimSpace(s[i:]))]; ok {
			n, err := strconv.ParseInt(s[:i], 10, 64)
			if err != nil {
				return 0, err
			}
			return time.Duration(n) * unit, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration (\"15 s\", \"500 ms\", \"1 min\" or milliseconds): %w", err)
	}
	return d, nil
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
	if c.TLS == nil && (c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSKeyFile != "") {
		t, err := c.tlsFromFiles()
		if err != nil {
			return c, err
		}
		c.TLS = t
	}
	if c.Password != "" && c.Username == "" {
		return c, fmt.Errorf("%w: %s is set without %s", ErrInvalidConfig, KeyPassword, KeyUsername)
	}
	return c, nil
}

// ttlSeconds is the lease in etcd's whole seconds, rounded up.
func (c Config) ttlSeconds() int64 {
	s := int64((c.SessionTTL + time.Second - 1) / time.Second)
	return max(s, 1)
}
