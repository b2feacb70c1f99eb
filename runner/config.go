package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// The configuration keys the runner reads (see the package comment).
const (
	KeyRestEnabled     = "rest.enabled"
	KeyRestAddress     = "rest.address"
	KeyRestBindAddress = "rest.bind-address"
	KeyRestPort        = "rest.port"
	KeyRestBindPort    = "rest.bind-port"
	KeyRestToken       = "rest.authentication.token"
	KeyRestAllowed     = "rest.allowed-hosts"
	KeyRestCert        = "security.ssl.rest.cert-file"
	KeyRestKey         = "security.ssl.rest.key-file"
	KeyRestGrace       = "rest.shutdown-grace"
	KeyPromPort        = "metrics.reporter.prom.port"
	KeyPromHost        = "metrics.reporter.prom.host"
	KeyPromNaming      = "metrics.reporter.prom.naming"
	KeyLogLevel        = "log.level"
	KeyLogFormat       = "log.format"
	KeySignalAction    = "execution.signal.action"
	KeyOtelEndpoint    = "traces.reporter.otel.exporter.endpoint"
	KeyOtelProtocol    = "traces.reporter.otel.exporter.protocol"
	KeyOtelTimeout     = "traces.reporter.otel.exporter.timeout"
	KeyOtelService     = "traces.reporter.otel.service.name"
)

// SignalAction is what SIGTERM and SIGINT do to the job
// (execution.signal.action).
type SignalAction string

const (
	// Suspend (SUSPEND, the default): the job stops at once, its latest
	// checkpoint kept; the next start resumes from it (with
	// execution.checkpointing.dir).
	Suspend SignalAction = "SUSPEND"
	// StopWithSavepoint (STOP_WITH_SAVEPOINT): the job takes a savepoint
	// into execution.checkpointing.savepoint-dir (default
	// <execution.checkpointing.dir>/savepoints) and finishes, as
	// `flink stop`; a second signal suspends it at once.
	StopWithSavepoint SignalAction = "STOP_WITH_SAVEPOINT"
	// StopWithSavepointDrain (STOP_WITH_SAVEPOINT_DRAIN): as
	// StopWithSavepoint after the sources emitted the maximum watermark
	// (event-time timers and windows fire), as `flink stop --drain`.
	StopWithSavepointDrain SignalAction = "STOP_WITH_SAVEPOINT_DRAIN"
)

func init() {
	port := func(v string) error { _, err := parsePort(v); return err }
	ports := func(v string) error { _, err := parsePorts(v); return err }
	boolean := func(v string) error { _, err := parseBool(v); return err }
	any := func(string) error { return nil }
	host := func(v string) error {
		if strings.ContainsAny(strings.TrimSpace(v), " /") {
			return errors.New("want a host name or an IP address")
		}
		return nil
	}
	sluice.RegisterConfigKey(
		sluice.ConfigKey{Key: KeyRestEnabled, Check: boolean},
		sluice.ConfigKey{Key: KeyRestAddress, Check: host},
		sluice.ConfigKey{Key: KeyRestBindAddress, Check: host},
		sluice.ConfigKey{Key: KeyRestPort, Check: port},
		sluice.ConfigKey{Key: KeyRestBindPort, Check: ports},
		sluice.ConfigKey{Key: KeyRestToken, Check: any},
		sluice.ConfigKey{Key: KeyRestAllowed, List: true, Check: any},
		sluice.ConfigKey{Key: KeyRestCert, Check: any},
		sluice.ConfigKey{Key: KeyRestKey, Check: any},
		sluice.ConfigKey{Key: KeyRestGrace, Check: func(v string) error { _, err := parseDuration(v); return err }},
		sluice.ConfigKey{Key: KeyPromPort, Check: ports},
		sluice.ConfigKey{Key: KeyPromHost, Check: host},
		sluice.ConfigKey{Key: KeyPromNaming, Check: func(v string) error { _, err := parseNaming(v); return err }},
		sluice.ConfigKey{Key: KeyLogLevel, Check: func(v string) error { _, err := parseLevel(v); return err }},
		sluice.ConfigKey{Key: KeyLogFormat, Check: func(v string) error { _, err := parseFormat(v); return err }},
		sluice.ConfigKey{Key: KeySignalAction, Check: func(v string) error { _, err := parseAction(v); return err }},
		sluice.ConfigKey{Key: KeyOtelEndpoint, Check: any},
		sluice.ConfigKey{Key: KeyOtelProtocol, Check: func(v string) error { _, err := parseProtocol(v); return err }},
		sluice.ConfigKey{Key: KeyOtelTimeout, Check: func(v string) error { _, err := parseDuration(v); return err }},
		sluice.ConfigKey{Key: KeyOtelService, Check: any},
	)
}

