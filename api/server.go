package api

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/backpressure"
	"github.com/sluicehq/sluice/runtime"
)

// DefaultAddr is where the server listens unless told otherwise: the
// loopback interface only, on Flink's REST port.
const DefaultAddr = "127.0.0.1:8081"

// Job is what the server reads from and does to a job; *runtime.Job
// (sluice.Job) implements it.
type Job interface {
	Config() runtime.Config
	Status() runtime.JobStatus
	Graph() *runtime.JobGraph
	Metrics() []runtime.TaskMetrics
	CheckpointStats() (checkpoint.JobStats, bool)
	LastRestore() (runtime.RestoreInfo, bool)
	Restarts() int64
	TriggerSavepoint(ctx context.Context, parent string) (string, error)
	StopWithSavepoint(ctx context.Context, parent string, drain bool) (string, error)
	Cancel()
	Done() <-chan struct{}
}

// Options configure a Server.
type Options struct {
	// Addr is the address to listen on; default DefaultAddr. Use
	// "127.0.0.1:0" for any free port.
	Addr string
	// Token, when set, is the bearer token every API call and /metrics
	// must carry ("Authorization: Bearer <token>"). Without one the server
	// refuses cross-origin requests that change something and requests
	// for other host names (see AllowedHosts), which keeps out web pages
	// but not whoever reaches the port: listen on the loopback interface
	// only (LoopbackAddr) unless a token is set.
	Token string
	// AllowedHosts are the host names (no port; "*.example.com" for every
	// name under example.com) a server without a token answers to besides
	// localhost, IP addresses and the host of Addr. A request for any
	// other Host is refused (403): a web page that rebinds its own name to
	// this server's address (DNS rebinding) is not let in.
	AllowedHosts []string
	// CertFile and KeyFile, when set (both), serve HTTPS with that
	// certificate chain and key (PEM), as Flink's rest.ssl.* do; TLS 1.2
	// at least.
	CertFile, KeyFile string
	// Metrics, when set, is served at /metrics (behind the token too):
	// promhttp.HandlerFor(registry, ...).
	Metrics http.Handler
	// PollInterval is how often the server copies each job's finished
	// checkpoints into its own history; default 1 s.
	PollInterval time.Duration
	// HistorySize is how many finished checkpoints per job the server keeps
	// for the summary, the timeline and details; default 200.
	HistorySize int
	// RefreshInterval is how often the dashboard refreshes; default 1 s.
	RefreshInterval time.Duration
	// Logger receives the server's logs; default slog.Default().
	Logger *slog.Logger
	// AsyncStoreDuration is how long the outcome of a completed
	// asynchronous operation (savepoint, checkpoint, disposal) is kept
	// for its client to read (Flink's rest.async.store-duration, default
	// 5 min); at most MaxOperations are kept (default 1000): a trigger
	// past it, while that many are in progress, is refused (503).
	AsyncStoreDuration time.Duration
	MaxOperations      int
	// Timeouts of the HTTP server (HTTPTimeouts; zero fields take its
	// defaults).
	Timeouts HTTPTimeouts
}

// HTTPTimeouts bound how long a client may hold a connection of the
// server: to send its request's header and its body, to read the answer,
// and idle between requests; and the size of a header.
type HTTPTimeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
}

// Defaults of HTTPTimeouts: generous for the API's small bodies and
// answers (a long /metrics scrape included), short enough that a client
// that stops sending or reading does not hold a connection for ever.
var DefaultHTTPTimeouts = HTTPTimeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: time.Minute,
	Idle: 2 * time.Minute, MaxHeaderBytes: 64 << 10}

func (t HTTPTimeouts) withDefaults() HTTPTimeouts {
	d := DefaultHTTPTimeouts
	if t.ReadHeader > 0 {
		d.ReadHeader = t.ReadHeader
	}
	if t.Read > 0 {
		d.Read = t.Read
	}
	if t.Write > 0 {
		d.Write = t.Write
	}
	if t.Idle > 0 {
		d.Idle = t.Idle
	}
	if t.MaxHeaderBytes > 0 {
		d.MaxHeaderBytes = t.MaxHeaderBytes
	}
	return d
}

