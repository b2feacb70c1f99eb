package ha

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
	// TLSCAFile, TLSCertFile and TLSKeyFile make TLS from PEM files when
	// it is nil (high-availability.etcd.tls.ca: the CA of etcd's
	// certificate; high-availability.etcd.tls.cert and .key: a client
	// certificate, for an etcd that asks for one).
	TLSCAFile, TLSCertFile, TLSKeyFile string
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
// high-availability.etcd.password and high-availability.etcd.tls.ca,
// .cert and .key.
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
	case KeyUsername.Name():
		c.Username = value
	case KeyPassword.Name():
		c.Password = value
	case KeyTLSCA.Name():
		c.TLSCAFile = value
	case KeyTLSCert.Name():
		c.TLSCertFile = value
	case KeyTLSKey.Name():
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
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, KeyTLSCA.Name(), err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%w: %s %s holds no PEM certificate", ErrInvalidConfig, KeyTLSCA.Name(), c.TLSCAFile)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return nil, fmt.Errorf("%w: %s and %s go together", ErrInvalidConfig, KeyTLSCert.Name(), KeyTLSKey.Name())
	}
	if c.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s and %s: %w", ErrInvalidConfig, KeyTLSCert.Name(), KeyTLSKey.Name(), err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

// WithDefaults fills the zero fields and checks the others; an
// implementation's Opener calls it first.
func (c Config) WithDefaults() (Config, error) {
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
		return c, fmt.Errorf("%w: %s is set without %s", ErrInvalidConfig, KeyPassword.Name(), KeyUsername.Name())
	}
	return c, nil
}
