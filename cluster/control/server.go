package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/runtime"
)

// Flink's heartbeat.interval and heartbeat.timeout defaults.
const (
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultHeartbeatTimeout  = 50 * time.Second
)

// ServerConfig configures the coordinator's end of the control plane.
type ServerConfig struct {
	// ListenAddr is the TCP address to listen on, host:port (port 0 picks
	// a free one: see Server.Addr).
	ListenAddr string
	// Listener, when set, is served instead of listening on ListenAddr
	// (a coordinator binds its port before it is elected, to publish it);
	// the server closes it.
	Listener net.Listener
	// Auth authenticates every connection before the server reads a byte of it
	// (mutual TLS, a shared secret); nil is plaintext, which NewServer
	// refuses beyond the loopback interface unless Insecure.
	Auth     *peerauth.Authenticator
	Insecure bool
	// HeartbeatInterval (heartbeat.interval, default 10 s) and
	// HeartbeatTimeout (heartbeat.timeout, default 50 s, more than the
	// interval).
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// Fingerprint is the job plan's: a worker with another one is refused.
	Fingerprint string
	// Epoch is the coordinator's leader epoch, in every message.
	Epoch int64
	// JobID is the job the coordinator runs.
	JobID  string
	Logger *slog.Logger
}

func (c *ServerConfig) fill() error {
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.HeartbeatTimeout = cmp.Or(c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.ListenAddr == "" && c.Listener == nil:
		return fmt.Errorf("control: %w: no listen address (host:port, port 0 picks one)", ErrInvalidConfig)
	case c.JobID == "":
		return fmt.Errorf("control: %w: no job id", ErrInvalidConfig)
	case c.Fingerprint == "":
		return fmt.Errorf("control: %w: no job plan fingerprint", ErrInvalidConfig)
	case c.Epoch < 0:
		return fmt.Errorf("control: %w: negative leader epoch %d", ErrInvalidConfig, c.Epoch)
	}
	return checkHeartbeats(c.HeartbeatInterval, c.HeartbeatTimeout)
}

func checkHeartbeats(interval, timeout time.Duration) error {
	if interval < 0 || timeout <= interval {
		return fmt.Errorf("control: %w: heartbeat.timeout %s must be more than heartbeat.interval %s (and both positive)", ErrInvalidConfig, timeout, interval)
	}
	return nil
}

// WorkerInfo describes a registered worker.
type WorkerInfo struct {
	ID string
	// Slots is the worker's taskmanager.numberOfTaskSlots.
	Slots int
	// DataAddr is the address of its data-plane transport.
	DataAddr    string
	Fingerprint string
	Host        string
	// RemoteAddr is where its session comes from.
	RemoteAddr string
	// Identity is what its connection proved (peerauth): the principal a
	// worker id is bound to.
	Identity   peerauth.Identity
	Registered time.Time
	// RegionRestart: the worker restarts failover regions (its handler is
	// a RegionHandler): Server.StopTasks, DeployTasks and StartTasks reach
	// it.
	RegionRestart bool
}

// CoordinatorHandler receives what the workers send, on one goroutine, in
// the order each worker sent it: WorkerRegistered first, then the
// worker's gateway messages, then WorkerLost (after Server.Close too).
// Its methods must return quickly (see the package documentation): a
// Server.Deploy from one holds every later event until the worker
// answers. The errors of the gateway methods are logged at debug level.
type CoordinatorHandler interface {
	runtime.CoordinatorGateway
	WorkerRegistered(w WorkerInfo)
	// WorkerLost: the worker's heartbeats stopped, its stream broke, it
	// registered again (ErrReplaced: a WorkerRegistered follows) or the
	// server closed (ErrClosed).
	WorkerLost(workerID string, cause error)
}

// MetricsReceiver is implemented by a CoordinatorHandler that takes the
// task figures workers report (Client.ReportMetrics), on the handler's
// goroutine.
type MetricsReceiver interface {
	WorkerMetrics(workerID string, attempt int, tasks []runtime.TaskMetrics)
}

