package kafkaclient

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestValidate(t *testing.T) {
	seeds := []string{"localhost:9092"}
	for _, c := range []struct {
		name    string
		cfg     Config
		problem string // "" when valid
	}{
		{"seeds only", Config{Seeds: seeds}, ""},
		{"no seeds", Config{}, "no seed brokers"},
		{"empty seed list", Config{Seeds: []string{}}, "no seed brokers"},
		{"plaintext spelled out", Config{Seeds: seeds, Security: Security{Protocol: Plaintext}}, ""},
		{"unknown protocol", Config{Seeds: seeds, Security: Security{Protocol: "TLS"}}, `security protocol "TLS"`},
		{"ssl with a trust store", Config{Seeds: seeds, Security: Security{Protocol: SSL, TLS: TLS{CAFile: "ca.pem"}}}, ""},
		{"ssl with a client certificate", Config{Seeds: seeds, Security: Security{Protocol: SSL, TLS: TLS{CertFile: "c.pem", KeyFile: "k.pem"}}}, ""},
		{"certificate without key", Config{Seeds: seeds, Security: Security{Protocol: SSL, TLS: TLS{CertFile: "c.pem"}}}, "give both or neither"},
		{"key without certificate", Config{Seeds: seeds, Security: Security{Protocol: SASLSSL,
			SASL: SASL{Mechanism: "PLAIN", Username: "u"}, TLS: TLS{KeyFile: "k.pem"}}}, "give both or neither"},
		{"tls settings under plaintext", Config{Seeds: seeds, Security: Security{TLS: TLS{InsecureSkipVerify: true}}}, "does not use TLS"},
		{"tls settings under sasl plaintext", Config{Seeds: seeds, Security: Security{Protocol: SASLPlaintext,
			SASL: SASL{Mechanism: "PLAIN", Username: "u"}, TLS: TLS{CAFile: "ca.pem"}}}, "does not use TLS"},
		{"sasl plain", Config{Seeds: seeds, Security: Security{Protocol: SASLPlaintext, SASL: SASL{Mechanism: "PLAIN", Username: "u", Password: "p"}}}, ""},
		{"sasl scram over tls", Config{Seeds: seeds, Security: Security{Protocol: SASLSSL, SASL: SASL{Mechanism: "SCRAM-SHA-512", Username: "u"}}}, ""},
		{"sasl without mechanism", Config{Seeds: seeds, Security: Security{Protocol: SASLSSL, SASL: SASL{Username: "u"}}}, `SASL mechanism ""`},
		{"unknown mechanism", Config{Seeds: seeds, Security: Security{Protocol: SASLPlaintext, SASL: SASL{Mechanism: "GSSAPI", Username: "u"}}}, `SASL mechanism "GSSAPI"`},
		{"sasl without user", Config{Seeds: seeds, Security: Security{Protocol: SASLPlaintext, SASL: SASL{Mechanism: "PLAIN"}}}, "without a user name"},
		{"sasl settings under ssl", Config{Seeds: seeds, Security: Security{Protocol: SSL, SASL: SASL{Mechanism: "PLAIN", Username: "u"}}}, "does not use SASL"},
		{"sasl settings under default protocol", Config{Seeds: seeds, Security: Security{SASL: SASL{Username: "u"}}}, "security protocol PLAINTEXT, which does not use SASL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if c.problem == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.problem) {
				t.Fatalf("Validate: %v, want an error matching ErrInvalidConfig naming %q", err, c.problem)
			}
			// The text is the problem alone: a connector's wrapping
			// reads "<problem>: kafka source: invalid configuration".
			if strings.Contains(err.Error(), ErrInvalidConfig.Error()) {
				t.Errorf("error %q repeats the sentinel's text", err)
			}
		})
	}
}

// The user's options come first, then the seeds, then the connector's:
// the connector's win.
func TestOpts(t *testing.T) {
	c := Config{Seeds: []string{"a:1", "b:2"}, Options: []kgo.Opt{kgo.ClientID("user"), kgo.SeedBrokers("ignored:1")}}
	opts := c.Opts(kgo.ClientID("connector"))
	if len(opts) != 4 {
		t.Fatalf("%d options, want 4 (2 user's, seeds, 1 extra)", len(opts))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.ClientID); got != "connector" {
		t.Errorf("client id %v, want the connector's", got)
	}
	if got, _ := cl.OptValue(kgo.SeedBrokers).([]string); strings.Join(got, ",") != "a:1,b:2" {
		t.Errorf("seeds %v, want the config's a:1,b:2", got)
	}
	// Opts does not share its backing array with the config's options.
	more := c.Opts()
	more[0] = nil
	if c.Options[0] == nil {
		t.Error("Opts returned the config's own slice")
	}
}

func TestLogDefaults(t *testing.T) {
	// Without a logger, Log logs through the default as it is when a
	// record is logged: one set after the connector was made applies.
	lazy := (&Config{}).Log().With("k", "v")
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	lazy.Info("hello")
	slog.SetDefault(old)
	if got := buf.String(); !strings.Contains(got, "msg=hello k=v") {
		t.Errorf("Log without a logger wrote %q to the default set after it, want the record with its attributes", got)
	}
	l := slog.New(slog.DiscardHandler)
	if (&Config{Logger: l}).Log() != l {
		t.Error("Log does not return the configured logger")
	}
}
