// Package kafkaclient owns the Kafka client configuration that Sluice's
// Kafka source (source/kafka) and sink (sink/kafka) share: the seed
// brokers, the franz-go options a user passes through, the logger, and
// the security settings (protocol, SASL, TLS); their validation; and the
// franz-go options every client the connectors make starts from.
//
// It is internal because users never name its types: the source's and
// the sink's options (ClientOptions, Logger, ...) fill it. A setting both
// connectors take is added here once, with its option in each connector
// delegating to it.
package kafkaclient

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrInvalidConfig is matched (errors.Is) by every error Validate returns.
// The connectors wrap those errors in their own ErrInvalidConfig as well.
var ErrInvalidConfig = errors.New("kafka client: invalid configuration")

// Config is what every franz-go client of one source or sink is made
// from.
type Config struct {
	// Seeds are the brokers a client contacts first (bootstrap.servers).
	Seeds []string
	// Options are the user's franz-go options (SASL, TLS, client id,
	// fetch and batch sizes...), applied before the connector's own.
	Options []kgo.Opt
	// Logger is where the connector logs; nil means slog.Default().
	Logger *slog.Logger
	// Security says how clients authenticate and encrypt; the zero value
	// is PLAINTEXT. Validate checks it; no connector option sets it, and
	// Opts does not turn it into client options: SASL and TLS go through
	// Options (ConfiguredOptions makes them from the kafka.properties.*
	// keys).
	Security Security
}

// Protocol is Kafka's security.protocol.
type Protocol string

// The protocols of Kafka's security.protocol; "" is Plaintext.
const (
	Plaintext     Protocol = "PLAINTEXT"
	SSL           Protocol = "SSL"
	SASLPlaintext Protocol = "SASL_PLAINTEXT"
	SASLSSL       Protocol = "SASL_SSL"
)

// Security holds the settings of Kafka's security.protocol, sasl.* and
// ssl.* client properties.
type Security struct {
	Protocol Protocol
	SASL     SASL
	TLS      TLS
}

// SASL is Kafka's sasl.mechanism with its credentials.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string
	Username  string
	Password  string
}

// TLS is Kafka's ssl.* settings, as files in PEM form.
type TLS struct {
	// CAFile is the certificates to verify brokers with (ssl.truststore);
	// empty means the system's.
	CAFile string
	// CertFile and KeyFile are the client's certificate and key
	// (ssl.keystore), both or neither.
	CertFile, KeyFile string
	// ServerName overrides the name verified in the brokers'
	// certificates.
	ServerName string
	// InsecureSkipVerify does not verify the brokers' certificates
	// (ssl.endpoint.identification.algorithm empty, and no trust store).
	InsecureSkipVerify bool
}

// The SASL mechanisms Validate accepts.
var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// configError is a problem Validate found: its text is the problem alone,
// so that a connector wrapping it with its own sentinel reads as before;
// it matches ErrInvalidConfig.
type configError struct{ msg string }

func (e *configError) Error() string        { return e.msg }
func (e *configError) Is(target error) bool { return target == ErrInvalidConfig }

func invalid(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// Validate refuses a configuration no client can be made from. Its errors
// match ErrInvalidConfig and name the problem only; callers wrap them.
func (c *Config) Validate() error {
	if len(c.Seeds) == 0 {
		return invalid("no seed brokers")
	}
	return c.Security.validate()
}

func (s *Security) validate() error {
	sasl, tls := false, false
	switch s.Protocol {
	case "", Plaintext:
	case SSL:
		tls = true
	case SASLPlaintext:
		sasl = true
	case SASLSSL:
		sasl, tls = true, true
	default:
		return invalid("security protocol %q, want one of %s, %s, %s, %s", s.Protocol, Plaintext, SSL, SASLPlaintext, SASLSSL)
	}
	switch {
	case sasl && !slices.Contains(saslMechanisms, s.SASL.Mechanism):
		return invalid("SASL mechanism %q with security protocol %s, want one of %s", s.SASL.Mechanism, s.Protocol, strings.Join(saslMechanisms, ", "))
	case sasl && s.SASL.Username == "":
		return invalid("SASL mechanism %s without a user name", s.SASL.Mechanism)
	case !sasl && s.SASL != (SASL{}):
		return invalid("SASL settings with security protocol %s, which does not use SASL (want %s or %s)", s.protocol(), SASLPlaintext, SASLSSL)
	case !tls && s.TLS != (TLS{}):
		return invalid("TLS settings with security protocol %s, which does not use TLS (want %s or %s)", s.protocol(), SSL, SASLSSL)
	case (s.TLS.CertFile == "") != (s.TLS.KeyFile == ""):
		return invalid("TLS certificate file %q and key file %q: give both or neither", s.TLS.CertFile, s.TLS.KeyFile)
	}
	return nil
}

func (s *Security) protocol() Protocol {
	if s.Protocol == "" {
		return Plaintext
	}
	return s.Protocol
}

// Log returns the logger; when none is set, one that logs through
// slog.Default() as it is at each record (a default set later, by a job
// runner, applies).
func (c *Config) Log() *slog.Logger {
	if c.Logger == nil {
		return slog.New(&defaultHandler{})
	}
	return c.Logger
}

// Opts returns the options of one client: the user's, then the seed
// brokers, then extra (the connector's own, which win).
func (c *Config) Opts(extra ...kgo.Opt) []kgo.Opt {
	opts := make([]kgo.Opt, 0, len(c.Options)+len(extra)+1)
	opts = append(opts, c.Options...)
	opts = append(opts, kgo.SeedBrokers(c.Seeds...))
	return append(opts, extra...)
}