// Server is the coordinator's end of the control plane: it accepts the
// workers' sessions.
type Server struct {
	cfg        ServerConfig
	log        *slog.Logger
	h          CoordinatorHandler
	lis        net.Listener
	events     *inbox
	dispatched chan struct{}
	served     chan struct{}
	pauseBeats atomic.Bool // test hook

	// unregistered counts the streams waiting for their registration.
	unregistered atomic.Int64

	mu      sync.Mutex
	closed  bool
	workers map[string]*session
	// bound is the principal each worker id registered with: another
	// principal never takes the id.
	bound     map[string]string
	attempt   int
	deployed  bool
	placement []string
	seq       uint64
	wg        sync.WaitGroup // connections, session handlers and their receivers
	// conns are the open connections, closed by Close.
	conns map[net.Conn]struct{}
}

// session is a registered worker's session.
type session struct {
	info      WorkerInfo
	instance  string
	l         *link
	announced bool // WorkerRegistered was queued; under l.mu

	pmu     sync.Mutex
	pending map[uint64]chan error
	queries map[uint64]chan *queryReply
}

// NewServer listens on cfg.ListenAddr and serves the workers' sessions,
// handing what they send to h.
func NewServer(cfg ServerConfig, h CoordinatorHandler) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("control: %w: no coordinator handler", ErrInvalidConfig)
	}
	lis := cfg.Listener
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
			return nil, fmt.Errorf("control: listen on %s: %w", cfg.ListenAddr, err)
		}
	}
	if err := peerauth.CheckListen("the control plane", lis.Addr().String(), cfg.Auth, cfg.Insecure); err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, h: h,
		events: newInbox(), dispatched: make(chan struct{}), served: make(chan struct{}),
		workers: map[string]*session{}, bound: map[string]string{}, conns: map[net.Conn]struct{}{},
	}
	s.lis = peerauth.LimitPerPeer(lis, maxConnsPerPeer, func(remote string) {
		s.log.Warn("control: connection refused: too many from one address", "remote", remote, "limit", maxConnsPerPeer)
	})
	go func() {
		defer close(s.dispatched)
		s.events.run()
	}()
	go func() {
		defer close(s.served)
		s.accept()
	}()
	s.log.Debug("control: coordinator listening", "addr", s.Addr(), "job", cfg.JobID, "epoch", cfg.Epoch, "authentication", cfg.Auth.Mode())
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Workers lists the registered workers by id.
func (s *Server) Workers() []WorkerInfo {
	s.mu.Lock()
	out := make([]WorkerInfo, 0, len(s.workers))
	for _, ss := range s.workers {
		out = append(out, ss.info)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b WorkerInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Close ends every session (each worker is reported lost with ErrClosed),
// stops listening and returns once the handler's last call returned: do
// not call it from a handler. Messages still queued are dropped.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	sessions := make([]*session, 0, len(s.workers))
	for _, ss := range s.workers {
		sessions = append(sessions, ss)
	}
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		ss.l.end(&endCause{kind: ErrClosed, peer: ss.l.peer, words: "the coordinator shut down"})
	}
	_ = s.lis.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	<-s.served
	s.wg.Wait()
	s.events.close(nil)
	<-s.dispatched
	return nil
}

