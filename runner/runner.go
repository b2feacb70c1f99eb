package runner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	_ "github.com/sluicehq/sluice/checkpoint/storage/s3" // s3:// checkpoint directories, the s3.* keys
	"github.com/sluicehq/sluice/cluster"
	_ "github.com/sluicehq/sluice/cluster/ha/etcd" // high-availability.etcd.* for a job run as a cluster
	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/tracing"
)

// Option configures Run.
type Option func(*options)

type options struct {
	conf       *sluice.Configuration
	logger     *slog.Logger
	logOut     io.Writer
	registry   *prometheus.Registry
	signals    []os.Signal
	started    func(Started)
	getenv     func(string) string
	grace      *time.Duration
	restAddr   string
	restAddrOK bool
	noREST     bool
	promAddr   *string
}

// WithConfiguration reads the runner's keys from c instead of the
// configuration the environment was made with (sluice.WithConfiguration).
func WithConfiguration(c *sluice.Configuration) Option { return func(o *options) { o.conf = c } }

// WithLogger logs to l instead of a logger made from log.level and
// log.format (the job gets it too unless it has its own).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithLogOutput writes the logs made from log.level and log.format to w
// instead of standard error.
func WithLogOutput(w io.Writer) Option { return func(o *options) { o.logOut = w } }

// WithRegistry registers the job's metrics on reg, served at /metrics,
// instead of a new registry with the Go runtime's and the process's
// collectors.
func WithRegistry(reg *prometheus.Registry) Option { return func(o *options) { o.registry = reg } }

// WithSignals sets the signals that end the job (execution.signal.action
// says how); default SIGINT and SIGTERM. None: only ctx ends it.
func WithSignals(sigs ...os.Signal) Option {
	return func(o *options) { o.signals = append([]os.Signal{}, sigs...) }
}

// WithRESTAddress listens on addr (host:port; port 0 for any free one)
// instead of the rest.* keys' address.
func WithRESTAddress(addr string) Option {
	return func(o *options) { o.restAddr, o.restAddrOK = addr, true }
}

// WithoutREST serves no REST API (rest.enabled false).
func WithoutREST() Option { return func(o *options) { o.noREST = true } }

// WithPrometheusAddress serves the separate Prometheus endpoint
// (/metrics, /healthz, /readyz) on addr (host:port) instead of the
// metrics.reporter.prom.* keys' address; empty: none, a worker's neither.
func WithPrometheusAddress(addr string) Option { return func(o *options) { o.promAddr = &addr } }

// OnStarted calls f once the job and its endpoints run, with where they
// are: for a program to print them.
func OnStarted(f func(Started)) Option { return func(o *options) { o.started = f } }

// Started says where a running job's endpoints are.
type Started struct {
	// Role is the process's role (cluster.RoleSingle: "").
	Role cluster.Role
	// Job is the job's handle; nil in a worker.
	Job *sluice.Job
	// APIURL is the base URL of the REST API and dashboard; /metrics,
	// /healthz and /readyz are under it. Empty without the API (a
	// worker, rest.enabled false).
	APIURL string
	// MetricsURL is the URL of the separate Prometheus endpoint
	// (metrics.reporter.prom.port, a worker's); empty without one.
	MetricsURL string
}