// NewHTTPServer is the http.Server that serves h with the timeouts t
// (zero fields: DefaultHTTPTimeouts): the API's, and every endpoint of a
// job's process (the job runner's).
func NewHTTPServer(h http.Handler, t HTTPTimeouts, logger *slog.Logger) *http.Server {
	t = t.withDefaults()
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write,
		IdleTimeout: t.Idle, MaxHeaderBytes: t.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
}

// Server serves the API and the dashboard for the jobs added to it. It is
// safe for concurrent use.
type Server struct {
	opts         Options
	logger       *slog.Logger
	handler      http.Handler
	allowedHosts []string
	patterns     []string // the API's routes, as registered (the OpenAPI test reads them)

	ctx    context.Context // cancelled by Close: ends pollers and operations
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	jobs  map[string]*jobEntry
	order []string

	ops operations

	srvMu sync.Mutex
	srv   *http.Server
	ln    net.Listener
	tls   bool

	// standby: a coordinator waiting for its job's leadership (HA).
	standby atomic.Bool
}

// New returns a server with no jobs; Start listens, Handler serves
// without listening.
func New(opts Options) *Server {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.AsyncStoreDuration <= 0 {
		opts.AsyncStoreDuration = DefaultAsyncStoreDuration
	}
	if opts.MaxOperations <= 0 {
		opts.MaxOperations = DefaultMaxOperations
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.HistorySize <= 0 {
		opts.HistorySize = 200
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, logger: opts.Logger.With("component", "api"), jobs: map[string]*jobEntry{},
		allowedHosts: allowedHosts(opts)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.handler = s.routes()
	return s
}

// jobEntry is a job the server knows, with what it keeps about it.
type jobEntry struct {
	id        string
	job       Job
	name      string
	start     time.Time
	vertexIDs []string // by index in the graph
	rates     *backpressure.Sampler
	history   *history

	mu  sync.Mutex
	end time.Time
}

// AddJob makes the job visible and returns its id (32 hex digits, as
// Flink's job ids). The server follows its checkpoints until the job ends
// or the server closes.
func (s *Server) AddJob(j Job) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	e := &jobEntry{
		id: hex.EncodeToString(b[:]), job: j, name: j.Config().JobName, start: time.Now(),
		rates:   backpressure.NewSampler(backpressure.MinWindow),
		history: newHistory(s.opts.HistorySize),
	}
	for i, v := range j.Graph().Vertices {
		e.vertexIDs = append(e.vertexIDs, vertexID(e.id, i, v.Name))
	}
	s.mu.Lock()
	s.jobs[e.id] = e
	s.order = append(s.order, e.id)
	s.mu.Unlock()
	s.wg.Add(1)
	go s.follow(e)
	return e.id
}

// vertexID derives a vertex id (32 hex digits, as Flink's) from the job
// id and the vertex's place in the graph.
func vertexID(job string, index int, name string) string {
	h := fnv.New128a()
	fmt.Fprintf(h, "%s/%d/%s", job, index, name)
	return hex.EncodeToString(h.Sum(nil))
}

// follow copies the job's finished checkpoints into the server's history
// until the job ends (then once more) or the server closes.
func (s *Server) follow(e *jobEntry) {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.poll()
		case <-e.job.Done():
			e.poll()
			e.mu.Lock()
			e.end = time.Now()
			e.mu.Unlock()
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// poll merges the job's current statistics into the history and returns
// them.
func (e *jobEntry) poll() (checkpoint.JobStats, bool) {
	st, ok := e.job.CheckpointStats()
	if ok {
		e.history.merge(st)
	}
	return st, ok
}

func (e *jobEntry) endTime() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.end
}

// Handler returns the server's HTTP handler: the API, /metrics and the
// dashboard, with the security headers and checks (see Options.Token).
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on the configured address and serves in the background,
// over TLS when Options.CertFile and KeyFile are set.
func (s *Server) Start() error {
	var tlsConfig *tls.Config
	if s.opts.CertFile != "" || s.opts.KeyFile != "" {
		if s.opts.CertFile == "" || s.opts.KeyFile == "" {
			return fmt.Errorf("api: TLS needs both a certificate file and a key file (CertFile %q, KeyFile %q)", s.opts.CertFile, s.opts.KeyFile)
		}
		cert, err := tls.LoadX509KeyPair(s.opts.CertFile, s.opts.KeyFile)
		if err != nil {
			return fmt.Errorf("api: TLS certificate: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", s.opts.Addr, err)
	}
	srv := NewHTTPServer(s.handler, s.opts.Timeouts, s.logger)
	srv.TLSConfig = tlsConfig
	s.srvMu.Lock()
	s.srv, s.ln, s.tls = srv, ln, tlsConfig != nil
	s.srvMu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var err error
		if tlsConfig != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("api server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	s.logger.Info("api and dashboard listening", "url", s.URL(), "token", s.opts.Token != "", "tls", tlsConfig != nil)
	return nil
}

// Addr returns the address the server listens on (after Start), else
// the configured one.
func (s *Server) Addr() string {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.opts.Addr
}

// URL returns the server's base URL: https:// when it serves TLS.
func (s *Server) URL() string {
	s.srvMu.Lock()
	secure := s.tls || (s.ln == nil && s.opts.CertFile != "")
	s.srvMu.Unlock()
	if secure {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// Close stops listening, stops following jobs and abandons the wait for
// savepoints still being taken (the savepoints themselves go on).
func (s *Server) Close() error {
	s.cancel()
	s.srvMu.Lock()
	srv := s.srv
	s.srvMu.Unlock()
	var err error
	if srv != nil {
		err = CloseHTTPServer(srv)
	}
	s.wg.Wait()
	return err
}

// CloseGrace bounds how long CloseHTTPServer waits for the answers in
// flight.
const CloseGrace = 5 * time.Second

// CloseHTTPServer stops srv listening and closes it once the requests it
// is answering have their answers written, within CloseGrace; then it
// cuts what is left. A server that serves Handler must be closed so, not
// by http.Server.Close: the client that stopped a job reads where the
// savepoint is in the last answer Shutdown waited for, which Close would
// cut.
func CloseHTTPServer(srv *http.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), CloseGrace)
	defer cancel()
	err := srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A connection still busy (or opened and never used, which
		// Shutdown waits for): cut it.
		err = srv.Close()
	}
	return err
}

func (s *Server) job(id string) (*jobEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[id]
	return e, ok
}

func (s *Server) entries() []*jobEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*jobEntry, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.jobs[id])
	}
	return out
}

