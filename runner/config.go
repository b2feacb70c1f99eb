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
	"github.com/sluicehq/sluice/config"
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

// The runner's keys, declared with the kinds of their values.
var (
	keyRestEnabled = config.Bool(KeyRestEnabled, "Serve the REST API, the dashboard, /metrics, /healthz and /readyz.").Default(true)
	keyRestAddress = config.Custom(KeyRestAddress,
		"Flink's advertised address: the listen address without rest.bind-address.", "host", parseHost)
	keyRestBindAddress = config.Custom(KeyRestBindAddress, "The address the REST API listens on; rest.address when unset.",
		"host", parseHost).DefaultText("127.0.0.1")
	keyRestPort     = config.Custom(KeyRestPort, "The REST API's port; 0: any free port.", "port", parsePort).Default(8081)
	keyRestBindPort = config.Custom(KeyRestBindPort,
		"Flink's port list, the first free one: 8081, 50100-50200, 50100,50101; rest.port when unset.", "ports", parsePorts)
	keyRestToken = config.String(KeyRestToken,
		"The bearer token every API call and /metrics must carry; unset: $SLUICE_TOKEN.").Sensitive()
	keyRestAllowed = config.List(KeyRestAllowed,
		"Host names a server without a token answers to, besides localhost and IP addresses.")
	keyRestCert  = config.String(KeyRestCert, "A PEM certificate chain: serve HTTPS, with "+KeyRestKey+".")
	keyRestKey   = config.String(KeyRestKey, "The PEM private key of "+KeyRestCert+".")
	keyRestGrace = config.Duration(KeyRestGrace,
		"After the job ended, how long the API waits for the client that stopped it to read where the savepoint is.").
		Default(DefaultShutdownGrace)
	keyPromPort = config.Custom(KeyPromPort, "A separate /metrics endpoint, Flink's reporter port; a port list.", "ports", parsePorts).
			DefaultText(fmt.Sprintf("%d in a worker, off otherwise", DefaultPromPort))
	keyPromHost   = config.Custom(KeyPromHost, "The reporter's listen address.", "host", parseHost).DefaultText("all interfaces")
	keyPromNaming = config.Choice(KeyPromNaming,
		"Metric names: sluice (sluice_task_numRecordsIn{job_name,vertex,subtask}) or flink (Flink's reporter's names and labels, "+
			"flink_taskmanager_job_task_operator_numRecordsIn{job_name,task_name,subtask_index,operator_name,...}).",
		"sluice", "flink").Default("sluice")
	keyLogLevel = config.Enum(KeyLogLevel, "The log level (log4j's TRACE and FATAL too).", parseLevel,
		"DEBUG", "INFO", "WARN", "ERROR", "OFF").Default(slog.LevelInfo)
	keyLogFormat    = config.Choice(KeyLogFormat, "The log format, on standard error.", "text", "json").Default("text")
	keySignalAction = config.Enum(KeySignalAction, "What SIGTERM and SIGINT do to the job (see package runner).", parseAction,
		string(Suspend), string(StopWithSavepoint), string(StopWithSavepointDrain)).Default(Suspend)
	keyOtelEndpoint = config.String(KeyOtelEndpoint,
		"Flink's trace reporter: export traces over OTLP to this URL; unset: the OTEL_* variables decide, else none.")
	keyOtelProtocol = config.Enum(KeyOtelProtocol, "The OTLP protocol.", parseProtocol, "gRPC", "HTTP").DefaultText("gRPC")
	keyOtelTimeout  = config.Duration(KeyOtelTimeout, "One export's timeout.")
	keyOtelService  = config.String(KeyOtelService, "The service.name of the traces.").DefaultText("sluice")
)

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
	read := func(err error) { errs = append(errs, err) }
	read(use(c, keyRestEnabled, &s.restEnabled))
	s.restAddr = "127.0.0.1"
	for _, k := range []*config.Key[string]{keyRestBindAddress, keyRestAddress} {
		if v, ok, err := k.Get(c); ok && err == nil && v != "" {
			s.restAddr = v
			break
		}
	}
	read(useFunc(c, keyRestPort, func(p int) { s.restPorts = []int{p} }))
	read(use(c, keyRestBindPort, &s.restPorts))
	read(use(c, keyRestToken, &s.token))
	read(use(c, keyRestAllowed, &s.allowedHosts))
	read(use(c, keyRestCert, &s.cert))
	read(use(c, keyRestKey, &s.key))
	if (s.cert == "") != (s.key == "") {
		k := KeyRestKey
		if s.cert == "" {
			k = KeyRestCert
		}
		read(c.KeyError(k, fmt.Errorf("%s and %s go together", KeyRestCert, KeyRestKey)))
	}
	read(use(c, keyRestGrace, &s.grace))
	read(use(c, keyPromPort, &s.promPorts))
	read(use(c, keyPromHost, &s.promHost))
	read(useFunc(c, keyPromNaming, func(n string) { s.flink = n == "flink" }))
	read(use(c, keyLogLevel, &s.level))
	read(use(c, keyLogFormat, &s.format))
	read(use(c, keySignalAction, &s.action))
	read(use(c, keyOtelEndpoint, &s.otelEndpoint))
	read(use(c, keyOtelProtocol, &s.otelProtocol))
	read(use(c, keyOtelTimeout, &s.otelTimeout))
	read(use(c, keyOtelService, &s.otelService))
	return s, errors.Join(errs...)
}

// use sets *dst to the key's value when c sets it.
func use[T any](c *sluice.Configuration, k *config.Key[T], dst *T) error {
	return useFunc(c, k, func(v T) { *dst = v })
}

// useFunc calls f with the key's value when c sets it.
func useFunc[T any](c *sluice.Configuration, k *config.Key[T], f func(T)) error {
	v, ok, err := k.Get(c)
	if ok && err == nil {
		f(v)
	}
	return err
}

func parseHost(v string) (string, error) {
	v = strings.TrimSpace(v)
	if strings.ContainsAny(v, " /") {
		return "", errors.New("want a host name or an IP address")
	}
	return v, nil
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

// hostPort joins a host and a port as net.Dial takes them.
func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