// Run runs env's job as a program does: it makes the logger, the
// metrics, the traces and the hooks of every Kafka client from the
// configuration, starts the job (in the role the environment has), serves
// the REST API and dashboard, /metrics, /healthz and /readyz, and waits
// until the job ends, ctx is done or a signal arrives (see the package
// comment). It returns nil when the job finished (a stop with a
// savepoint too) or a signal suspended it; ErrJobSuspended when ctx
// suspended it; the job's error otherwise.
func Run(ctx context.Context, env *sluice.Environment, opts ...Option) error {
	o := options{signals: []os.Signal{os.Interrupt, syscall.SIGTERM}, getenv: os.Getenv}
	for _, opt := range opts {
		opt(&o)
	}
	conf := o.conf
	if conf == nil {
		conf = env.Configuration()
	}
	s, err := readSettings(conf, o.getenv)
	if err != nil {
		return err
	}
	if o.grace != nil {
		s.grace = *o.grace
	}
	if o.noREST {
		s.restEnabled = false
	}

	// Logging.
	logger := o.logger
	if logger == nil {
		if l := env.Config().Logger; l != nil {
			logger = l
		} else {
			out := o.logOut
			if out == nil {
				out = os.Stderr
			}
			hopts := &slog.HandlerOptions{Level: s.level}
			if s.format == "json" {
				logger = slog.New(slog.NewJSONHandler(out, hopts))
			} else {
				logger = slog.New(slog.NewTextHandler(out, hopts))
			}
			slog.SetDefault(logger)
		}
	}
	if env.Config().Logger == nil {
		env.Configure(sluice.WithLogger(logger))
	}

	// Metrics, and the Kafka clients' metrics. (The clients log through
	// the connector's Logger, else the job's: see internal/kafkaclient.)
	reg := o.registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	var copts []metrics.Option
	if s.flink {
		copts = append(copts, metrics.WithFlinkNames())
	}
	collector := metrics.NewCollector(copts...)
	defer metrics.RegisterKafkaClients(reg)()
	// The configuration's Kafka client properties (kafka.properties.*:
	// security.protocol, sasl.*, ssl.*, client.id) reach every client the
	// connectors make; options a connector is given in code win.
	if conf != nil {
		kopts, err := kafkaclient.ConfiguredOptions(conf)
		if err != nil {
			return fmt.Errorf("runner: %w", err)
		}
		if len(kopts) > 0 {
			defer kafkaclient.AddClientHook(func(kafkaclient.ClientInfo) []kgo.Opt { return kopts })()
		}
	}
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})

	// Traces.
	tp, shutdownTraces, export, err := tracing.Provider(ctx, tracing.Settings{Endpoint: s.otelEndpoint, Protocol: s.otelProtocol,
		Timeout: s.otelTimeout, ServiceName: s.otelService})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTraces(sctx); err != nil {
			logger.Warn("flush traces", "err", err)
		}
	}()
	logger.Info("traces", "exported", export.Enabled, "why", export.Reason)
	tracer := tracing.New(tp)

	cc, err := cluster.ConfigOf(env)
	if err != nil {
		return err
	}
	role := cc.Role
	r := &run{o: o, s: s, logger: logger, env: env, reg: reg, collector: collector, metrics: metricsHandler}
	if role == cluster.RoleWorker {
		return r.worker(ctx)
	}
	reg.MustRegister(collector)
	env.Configure(sluice.WithObservers(collector, tracer))
	return r.runJob(ctx, role)
}

// run is one Run's state.
type run struct {
	o         options
	s         settings
	logger    *slog.Logger
	env       *sluice.Environment
	reg       *prometheus.Registry
	collector *metrics.Collector
	metrics   http.Handler

	mu      sync.Mutex
	job     *sluice.Job
	ready   func() (bool, string)
	standby bool // a coordinator waiting for the job's leadership
}

// ObserveStandby notes a coordinator standing by for the job's
// leadership: it is alive and ready (its probes pass), it has no job yet.
func (r *run) ObserveStandby(waiting bool) {
	r.mu.Lock()
	r.standby = waiting
	r.mu.Unlock()
	if waiting {
		r.logger.Info("standing by: another coordinator leads the job; this one takes over when it goes")
	}
}