// settings are the runner's, from the configuration and the options.
type settings struct {
	restEnabled  bool
	restAddr     string // host:port to listen on
	restPorts    []int
	token        string
	allowedHosts []string
	cert, key    string
	grace        time.Duration

	promPorts []int // nil: no separate reporter endpoint
	promHost  string
	flink     bool

	level  slog.Level
	format string

	action SignalAction

	otelEndpoint, otelProtocol, otelService string
	otelTimeout                             time.Duration
}

// DefaultPromPort is Flink's Prometheus reporter port, where a worker
// serves its metrics unless metrics.reporter.prom.port says otherwise.
const DefaultPromPort = 9249

// DefaultShutdownGrace bounds how long the API keeps serving after the
// job ended, for the client that stopped it to read where the savepoint
// is (rest.shutdown-grace).
const DefaultShutdownGrace = 10 * time.Second

// readSettings reads the runner's keys; an error names the key, its
// value and where it came from.
func readSettings(c *sluice.Configuration, getenv func(string) string) (settings, error) {
	s := settings{restEnabled: true, restPorts: []int{8081}, grace: DefaultShutdownGrace, level: slog.LevelInfo, format: "text",
		action: Suspend, token: getenv("SLUICE_TOKEN")}
	var errs []error
	get := func(key string) (string, bool) {
		if c == nil {
			return "", false
		}
		v, ok := c.Get(key)
		return strings.TrimSpace(v), ok
	}
	fail := func(key string, err error) {
		v, _ := get(key)
		if key == KeyRestToken {
			v = "******"
		}
		errs = append(errs, &sluice.ConfigError{Key: key, Value: v, Source: c.Source(key), Err: err})
	}
	if v, ok := get(KeyRestEnabled); ok {
		b, err := parseBool(v)
		if err != nil {
			fail(KeyRestEnabled, err)
		}
		s.restEnabled = b
	}
	hostKey := ""
	restHost := "127.0.0.1"
	for _, k := range []string{KeyRestBindAddress, KeyRestAddress} {
		if v, ok := get(k); ok && v != "" {
			restHost, hostKey = v, k
			break
		}
	}
	_ = hostKey
	if v, ok := get(KeyRestPort); ok {
		p, err := parsePort(v)
		if err != nil {
			fail(KeyRestPort, err)
		}
		s.restPorts = []int{p}
	}
	if v, ok := get(KeyRestBindPort); ok {
		ps, err := parsePorts(v)
		if err != nil {
			fail(KeyRestBindPort, err)
		}
		s.restPorts = ps
	}
	s.restAddr = restHost
	if v, ok := get(KeyRestToken); ok {
		s.token = v
	}
	if v, ok := get(KeyRestAllowed); ok {
		s.allowedHosts = listItems(v)
	}
	s.cert, _ = get(KeyRestCert)
	s.key, _ = get(KeyRestKey)
	if (s.cert == "") != (s.key == "") {
		k := KeyRestKey
		if s.cert == "" {
			k = KeyRestCert
		}
		fail(k, fmt.Errorf("%s and %s go together", KeyRestCert, KeyRestKey))
	}
	if v, ok := get(KeyRestGrace); ok {
		d, err := parseDuration(v)
		if err != nil {
			fail(KeyRestGrace, err)
		}
		s.grace = d
	}
	if v, ok := get(KeyPromPort); ok {
		ps, err := parsePorts(v)
		if err != nil {
			fail(KeyPromPort, err)
		}
		s.promPorts = ps
	}
	s.promHost, _ = get(KeyPromHost)
	if v, ok := get(KeyPromNaming); ok {
		f, err := parseNaming(v)
		if err != nil {
			fail(KeyPromNaming, err)
		}
		s.flink = f
	}
	if v, ok := get(KeyLogLevel); ok {
		l, err := parseLevel(v)
		if err != nil {
			fail(KeyLogLevel, err)
		}
		s.level = l
	}
	if v, ok := get(KeyLogFormat); ok {
		f, err := parseFormat(v)
		if err != nil {
			fail(KeyLogFormat, err)
		}
		s.format = f
	}
	if v, ok := get(KeySignalAction); ok {
		a, err := parseAction(v)
		if err != nil {
			fail(KeySignalAction, err)
		}
		s.action = a
	}
	s.otelEndpoint, _ = get(KeyOtelEndpoint)
	if v, ok := get(KeyOtelProtocol); ok {
		p, err := parseProtocol(v)
		if err != nil {
			fail(KeyOtelProtocol, err)
		}
		s.otelProtocol = p
	}
	if v, ok := get(KeyOtelTimeout); ok {
		d, err := parseDuration(v)
		if err != nil {
			fail(KeyOtelTimeout, err)
		}
		s.otelTimeout = d
	}
	s.otelService, _ = get(KeyOtelService)
	return s, errors.Join(errs...)
}