// Deploy sends d to the worker and waits for its answer: nil once the
// worker's handler took it, else its error (wrapping ErrDeployFailed),
// the session's end, or ctx's. d.JobID is the server's job (empty means
// it); d.Epoch is set to the server's. From then on d.Attempt is the
// current attempt: the workers' messages of older ones are dropped, and
// d.Placement is where TaskGateway(nil) routes.
func (s *Server) Deploy(ctx context.Context, workerID string, d Deployment) error {
	d.JobID = cmp.Or(d.JobID, s.cfg.JobID)
	d.Epoch = s.cfg.Epoch
	what := fmt.Sprintf("control: deploy job %s attempt %d to worker %s", d.JobID, d.Attempt, workerID)
	if d.JobID != s.cfg.JobID {
		return fmt.Errorf("%s: the coordinator runs job %s: %w", what, s.cfg.JobID, runtime.ErrStaleMessage)
	}
	s.mu.Lock()
	if s.deployed && d.Attempt < s.attempt {
		cur := s.attempt
		s.mu.Unlock()
		return fmt.Errorf("%s: attempt %d is current: %w", what, cur, runtime.ErrStaleMessage)
	}
	ss := s.workers[workerID]
	if ss == nil {
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return fmt.Errorf("%s: %w", what, ErrClosed)
		}
		return fmt.Errorf("%s: %w", what, ErrUnknownWorker)
	}
	s.attempt, s.deployed, s.placement = d.Attempt, true, slices.Clone(d.Placement)
	s.seq++
	seq := s.seq
	s.mu.Unlock()

	if err := ss.call(ctx, &frame{JobID: d.JobID, Attempt: d.Attempt, Seq: seq, Deploy: &d}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// call sends f (its Seq set) and waits for the reply of the same Seq:
// nil, the worker's error (wrapping ErrDeployFailed), the session's end,
// or ctx's.
func (ss *session) call(ctx context.Context, f *frame) error {
	reply := ss.expect(f.Seq)
	defer ss.forget(f.Seq)
	if err := ss.l.send(f); err != nil {
		return err
	}
	var err error
	select {
	case err = <-reply:
	case <-ss.l.done:
		select {
		case err = <-reply:
		default:
			return ss.l.err()
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDeployFailed, err)
	}
	return nil
}

// StopTasks asks the worker to cancel its tasks of a failover region
// that restarts (runtime.RegionRestarter), in the executions tasks name,
// and waits until the worker answers that they exited: nil, its error
// (wrapping ErrDeployFailed), the session's end, or ctx's. The attempt
// must be the current one, and the worker one that restarts regions
// (WorkerInfo.RegionRestart; else ErrRegionUnsupported).
func (s *Server) StopTasks(ctx context.Context, workerID string, attempt int, tasks []runtime.TaskRef) error {
	return s.region(ctx, workerID, regionMsg{Attempt: attempt, Step: regionStop, Tasks: tasks})
}

// DeployTasks sends the worker its share of a failover region's new
// executions, d.Tasks the worker's tasks only, and waits until the worker
// answers that it made and restored them, as StopTasks waits.
func (s *Server) DeployTasks(ctx context.Context, workerID string, d runtime.RegionDeployment) error {
	return s.region(ctx, workerID, regionMsg{Attempt: d.Attempt, Step: regionDeploy, Tasks: d.Tasks,
		RunID: d.RunID, OperatorAttempt: d.OperatorAttempt, Restore: d.Restore, RestoreOwned: d.RestoreOwned})
}

// StartTasks has the worker run the new executions DeployTasks made, and
// waits for its answer, as StopTasks waits. Gateway messages sent before
// it reach the new executions' mailboxes, and are taken once they run.
func (s *Server) StartTasks(ctx context.Context, workerID string, attempt int, tasks []runtime.TaskRef) error {
	return s.region(ctx, workerID, regionMsg{Attempt: attempt, Step: regionStart, Tasks: tasks})
}

// region sends one step of a region's restart to the worker and waits
// for its answer.
func (s *Server) region(ctx context.Context, workerID string, m regionMsg) error {
	m.JobID = s.cfg.JobID
	what := fmt.Sprintf("control: %s %d tasks of job %s attempt %d on worker %s", m.Step, len(m.Tasks), m.JobID, m.Attempt, workerID)
	if why := s.stale(m.JobID, m.Attempt); why != "" {
		return fmt.Errorf("%s: %s: %w", what, why, runtime.ErrStaleMessage)
	}
	ss, err := s.lookup(workerID)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !ss.info.RegionRestart {
		return fmt.Errorf("%s: %w", what, ErrRegionUnsupported)
	}
	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.mu.Unlock()
	if err := ss.call(ctx, &frame{JobID: m.JobID, Attempt: m.Attempt, Seq: seq, Region: &m}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// QueryState asks the worker running task (of the deployed attempt) for
// the value of key in its queryable state name: runtime.QueryRouter's
// call, for the coordinator's Executor. Its errors keep the runtime's
// sentinels (ErrQueryUnavailable and the others) across the wire; a task
// of no registered worker, or of another attempt, is unavailable.
func (s *Server) QueryState(ctx context.Context, attempt int, task checkpoint.TaskID, name string, key []byte) ([]byte, bool, error) {
	what := fmt.Sprintf("control: query %q of task %d", name, task)
	s.mu.Lock()
	var w string
	if t := int(task); s.deployed && s.attempt == attempt && t >= 0 && t < len(s.placement) {
		w = s.placement[t]
	}
	ss := s.workers[w]
	s.seq++
	seq := s.seq
	s.mu.Unlock()
	if ss == nil {
		return nil, false, fmt.Errorf("%s: %w: no worker of attempt %d runs it", what, runtime.ErrQueryUnavailable, attempt)
	}
	reply := make(chan *queryReply, 1)
	ss.pmu.Lock()
	ss.queries[seq] = reply
	ss.pmu.Unlock()
	defer func() {
		ss.pmu.Lock()
		delete(ss.queries, seq)
		ss.pmu.Unlock()
	}()
	if err := ss.l.send(&frame{JobID: s.cfg.JobID, Attempt: attempt, Seq: seq, Query: &queryMsg{Task: task, Name: name, Key: key}}); err != nil {
		return nil, false, fmt.Errorf("%s on worker %s: %w: %w", what, w, runtime.ErrQueryUnavailable, err)
	}
	select {
	case r := <-reply:
		return r.Value, r.Found, r.Err.err()
	case <-ss.l.done:
		return nil, false, fmt.Errorf("%s on worker %s: %w: %w", what, w, runtime.ErrQueryUnavailable, ss.l.err())
	case <-ctx.Done():
		return nil, false, fmt.Errorf("%s on worker %s: %w", what, w, ctx.Err())
	}
}

// Cancel asks the worker to cancel its tasks of the attempt. It does not
// wait: the tasks report their end through the gateway.
func (s *Server) Cancel(workerID, jobID string, attempt int) error {
	what := fmt.Sprintf("control: cancel job %s attempt %d on worker %s", jobID, attempt, workerID)
	if jobID != s.cfg.JobID {
		return fmt.Errorf("%s: the coordinator runs job %s: %w", what, s.cfg.JobID, runtime.ErrStaleMessage)
	}
	ss, err := s.lookup(workerID)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := ss.l.send(&frame{JobID: jobID, Attempt: attempt, Cancel: &cancelMsg{JobID: jobID, Attempt: attempt, Epoch: s.cfg.Epoch}}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// TaskGateway is the coordinator's way to the tasks on the workers: each
// message goes to the stream of the worker placement names for its task
// (nil: the Placement of the latest Deploy). A message of another job or
// of an attempt that is not current is refused with
// runtime.ErrStaleMessage, one for an unknown worker with
// ErrUnknownWorker. The methods never wait for the network. The gateway
// is also a runtime.TaskStopper: StopTask and DrainEventTime reach the
// worker handler when it is one.
func (s *Server) TaskGateway(placement func(checkpoint.TaskID) string) runtime.TaskGateway {
	return taskGateway{s: s, placement: placement}
}

// SetSavepointDir tells every registered worker where savepoint id of the
// current attempt goes (runtime.TaskRunner.SetSavepointDir), for worker
// handlers that are a SavepointLocator. It does not wait.
func (s *Server) SetSavepointDir(id int64, dir string) error {
	attempt, deployed := s.current()
	if !deployed {
		return fmt.Errorf("control: savepoint %d directory: no attempt deployed: %w", id, runtime.ErrStaleMessage)
	}
	s.mu.Lock()
	sessions := make([]*session, 0, len(s.workers))
	for _, ss := range s.workers {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	var errs []error
	for _, ss := range sessions {
		if err := ss.l.send(&frame{JobID: s.cfg.JobID, Attempt: attempt, Savepoint: &savepointDir{ID: id, Dir: dir}}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("control: savepoint %d directory: %w", id, err)
	}
	return nil
}

// lookup finds worker id's session: ErrClosed once the server closed,
// ErrUnknownWorker when it is not registered.
func (s *Server) lookup(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.workers[id]; ss != nil {
		return ss, nil
	}
	if s.closed {
		return nil, ErrClosed
	}
	return nil, fmt.Errorf("worker %q: %w", id, ErrUnknownWorker)
}

func (s *Server) current() (attempt int, deployed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempt, s.deployed
}

// stale says why a message of job and attempt is not of the current
// attempt, "" when it is.
func (s *Server) stale(job string, attempt int) string {
	cur, deployed := s.current()
	switch {
	case job != s.cfg.JobID:
		return fmt.Sprintf("the coordinator runs job %s", s.cfg.JobID)
	case !deployed:
		return "no attempt deployed"
	case attempt != cur:
		return fmt.Sprintf("attempt %d is current", cur)
	}
	return ""
}

type taskGateway struct {
	s         *Server
	placement func(checkpoint.TaskID) string
}

func (g taskGateway) route(to runtime.TaskRef) (*session, error) {
	s := g.s
	if why := s.stale(to.JobID, to.Attempt); why != "" {
		return nil, fmt.Errorf("control: task gateway: %s: %s: %w", to, why, runtime.ErrStaleMessage)
	}
	var w string
	if g.placement != nil {
		w = g.placement(to.Task)
	} else {
		s.mu.Lock()
		if t := int(to.Task); t >= 0 && t < len(s.placement) {
			w = s.placement[t]
		}
		s.mu.Unlock()
	}
	ss, err := s.lookup(w)
	if err != nil {
		return nil, fmt.Errorf("control: task gateway: %s: %w", to, err)
	}
	return ss, nil
}

func (g taskGateway) send(to runtime.TaskRef, f *frame) error {
	ss, err := g.route(to)
	if err != nil {
		return err
	}
	f.JobID, f.Attempt = to.JobID, to.Attempt
	if err := ss.l.send(f); err != nil {
		return fmt.Errorf("control: task gateway: %s: %w", to, err)
	}
	return nil
}

func (g taskGateway) TriggerCheckpoint(m runtime.TriggerCheckpoint) error {
	return g.send(m.To, &frame{Trigger: &m})
}

func (g taskGateway) NotifyCheckpoint(m runtime.CheckpointNotification) error {
	return g.send(m.To, &frame{Notify: &m})
}

func (g taskGateway) AllowFinish(to runtime.TaskRef) error {
	return g.send(to, &frame{AllowFinish: &to})
}

func (g taskGateway) StopTask(to runtime.TaskRef) error {
	return g.send(to, &frame{StopTask: &to})
}

func (g taskGateway) DrainEventTime(to runtime.TaskRef) error {
	return g.send(to, &frame{Drain: &to})
}

var _ runtime.TaskStopper = taskGateway{}

// accept serves the connections of the listener until it is closed.
func (s *Server) accept() {
	for {
		conn, err := s.lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait, as net/http does.
			s.log.Warn("control: accept a worker's connection", "addr", s.Addr(), "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				_ = conn.Close()
			}()
			s.serveConn(conn)
		}()
	}
}

// serveConn authenticates a connection, within registerTimeout, and
// serves its session.
func (s *Server) serveConn(raw net.Conn) {
	remote := raw.RemoteAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
	_ = raw.SetDeadline(time.Now().Add(registerTimeout))
	conn, id, err := s.cfg.Auth.Server(ctx, raw)
	cancel()
	if err != nil {
		s.log.Debug("control: a connection failed its authentication", "remote", remote, "err", err)
		return
	}
	_ = raw.SetDeadline(time.Time{})
	st := newConnStream(conn, maxChunk+1, s.cfg.HeartbeatTimeout)
	defer st.close()
	if err := s.session(st, remote, id); err != nil {
		s.log.Debug("control: session ended", "remote", remote, "identity", id, "err", err)
	}
}

// session serves one worker's connection: the registration, then the
// session's sender on this goroutine until the session ends.
func (s *Server) session(st *connStream, remote string, id peerauth.Identity) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		st.sendEnd(0, "control: the coordinator is shutting down")
		return errors.New("control: the coordinator is shutting down")
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	ctx := st.Context()
	if n := s.unregistered.Add(1); n > maxUnregistered {
		s.unregistered.Add(-1)
		s.log.Warn("control: connection refused: too many waiting for their registration", "remote", remote, "limit", maxUnregistered)
		st.sendEnd(0, "control: too many registrations at once")
		return errors.New("control: too many registrations at once")
	}
	registering := true
	doneRegistering := func() {
		if registering {
			registering = false
			s.unregistered.Add(-1)
		}
	}
	defer doneRegistering()
	first := make(chan *frame, 1)
	ready := make(chan *session, 1)
	s.wg.Add(1)
	go func() { // the receiver: the registration, then the session's frames
		defer s.wg.Done()
		f, err := readFrame(st, maxRegisterFrame)
		if err != nil {
			level := slog.LevelDebug
			if errors.Is(err, errFrameTooLarge) || errors.Is(err, errMalformed) || errors.Is(err, errMessageTooLarge) {
				level = slog.LevelWarn
			}
			s.log.Log(context.Background(), level, "control: a connection ended before registering", "remote", remote, "identity", id, "err", inWords(err))
			close(first)
			return
		}
		first <- f
		select {
		case ss := <-ready:
			ss.l.runReceiver(st, func(f *frame) { s.received(ss, f) })
		case <-ctx.Done():
		}
	}()

	timeout := min(s.cfg.HeartbeatTimeout, registerTimeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var f *frame
	select {
	case f = <-first:
		if f == nil {
			return errors.New("control: no registration")
		}
	case <-timer.C:
		s.log.Warn("control: a connection sent no registration in time", "remote", remote, "identity", id, "timeout", timeout)
		st.sendEnd(0, "control: no registration in time")
		return errors.New("control: no registration in time")
	case <-ctx.Done():
		return errors.New("control: the connection closed before its registration")
	}
	ss, refusal := s.admit(f, remote, id)
	doneRegistering()
	if ss == nil {
		if b, err := encode(&frame{RegisterReply: refusal}); err == nil {
			_ = st.SendMsg(chunks(b)[0]) // the worker reads the reason
		}
		return errors.New("control: registration refused")
	}
	ready <- ss
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ss.l.runMonitor(func() *frame {
			attempt, _ := s.current()
			return &frame{Heartbeat: true, JobID: s.cfg.JobID, Attempt: attempt}
		})
	}()
	ss.l.runSender(st)
	// The worker learns why (unless it is what ended the session).
	st.sendEnd(s.cfg.Epoch, "the coordinator ended the session: "+ss.l.err().Error())
	return fmt.Errorf("the coordinator ended the session: %w", ss.l.err())
}

// checkID refuses an identifier of a registration that is empty (when
// required), longer than maxIDLen, or not printable; the reason never
// repeats the value.
func checkID(field, v string, required bool) string {
	switch {
	case v == "" && required:
		return "no " + field
	case len(v) > maxIDLen:
		return fmt.Sprintf("a %s of %d bytes (at most %d)", field, len(v), maxIDLen)
	case !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }):
		return fmt.Sprintf("a %s with bytes that are not printable text", field)
	}
	return ""
}

// admit checks a registration: a new session, its reply queued first and
// WorkerRegistered queued, or nil and the refusal. A refusal says why and
// nothing of the coordinator's job but, for a plan that differs, the
// coordinator's fingerprint.
func (s *Server) admit(f *frame, remote string, identity peerauth.Identity) (*session, *registerReply) {
	reply := &registerReply{}
	refuse := func(code, reason string) (*session, *registerReply) {
		reply.Code, reply.Reason = code, reason
		s.log.Warn("control: worker registration refused", "remote", remote, "identity", identity, "reason", reason)
		return nil, reply
	}
	r := f.Register
	if r == nil {
		return refuse(refusedInvalid, fmt.Sprintf("the first message is a %s, not a registration", f.kind()))
	}
	for _, id := range []struct {
		field, v string
		required bool
	}{{"worker id", r.WorkerID, true}, {"host", r.Host, false}, {"data address", r.DataAddr, false},
		{"fingerprint", r.Fingerprint, true}, {"instance", r.Instance, false}} {
		if why := checkID(id.field, id.v, id.required); why != "" {
			return refuse(refusedInvalid, "the registration has "+why)
		}
	}
	switch {
	case r.Protocol != protocolVersion:
		return refuse(refusedProtocol, fmt.Sprintf("worker %s speaks control protocol %d, the coordinator %d", r.WorkerID, r.Protocol, protocolVersion))
	case r.Slots < 1:
		return refuse(refusedInvalid, fmt.Sprintf("worker %s offers %d slots", r.WorkerID, r.Slots))
	case r.Fingerprint != s.cfg.Fingerprint:
		reply.Fingerprint = s.cfg.Fingerprint
		return refuse(refusedFingerprint, fmt.Sprintf("worker %s built job plan %s, the coordinator %s: the worker runs different code or configuration", r.WorkerID, r.Fingerprint, s.cfg.Fingerprint))
	case r.MinEpoch > s.cfg.Epoch:
		return refuse(refusedEpoch, fmt.Sprintf("worker %s followed leader epoch %d, this coordinator's is %d: it is not the leader", r.WorkerID, r.MinEpoch, s.cfg.Epoch))
	}
	if time.Duration(r.HeartbeatInterval) >= s.cfg.HeartbeatTimeout || s.cfg.HeartbeatInterval >= time.Duration(r.HeartbeatTimeout) {
		s.log.Warn("control: the worker's heartbeat settings do not fit the coordinator's: sessions will time out",
			"worker", r.WorkerID, "worker_interval", time.Duration(r.HeartbeatInterval), "worker_timeout", time.Duration(r.HeartbeatTimeout),
			"interval", s.cfg.HeartbeatInterval, "timeout", s.cfg.HeartbeatTimeout)
	}
	id := r.WorkerID
	// The worker id is bound to the principal that registered it first,
	// and a live session is taken over only by its own process.
	s.mu.Lock()
	bound, isBound := s.bound[id]
	old := s.workers[id]
	s.mu.Unlock()
	switch {
	case isBound && bound != identity.Principal:
		return refuse(refusedIdentity, fmt.Sprintf("worker id %s is bound to another identity than this connection's (%s)", id, identity))
	case old != nil && old.instance != r.Instance:
		return refuse(refusedIdentity, fmt.Sprintf("worker id %s has a live session of another process (from %s): "+
			"it is taken over only once that session ends (heartbeat.timeout %s)", id, old.info.RemoteAddr, s.cfg.HeartbeatTimeout))
	}
	reply.Accepted = true
	reply.Epoch, reply.JobID, reply.Fingerprint = s.cfg.Epoch, s.cfg.JobID, s.cfg.Fingerprint
	reply.HeartbeatInterval, reply.HeartbeatTimeout = int64(s.cfg.HeartbeatInterval), int64(s.cfg.HeartbeatTimeout)

	ss := &session{
		info: WorkerInfo{
			ID: r.WorkerID, Slots: r.Slots, DataAddr: r.DataAddr, Fingerprint: r.Fingerprint,
			Host: r.Host, RemoteAddr: remote, Identity: identity, Registered: time.Now(),
			RegionRestart: slices.Contains(r.Features, featureRegionRestart),
		},
		instance: r.Instance,
		pending:  map[uint64]chan error{},
		queries:  map[uint64]chan *queryReply{},
	}
	ss.l = newLink(s.log, "worker "+id, s.cfg.Epoch, s.cfg.HeartbeatInterval, s.cfg.HeartbeatTimeout, &s.pauseBeats, s.events, func(cause error) {
		// Under ss.l.mu: after every frame of the session handed on. The
		// handler reports the loss (once, in its words).
		s.log.Debug("control: worker lost", "worker", id, "cause", cause)
		s.mu.Lock()
		if s.workers[id] == ss {
			delete(s.workers, id) // before WorkerLost runs: Workers() agrees with it
		}
		s.mu.Unlock()
		if ss.announced {
			s.events.put(func() { s.h.WorkerLost(id, cause) })
		}
	})
	if err := ss.l.send(&frame{JobID: s.cfg.JobID, RegisterReply: reply}); err != nil {
		return refuse(refusedInvalid, err.Error())
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return refuse(refusedClosed, "the coordinator is shutting down")
	}
	if cur := s.workers[id]; cur != old || (s.bound[id] != "" && s.bound[id] != identity.Principal) {
		s.mu.Unlock() // another registration of the id came in between
		return refuse(refusedIdentity, fmt.Sprintf("worker id %s registered concurrently from elsewhere", id))
	}
	s.workers[id] = ss
	s.bindLocked(id, identity.Principal)
	s.mu.Unlock()
	if old != nil {
		old.l.end(&endCause{kind: ErrReplaced, peer: old.l.peer, words: fmt.Sprintf("registered again, from %s (was %s)", remote, old.info.RemoteAddr)})
	}
	info := ss.info
	ss.l.locked(func() {
		ss.announced = true
		s.events.put(func() { s.h.WorkerRegistered(info) })
	})
	s.log.Debug("control: worker registered", "worker", id, "host", r.Host, "slots", r.Slots, "data_addr", r.DataAddr, "remote", remote, "identity", identity)
	return ss, nil
}

// maxBound bounds the worker ids remembered with their principal; past
// it, those without a session are forgotten.
const maxBound = 4096

// bindLocked binds worker id to principal. s.mu is held.
func (s *Server) bindLocked(id, principal string) {
	if _, ok := s.bound[id]; !ok && len(s.bound) >= maxBound {
		for w := range s.bound {
			if s.workers[w] == nil {
				delete(s.bound, w)
			}
		}
	}
	s.bound[id] = principal
}

// received handles a frame of a registered worker on its receiver.
func (s *Server) received(ss *session, f *frame) {
	switch {
	case f.DeployReply != nil:
		ss.resolve(f.Seq, f.DeployReply.Err.err())
	case f.RegionReply != nil:
		ss.resolve(f.Seq, f.RegionReply.Err.err())
	case f.QueryReply != nil:
		ss.answer(f.Seq, f.QueryReply)
	case f.Ack != nil, f.Decline != nil, f.Event != nil, f.Metrics != nil:
		ss.l.push(func() { s.deliver(ss, f) })
	default:
		s.log.Debug("control: unexpected message from a worker dropped", "worker", ss.info.ID, "message", f.kind())
	}
}

// deliver hands a gateway message to the handler, on the event goroutine.
func (s *Server) deliver(ss *session, f *frame) {
	if why := s.stale(f.JobID, f.Attempt); why != "" {
		s.log.Debug("control: stale message dropped", "worker", ss.info.ID, "message", f.kind(), "job", f.JobID, "attempt", f.Attempt, "why", why)
		return
	}
	var err error
	switch {
	case f.Ack != nil:
		err = s.h.Acknowledge(*f.Ack)
	case f.Decline != nil:
		m := f.Decline
		err = s.h.Decline(runtime.DeclineCheckpoint{From: m.From, CheckpointID: m.CheckpointID, Reason: m.Reason, Err: m.Err.err()})
	case f.Event != nil:
		m := f.Event
		err = s.h.Report(runtime.TaskEvent{From: m.From, Kind: m.Kind, Err: m.Err.err()})
	case f.Metrics != nil:
		if mr, ok := s.h.(MetricsReceiver); ok {
			mr.WorkerMetrics(ss.info.ID, f.Attempt, f.Metrics.Tasks)
		}
	}
	if err != nil {
		s.log.Debug("control: the coordinator did not take a worker's message", "worker", ss.info.ID, "message", f.kind(), "err", err)
	}
}

func (ss *session) expect(seq uint64) chan error {
	ch := make(chan error, 1)
	ss.pmu.Lock()
	ss.pending[seq] = ch
	ss.pmu.Unlock()
	return ch
}

func (ss *session) forget(seq uint64) {
	ss.pmu.Lock()
	delete(ss.pending, seq)
	ss.pmu.Unlock()
}

// answer hands a worker's query reply to the query waiting for it.
func (ss *session) answer(seq uint64, r *queryReply) {
	ss.pmu.Lock()
	ch := ss.queries[seq]
	delete(ss.queries, seq)
	ss.pmu.Unlock()
	if ch != nil {
		ch <- r
	}
}

func (ss *session) resolve(seq uint64, err error) {
	ss.pmu.Lock()
	ch := ss.pending[seq]
	delete(ss.pending, seq)
	ss.pmu.Unlock()
	if ch == nil {
		return // Deploy gave up waiting
	}
	ch <- err
}