// job runs the job in this process, or as the coordinator.
func (r *run) runJob(ctx context.Context, role cluster.Role) error {
	jobCtx, suspend := context.WithCancel(ctx)
	defer suspend()
	var servers []*http.Server
	defer func() {
		// Gracefully: the API's last answer may be the one that tells
		// the client that stopped the job where the savepoint is.
		for _, srv := range servers {
			_ = api.CloseHTTPServer(srv)
		}
	}()
	started := Started{Role: role}
	var apiSrv *api.Server
	if r.s.restEnabled {
		ln, err := r.listenREST()
		if err != nil {
			return err
		}
		addr := ln.Addr().String()
		if r.s.token == "" && !api.LoopbackAddr(addr) {
			r.logger.Warn("the API listens beyond the loopback interface without a token: whoever reaches it can stop or cancel the job; set " + KeyRestToken + " or $SLUICE_TOKEN")
		}
		apiSrv = api.New(api.Options{Addr: addr, Token: r.s.token, AllowedHosts: r.s.allowedHosts, CertFile: r.s.cert, KeyFile: r.s.key,
			Logger: r.logger, Metrics: r.metrics})
		r.env.Configure(sluice.WithObservers(apiSrv))
		// The API serves /healthz and /readyz itself.
		srv, url, err := r.serve(ln, apiSrv.Handler(), r.s.cert, r.s.key)
		if err != nil {
			return err
		}
		servers = append(servers, srv)
		started.APIURL = url
		r.logger.Info("API, dashboard and /metrics", "url", url, "token", r.s.token != "", "tls", r.s.cert != "")
	}
	if r.s.promPorts != nil || (r.o.promAddr != nil && *r.o.promAddr != "") {
		srv, url, err := r.reporter(r.s.promPorts)
		if err != nil {
			return err
		}
		servers = append(servers, srv)
		started.MetricsURL = url
	}
	r.env.Configure(sluice.WithObservers(r))
	r.setReady(func() (bool, string) {
		r.mu.Lock()
		j, standby := r.job, r.standby
		r.mu.Unlock()
		if standby {
			return true, "standby"
		}
		if j == nil {
			return false, "starting"
		}
		st := j.Status()
		return st == runtime.JobRunning, st.String()
	})

	job, err := r.env.ExecuteAsync(jobCtx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.job = job
	r.mu.Unlock()
	started.Job = job
	signaled := r.handleSignals(jobCtx, job, suspend)
	if r.o.started != nil {
		r.o.started(started)
	}
	err = job.Wait()
	if apiSrv != nil {
		// A client that stopped the job learns where the savepoint is
		// from the API: keep serving until it read that, within the
		// grace, which a signal or ctx ends.
		gctx, cancel := context.WithTimeout(ctx, r.s.grace)
		stopGrace := r.onSignal(cancel)
		if serr := apiSrv.Shutdown(gctx); serr != nil {
			r.logger.Warn("close the API server", "err", serr)
		}
		stopGrace()
		cancel()
	}
	return r.outcome(err, signaled())
}

// outcome is Run's result from the job's: a suspension by a signal is
// a normal end.
func (r *run) outcome(err error, signaled bool) error {
	switch {
	case err == nil:
		r.logger.Info("job finished")
		return nil
	case errors.Is(err, sluice.ErrJobSuspended) && signaled:
		r.logger.Info("job suspended; it resumes from its latest checkpoint at the next start")
		return nil
	}
	return err
}

// worker runs the tasks the coordinator places on this process, with
// its own Prometheus endpoint (labelled worker).
func (r *run) worker(ctx context.Context) error {
	jobCtx, suspend := context.WithCancel(ctx)
	defer suspend()
	ports := r.s.promPorts
	if ports == nil {
		ports = []int{DefaultPromPort}
	}
	serve := r.o.promAddr == nil || *r.o.promAddr != ""
	var once sync.Once
	var view sluice.WorkerView
	r.env.Configure(sluice.WithObservers(workerObserver(func(v sluice.WorkerView) {
		once.Do(func() {
			r.collector.AddJob(v)
			prometheus.WrapRegistererWith(prometheus.Labels{"worker": v.WorkerID()}, r.reg).MustRegister(r.collector)
			r.mu.Lock()
			view = v
			r.mu.Unlock()
		})
	})))
	r.setReady(func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if view == nil {
			return false, "not registered with the coordinator"
		}
		return true, "registered"
	})
	var url string
	if serve {
		srv, u, err := r.reporter(ports)
		if err != nil {
			return err
		}
		defer func() { _ = api.CloseHTTPServer(srv) }()
		url = u
	}
	signaled := r.handleSignals(jobCtx, nil, suspend)
	if r.o.started != nil {
		r.o.started(Started{Role: cluster.RoleWorker, MetricsURL: url})
	}
	err := r.env.Execute(jobCtx)
	if err == nil {
		r.logger.Info("worker exited")
		return nil
	}
	return r.outcome(err, signaled())
}

type workerObserver func(sluice.WorkerView)

func (f workerObserver) ObserveWorker(v sluice.WorkerView) { f(v) }