func parsePort(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > 65535 {
		return 0, errors.New("want a port number in [0, 65535] (0: any free port)")
	}
	return n, nil
}

// parsePorts reads Flink's port lists: "8081", "50100-50200",
// "50100,50101" and mixes of them.
func parsePorts(v string) ([]int, error) {
	var out []int
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := parsePort(lo)
		if err != nil {
			return nil, errors.New("want a port, a range (50100-50200) or a list of them")
		}
		b := a
		if isRange {
			if b, err = parsePort(hi); err != nil || b < a {
				return nil, errors.New("want a port, a range (50100-50200) or a list of them")
			}
		}
		for p := a; p <= b; p++ {
			out = append(out, p)
		}
	}
	return out, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("want true or false")
}

func parseNaming(v string) (flink bool, err error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "sluice":
		return false, nil
	case "flink":
		return true, nil
	}
	return false, errors.New("want sluice or flink")
}

// parseLevel takes slog's and log4j's level names in any case.
func parseLevel(v string) (slog.Level, error) {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "TRACE", "DEBUG", "ALL":
		return slog.LevelDebug, nil
	case "INFO":
		return slog.LevelInfo, nil
	case "WARN", "WARNING":
		return slog.LevelWarn, nil
	case "ERROR", "FATAL":
		return slog.LevelError, nil
	case "OFF":
		return slog.LevelError + 100, nil
	}
	return 0, errors.New("want DEBUG, INFO, WARN, ERROR or OFF (log4j's TRACE and FATAL too)")
}

func parseFormat(v string) (string, error) {
	switch f := strings.ToLower(strings.TrimSpace(v)); f {
	case "text", "json":
		return f, nil
	}
	return "", errors.New("want text or json")
}

func parseAction(v string) (SignalAction, error) {
	a := SignalAction(strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(v), "-", "_")))
	switch a {
	case Suspend, StopWithSavepoint, StopWithSavepointDrain:
		return a, nil
	}
	return "", fmt.Errorf("want %s, %s or %s", Suspend, StopWithSavepoint, StopWithSavepointDrain)
}

// parseProtocol takes Flink's gRPC and HTTP (any case).
func parseProtocol(v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "grpc":
		return "grpc", nil
	case "http", "http/protobuf":
		return "http/protobuf", nil
	}
	return "", errors.New("want gRPC or HTTP")
}

// parseDuration reads durations as the Configuration does: a number and
// an optional unit (ms when none), or Go's form.
func parseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, nil
	}
	i := 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
		i++
	}
	n, err := strconv.ParseFloat(v[:i], 64)
	if err != nil || n < 0 {
		return 0, errors.New(`want a duration: "10 s", "500 ms", "1 min"`)
	}
	unit := map[string]time.Duration{"": time.Millisecond, "ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond,
		"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
		"min": time.Minute, "m": time.Minute, "minute": time.Minute, "minutes": time.Minute, "h": time.Hour, "hour": time.Hour, "hours": time.Hour}
	u, ok := unit[strings.ToLower(strings.TrimSpace(v[i:]))]
	if !ok {
		return 0, errors.New(`want a duration: "10 s", "500 ms", "1 min"`)
	}
	return time.Duration(n * float64(u)), nil
}

func listItems(v string) []string {
	v = strings.TrimSpace(v)
	v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	var out []string
	for _, item := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' }) {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// hostPort joins a host and a port as net.Dial takes them.
func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