// routes builds the handler: Flink's REST paths, the Sluice additions and
// the dashboard.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, h func(w http.ResponseWriter, r *http.Request)) {
		s.patterns = append(s.patterns, pattern)
		mux.Handle(pattern, s.authorized(http.HandlerFunc(h)))
	}
	public := func(pattern string, h func(w http.ResponseWriter, r *http.Request)) {
		s.patterns = append(s.patterns, pattern)
		mux.HandleFunc(pattern, h)
	}
	public("GET /healthz", s.handleHealthz)
	public("GET /readyz", s.handleReadyz)
	public("GET /openapi.json", s.handleOpenAPI)
	api("GET /config", s.handleConfig)
	api("GET /overview", s.handleOverview)
	api("GET /jobs", s.handleJobs)
	api("GET /jobs/overview", s.handleJobsOverview)
	api("GET /jobs/{jobid}", s.withJob(s.handleJob))
	api("GET /jobs/{jobid}/execution-result", s.withJob(s.handleExecutionResult))
	api("PATCH /jobs/{jobid}", s.withJob(s.handleCancel))
	api("GET /jobs/{jobid}/checkpoints", s.withJob(s.handleCheckpoints))
	api("POST /jobs/{jobid}/checkpoints", s.withJob(s.handleTriggerCheckpoint))
	api("GET /jobs/{jobid}/checkpoints/{triggerid}", s.withJob(s.handleCheckpointStatus))
	api("GET /jobs/{jobid}/checkpoints/config", s.withJob(s.handleCheckpointConfig))
	api("GET /jobs/{jobid}/checkpoints/timeline", s.withJob(s.handleTimeline))
	api("GET /jobs/{jobid}/checkpoints/details/{checkpointid}", s.withJob(s.handleCheckpointDetails))
	api("GET /jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}", s.withJob(s.handleSubtaskDetails))
	api("GET /jobs/{jobid}/exceptions", s.withJob(s.handleExceptions))
	api("GET /jobs/{jobid}/vertices/{vertexid}", s.withJob(s.handleVertex))
	api("GET /jobs/{jobid}/vertices/{vertexid}/metrics", s.withJob(s.handleVertexMetrics))
	api("GET /jobs/{jobid}/vertices/{vertexid}/watermarks", s.withJob(s.handleWatermarks))
	api("GET /jobs/{jobid}/vertices/{vertexid}/backpressure", s.withJob(s.handleBackpressure))
	api("POST /jobs/{jobid}/savepoints", s.withJob(s.handleTriggerSavepoint))
	api("GET /jobs/{jobid}/savepoints/{triggerid}", s.withJob(s.handleSavepointStatus))
	api("POST /jobs/{jobid}/stop", s.withJob(s.handleStop))
	api("GET /jobs/{jobid}/queryable-state", s.withJob(s.handleQueryableStates))
	api("GET /jobs/{jobid}/queryable-state/{name}", s.withJob(s.handleQueryState))
	api("GET /jobs/{jobid}/resource-requirements", s.withJob(s.handleResourceRequirements))
	api("PUT /jobs/{jobid}/resource-requirements", s.withJob(s.handleSetResourceRequirements))
	api("GET /jobs/{jobid}/autoscaler", s.withJob(s.handleAutoscaler))
	api("POST /savepoint-disposal", s.handleDisposeSavepoint)
	api("GET /savepoint-disposal/{triggerid}", s.handleDisposalStatus)
	if s.opts.Metrics != nil {
		s.patterns = append(s.patterns, "GET /metrics")
		mux.Handle("GET /metrics", s.authorized(s.opts.Metrics))
	}
	s.dashboard(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not found: %s %s", r.Method, r.URL.Path)
	})
	return s.guard(mux)
}