// handleSignals acts on the configured signals until ctx is done, and
// returns whether one arrived.
func (r *run) handleSignals(ctx context.Context, job *sluice.Job, suspend context.CancelFunc) (signaled func() bool) {
	var mu sync.Mutex
	got := false
	if len(r.o.signals) == 0 {
		return func() bool { return false }
	}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, r.o.signals...)
	go func() {
		defer signal.Stop(ch)
		stopping := false
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-ch:
				mu.Lock()
				got = true
				mu.Unlock()
				if job == nil || r.s.action == Suspend || stopping {
					r.logger.Info("signal: suspending the job", "signal", sig.String())
					suspend()
					continue
				}
				stopping = true
				drain := r.s.action == StopWithSavepointDrain
				r.logger.Info("signal: stopping the job with a savepoint (a second signal suspends it)", "signal", sig.String(), "drain", drain)
				go func() {
					path, err := job.StopWithSavepoint(ctx, "", drain)
					if err != nil {
						r.logger.Error("stop with savepoint failed; suspending the job", "err", err)
						suspend()
						return
					}
					r.logger.Info("job stopped with a savepoint", "savepoint", path)
				}()
			}
		}
	}()
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// onSignal calls f on the next configured signal, until stop.
func (r *run) onSignal(f func()) (stop func()) {
	if len(r.o.signals) == 0 {
		return func() {}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, r.o.signals...)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			f()
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

func (r *run) setReady(f func() (bool, string)) {
	r.mu.Lock()
	r.ready = f
	r.mu.Unlock()
}

// health mounts /healthz (the process serves) and /readyz (the job runs;
// a worker: it registered with the coordinator), as Kubernetes probes
// read them.
func (r *run) health(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		f := r.ready
		r.mu.Unlock()
		ok, why := false, "starting"
		if f != nil {
			ok, why = f()
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = io.WriteString(w, why+"\n")
	})
}

// listenREST listens on the REST address: the first free port of the
// configured ones.
func (r *run) listenREST() (net.Listener, error) {
	if r.o.restAddrOK {
		ln, err := net.Listen("tcp", r.o.restAddr)
		if err != nil {
			return nil, fmt.Errorf("runner: REST API: %w", err)
		}
		return ln, nil
	}
	return listenFirst(r.s.restAddr, r.s.restPorts, "REST API ("+KeyRestBindPort+")")
}

func listenFirst(host string, ports []int, what string) (net.Listener, error) {
	var errs []error
	for _, p := range ports {
		ln, err := net.Listen("tcp", hostPort(host, p))
		if err == nil {
			return ln, nil
		}
		errs = append(errs, err)
		if len(errs) >= 3 && len(ports) > 3 {
			break
		}
	}
	return nil, fmt.Errorf("runner: %s: no port free on %s: %w", what, host, errors.Join(errs...))
}

// reporter serves /metrics, /healthz and /readyz on Flink's Prometheus
// reporter port.
func (r *run) reporter(ports []int) (*http.Server, string, error) {
	var ln net.Listener
	var err error
	if r.o.promAddr != nil && *r.o.promAddr != "" {
		if ln, err = net.Listen("tcp", *r.o.promAddr); err != nil {
			err = fmt.Errorf("runner: Prometheus endpoint: %w", err)
		}
	} else {
		ln, err = listenFirst(r.s.promHost, ports, "Prometheus endpoint ("+KeyPromPort+")")
	}
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	r.health(mux)
	mux.Handle("GET /metrics", r.metrics)
	srv, url, err := r.serve(ln, mux, "", "")
	if err != nil {
		return nil, "", err
	}
	r.logger.Info("Prometheus endpoint", "url", url+"/metrics")
	return srv, url, nil
}

// serve serves h on ln in the background, over TLS with cert and key.
func (r *run) serve(ln net.Listener, h http.Handler, cert, key string) (*http.Server, string, error) {
	srv := api.NewHTTPServer(h, api.HTTPTimeouts{}, r.logger)
	scheme := "http"
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			_ = ln.Close()
			return nil, "", fmt.Errorf("runner: REST API TLS (%s, %s): %w", KeyRestCert, KeyRestKey, err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		scheme = "https"
	}
	go func() {
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.logger.Error("HTTP server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return srv, scheme + "://" + urlHost(ln.Addr()), nil
}

// urlHost is a listener's address as a URL's host: the loopback address
// for an unspecified one.
func urlHost(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