// Routes returns the method and path patterns the server answers (its
// API, the probes, the OpenAPI document and /metrics when served; not the
// dashboard's pages), in net/http.ServeMux syntax: "GET /jobs/{jobid}".
func (s *Server) Routes() []string { return append([]string(nil), s.patterns...) }

// withJob resolves {jobid}: a job id, a unique prefix of one, or a job
// name.
func (s *Server) withJob(h func(w http.ResponseWriter, r *http.Request, e *jobEntry)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("jobid")
		e, err := s.resolve(id)
		if err != nil {
			writeError(w, http.StatusNotFound, "%v", err)
			return
		}
		h(w, r, e)
	}
}

// ErrJobNotFound is returned (wrapped) for a job id or name the server
// does not know.
var ErrJobNotFound = errors.New("job not found")

func (s *Server) resolve(ref string) (*jobEntry, error) {
	if e, ok := s.job(ref); ok {
		return e, nil
	}
	var found []*jobEntry
	for _, e := range s.entries() {
		if e.name == ref || (len(ref) >= 4 && strings.HasPrefix(e.id, ref)) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("%w: %q", ErrJobNotFound, ref)
	}
	// Several: the newest job of that name wins, as the newest run of it.
	return found[len(found)-1], nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, ErrorResponse{Errors: []string{fmt.Sprintf(format, args...)}})
}

func (s *Server) handleConfig(w http.ResponseWriter, r *http.Request) {
	_, off := time.Now().Zone()
	writeJSON(w, http.StatusOK, DashboardConfiguration{
		RefreshInterval: s.opts.RefreshInterval.Milliseconds(), TimezoneName: time.Local.String(),
		TimezoneOffset: int64(off) * 1000, FlinkVersion: Version, FlinkRevision: "",
		Features: DashboardFeatures{WebCancel: true},
	})
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

// ObserveJob serves a job that has just started (sluice.WithObservers
// calls it).
func (s *Server) ObserveJob(j *runtime.Job) { s.AddJob(j) }
