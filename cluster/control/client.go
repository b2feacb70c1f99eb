package control

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/runtime"
)

// NewInstance makes a random instance id (ClientConfig.Instance): one per
// worker process.
func NewInstance() string { return rand.Text() }

// ClientConfig configures a worker's end of the control plane.
type ClientConfig struct {
	// CoordinatorAddr is the coordinator's control address, host:port.
	CoordinatorAddr string
	// Auth authenticates the connection, and the coordinator, before the
	// worker sends anything (mutual TLS, a shared secret); nil is
	// plaintext.
	Auth *peerauth.Authenticator
	// WorkerID names the worker (Flink's ResourceID): a second session of
	// the same id and Instance replaces the first.
	WorkerID string
	// Instance is random per worker process (cmp.Or makes one): the
	// coordinator gives a live session's worker id to the same instance
	// only.
	Instance string
	// Slots is taskmanager.numberOfTaskSlots (default 1).
	Slots int
	// DataAddr is the address of the worker's data-plane transport.
	DataAddr string
	// Fingerprint is that of the job plan the worker built from its code:
	// the coordinator refuses another than its own.
	Fingerprint string
	// Host names the worker's host (default os.Hostname).
	Host string
	// HeartbeatInterval and HeartbeatTimeout as in ServerConfig; they
	// should be the coordinator's. The timeout also bounds the wait for
	// the registration's answer.
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// MinEpoch is the newest leader epoch the worker followed (a previous
	// Client's Epoch): a coordinator of an older one is refused with
	// ErrStaleEpoch.
	MinEpoch int64
	Logger   *slog.Logger
}

func (c *ClientConfig) fill() error {
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.HeartbeatTimeout = cmp.Or(c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	c.Slots = cmp.Or(c.Slots, 1)
	if c.Instance == "" {
		c.Instance = NewInstance()
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.CoordinatorAddr == "":
		return fmt.Errorf("control: %w: no coordinator address", ErrInvalidConfig)
	case c.WorkerID == "":
		return fmt.Errorf("control: %w: no worker id", ErrInvalidConfig)
	case c.Slots < 1:
		return fmt.Errorf("control: %w: worker %s: %d slots", ErrInvalidConfig, c.WorkerID, c.Slots)
	case c.Fingerprint == "":
		return fmt.Errorf("control: %w: worker %s: no job plan fingerprint", ErrInvalidConfig, c.WorkerID)
	}
	return checkHeartbeats(c.HeartbeatInterval, c.HeartbeatTimeout)
}

// WorkerHandler receives what the coordinator sends, on one goroutine, in
// the order it was sent; messages of another job or of an attempt that is
// not the worker's current one have been dropped. Its methods must return
// quickly (see the package documentation); the errors of the TaskGateway
// methods are logged at debug level.
type WorkerHandler interface {
	// TriggerCheckpoint, NotifyCheckpoint, AllowFinish: for the worker's
	// tasks of the current attempt.
	runtime.TaskGateway
	// Deploy starts the worker's tasks of d.Attempt, which becomes the
	// current attempt; its error is Server.Deploy's.
	Deploy(d Deployment) error
	// Cancel cancels the worker's tasks of the attempt.
	Cancel(jobID string, attempt int)
}

// QueryHandler is implemented by a WorkerHandler that answers queries
// against its tasks' state (runtime.TaskRunner's QueryState), on a
// goroutine of the query's own: it may wait for the task.
type QueryHandler interface {
	QueryState(ctx context.Context, attempt int, task checkpoint.TaskID, name string, key []byte) ([]byte, bool, error)
}

// SavepointLocator is implemented by a WorkerHandler that takes the
// coordinator's savepoint directories (Server.SetSavepointDir), as
// runtime.TaskRunner does. A WorkerHandler that is a runtime.TaskStopper
// also receives StopTask and DrainEventTime.
type SavepointLocator interface {
	SetSavepointDir(id int64, dir string)
}

// RegionHandler is implemented by a WorkerHandler that restarts failover
// regions (runtime.TaskRunner's methods of the same names); the worker
// says so when it registers (WorkerInfo.RegionRestart). StopTasks and
// DeployTasks run on a goroutine of their own (ctx ends with the
// session); StartTasks on the handler's goroutine, so that the messages
// that follow it find the tasks running.
type RegionHandler interface {
	StopTasks(ctx context.Context, attempt int, tasks []runtime.TaskRef) error
	DeployTasks(ctx context.Context, d runtime.RegionDeployment) error
	StartTasks(attempt int, tasks []runtime.TaskRef) error
}

// Client is a worker's session with the coordinator.
type Client struct {
	cfg        ClientConfig
	log        *slog.Logger
	h          WorkerHandler
	st         *connStream
	cancel     context.CancelFunc
	l          *link
	in         *inbox
	jobID      string
	epoch      int64
	lost       chan error
	pauseBeats atomic.Bool // test hook
	wg         sync.WaitGroup
	closeOnce  sync.Once

	mu       sync.Mutex
	attempt  int
	deployed bool
}

// Dial opens the worker's session: it connects to the coordinator and
// registers, returning once the coordinator accepted (or refused: an
// error wrapping ErrRefused, and ErrFingerprintMismatch or ErrStaleEpoch
// when that is why). ctx bounds the dial and the registration only; the
// session then lasts until it is lost (Lost) or closed.
func Dial(ctx context.Context, cfg ClientConfig, h WorkerHandler) (*Client, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("control: %w: worker %s: no handler", ErrInvalidConfig, cfg.WorkerID)
	}
	addr := cfg.CoordinatorAddr
	what := fmt.Sprintf("control: worker %s: register with the coordinator at %s", cfg.WorkerID, addr)
	// sctx is the session's life: its end closes the connection.
	sctx, cancel := context.WithCancel(context.Background())
	fail := func(err error) (*Client, error) {
		cancel()
		return nil, err
	}

	// The registration, bounded by ctx and heartbeat.timeout.
	registered, watched := make(chan struct{}), make(chan struct{})
	var interrupted atomic.Value // error
	go func() {
		defer close(watched)
		t := time.NewTimer(cfg.HeartbeatTimeout)
		defer t.Stop()
		select {
		case <-registered:
			return
		case <-ctx.Done():
			interrupted.Store(ctx.Err())
		case <-t.C:
			interrupted.Store(fmt.Errorf("%w: no answer within heartbeat.timeout %s", ErrHeartbeatTimeout, cfg.HeartbeatTimeout))
		}
		cancel()
	}()
	var features []string
	if _, ok := h.(RegionHandler); ok {
		features = append(features, featureRegionRestart)
	}
	reply, err := handshake(sctx, cfg, &frame{Register: &register{
		Features: features,
		Protocol: protocolVersion, WorkerID: cfg.WorkerID, Slots: cfg.Slots, DataAddr: cfg.DataAddr,
		Fingerprint: cfg.Fingerprint, Host: cfg.Host, MinEpoch: cfg.MinEpoch, Instance: cfg.Instance,
		HeartbeatInterval: int64(cfg.HeartbeatInterval), HeartbeatTimeout: int64(cfg.HeartbeatTimeout),
	}})
	close(registered)
	<-watched
	if cause, _ := interrupted.Load().(error); cause != nil {
		return fail(fmt.Errorf("%s: %w", what, cause))
	}
	if err != nil {
		return fail(fmt.Errorf("%s: %w", what, err))
	}
	r := reply.f.RegisterReply
	switch {
	case reply.f.End != "":
		return fail(fmt.Errorf("%s: %w: %s", what, ErrDisconnected, reply.f.End))
	case r == nil:
		return fail(fmt.Errorf("%s: %w: the answer is a %s, not a registration reply", what, ErrDisconnected, reply.f.kind()))
	case !r.Accepted && r.Code == refusedFingerprint:
		return fail(fmt.Errorf("%s: %w: %w: the worker's job plan is %s, the coordinator's %s: the worker runs different code than the coordinator",
			what, ErrRefused, ErrFingerprintMismatch, cfg.Fingerprint, r.Fingerprint))
	case !r.Accepted && r.Code == refusedEpoch:
		return fail(fmt.Errorf("%s: %w: %w: %s", what, ErrRefused, ErrStaleEpoch, r.Reason))
	case !r.Accepted && r.Code == refusedIdentity:
		return fail(fmt.Errorf("%s: %w: %w: %s", what, ErrRefused, ErrIdentityMismatch, r.Reason))
	case !r.Accepted:
		return fail(fmt.Errorf("%s: %w: %s", what, ErrRefused, r.Reason))
	case r.Epoch < cfg.MinEpoch:
		return fail(fmt.Errorf("%s: %w: its leader epoch is %d, the worker followed %d", what, ErrStaleEpoch, r.Epoch, cfg.MinEpoch))
	}
	if time.Duration(r.HeartbeatInterval) >= cfg.HeartbeatTimeout || cfg.HeartbeatInterval >= time.Duration(r.HeartbeatTimeout) {
		cfg.Logger.Warn("control: the coordinator's heartbeat settings do not fit the worker's: sessions will time out",
			"worker", cfg.WorkerID, "coordinator_interval", time.Duration(r.HeartbeatInterval), "coordinator_timeout", time.Duration(r.HeartbeatTimeout),
			"interval", cfg.HeartbeatInterval, "timeout", cfg.HeartbeatTimeout)
	}

	c := &Client{
		cfg: cfg, log: cfg.Logger, h: h, st: reply.st, cancel: cancel, in: newInbox(),
		jobID: r.JobID, epoch: r.Epoch, lost: make(chan error, 1),
	}
	c.l = newLink(c.log, "coordinator "+addr, r.Epoch, cfg.HeartbeatInterval, cfg.HeartbeatTimeout, &c.pauseBeats, c.in, func(cause error) {
		// Under c.l.mu: the report comes after every frame handed on. The
		// worker reports the loss (Lost), once, in its words.
		c.log.Debug("control: coordinator lost", "worker", cfg.WorkerID, "coordinator", addr, "cause", cause)
		cancel()
		c.in.close(func() {
			c.lost <- cause
			close(c.lost)
		})
	})
	c.wg.Add(4)
	go func() {
		defer c.wg.Done()
		c.in.run()
	}()
	go func() {
		defer c.wg.Done()
		c.l.runReceiver(reply.st, func(f *frame) { c.l.push(func() { c.dispatch(f) }) })
	}()
	go func() {
		defer c.wg.Done()
		c.l.runSender(reply.st)
	}()
	go func() {
		defer c.wg.Done()
		c.l.runMonitor(func() *frame {
			job, attempt := c.current()
			return &frame{Heartbeat: true, JobID: job, Attempt: attempt}
		})
	}()
	c.log.Debug("control: registered with the coordinator", "worker", cfg.WorkerID, "coordinator", addr, "job", r.JobID, "epoch", r.Epoch)
	return c, nil
}

type handshaken struct {
	st *connStream
	f  *frame
}

// handshake connects to the coordinator, authenticates the connection,
// sends the registration and reads the answer. The connection is closed
// once ctx is done.
func handshake(ctx context.Context, cfg ClientConfig, reg *frame) (handshaken, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", cfg.CoordinatorAddr)
	if err != nil {
		return handshaken{}, fmt.Errorf("%w: connect: %w", ErrDisconnected, err)
	}
	if cfg.Auth != nil {
		authed, _, err := cfg.Auth.Client(ctx, conn)
		if err != nil {
			_ = conn.Close()
			return handshaken{}, fmt.Errorf("%w: authenticate the connection: %w", ErrDisconnected, err)
		}
		conn = authed
	}
	st := newConnStream(conn, maxChunk+1, cfg.HeartbeatTimeout)
	context.AfterFunc(ctx, st.close)
	b, err := encode(reg)
	if err != nil {
		return handshaken{}, err
	}
	if len(b) > maxRegisterFrame {
		return handshaken{}, fmt.Errorf("%w: the registration is %d bytes, at most %d", ErrInvalidConfig, len(b), maxRegisterFrame)
	}
	if err := st.SendMsg(chunks(b)[0]); err != nil {
		return handshaken{}, fmt.Errorf("%w: send the registration: %s", ErrDisconnected, inWords(err))
	}
	f, err := readFrame(st, maxFrame)
	if err != nil {
		return handshaken{}, fmt.Errorf("%w: read the registration's answer: %s", ErrDisconnected, inWords(err))
	}
	return handshaken{st: st, f: f}, nil
}

// Epoch is the coordinator's leader epoch.
func (c *Client) Epoch() int64 { return c.epoch }

// JobID is the coordinator's job.
func (c *Client) JobID() string { return c.jobID }

// Lost receives why the session ended, once, then is closed: the
// coordinator's heartbeats stopped (ErrHeartbeatTimeout), the stream
// broke or the coordinator ended it (ErrDisconnected), or Close
// (ErrClosed). It comes after the handler's last call. The worker should
// then cancel its tasks and Dial again.
func (c *Client) Lost() <-chan error { return c.lost }

// Close ends the session and waits for its goroutines, the handler's
// last call included: do not call it from a handler. Messages still
// queued are dropped.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.l.end(&endCause{kind: ErrClosed, peer: c.l.peer, words: "the worker closed its session"})
		c.cancel()
		c.st.close()
		c.wg.Wait()
	})
	return nil
}

// CoordinatorGateway is the tasks' way to the coordinator. A message of
// another job or of an attempt that is not the worker's current one is
// refused with runtime.ErrStaleMessage, any once the session ended with
// its cause. The methods never wait for the network.
func (c *Client) CoordinatorGateway() runtime.CoordinatorGateway { return coordinatorGateway{c} }

// ReportMetrics sends the figures of the worker's tasks of an attempt to
// the coordinator (which serves them for the whole job); it never waits
// for the network.
func (c *Client) ReportMetrics(jobID string, attempt int, tasks []runtime.TaskMetrics) error {
	if why := c.stale(jobID, attempt); why != "" {
		return fmt.Errorf("control: metrics of worker %s: %s: %w", c.cfg.WorkerID, why, runtime.ErrStaleMessage)
	}
	if err := c.l.send(&frame{JobID: jobID, Attempt: attempt, Metrics: &metricsMsg{Tasks: tasks}}); err != nil {
		return fmt.Errorf("control: metrics of worker %s: %w", c.cfg.WorkerID, err)
	}
	return nil
}

func (c *Client) current() (job string, attempt int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobID, c.attempt
}

// stale says why a message of job and attempt is not of the worker's
// current attempt, "" when it is.
func (c *Client) stale(job string, attempt int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case job != c.jobID:
		return fmt.Sprintf("the coordinator runs job %s", c.jobID)
	case !c.deployed:
		return "no attempt deployed"
	case attempt != c.attempt:
		return fmt.Sprintf("attempt %d is current", c.attempt)
	}
	return ""
}

type coordinatorGateway struct{ c *Client }

func (g coordinatorGateway) send(from runtime.TaskRef, f *frame) error {
	c := g.c
	if why := c.stale(from.JobID, from.Attempt); why != "" {
		return fmt.Errorf("control: coordinator gateway of worker %s: %s: %s: %w", c.cfg.WorkerID, from, why, runtime.ErrStaleMessage)
	}
	f.JobID, f.Attempt = from.JobID, from.Attempt
	if err := c.l.send(f); err != nil {
		return fmt.Errorf("control: coordinator gateway of worker %s: %s: %w", c.cfg.WorkerID, from, err)
	}
	return nil
}

func (g coordinatorGateway) Acknowledge(m runtime.AcknowledgeCheckpoint) error {
	return g.send(m.From, &frame{Ack: &m})
}

func (g coordinatorGateway) Decline(m runtime.DeclineCheckpoint) error {
	return g.send(m.From, &frame{Decline: &declineMsg{From: m.From, CheckpointID: m.CheckpointID, Reason: m.Reason, Err: toWire(m.Err)}})
}

func (g coordinatorGateway) Report(m runtime.TaskEvent) error {
	return g.send(m.From, &frame{Event: &taskEventMsg{From: m.From, Kind: m.Kind, Err: toWire(m.Err)}})
}

// dispatch hands a coordinator's frame to the handler, on the inbox's
// goroutine.
func (c *Client) dispatch(f *frame) {
	if f.Deploy != nil {
		c.deploy(f)
		return
	}
	if f.Query != nil {
		c.query(f)
		return
	}
	if f.Region != nil {
		c.region(f)
		return
	}
	if f.RegisterReply != nil || (f.Cancel == nil && f.Trigger == nil && f.Notify == nil && f.AllowFinish == nil &&
		f.StopTask == nil && f.Drain == nil && f.Savepoint == nil) {
		c.log.Debug("control: unexpected message from the coordinator dropped", "worker", c.cfg.WorkerID, "message", f.kind())
		return
	}
	if why := c.stale(f.JobID, f.Attempt); why != "" {
		c.log.Debug("control: stale message dropped", "worker", c.cfg.WorkerID, "message", f.kind(), "job", f.JobID, "attempt", f.Attempt, "why", why)
		return
	}
	var err error
	switch {
	case f.Cancel != nil:
		c.h.Cancel(f.Cancel.JobID, f.Cancel.Attempt)
	case f.Trigger != nil:
		err = c.h.TriggerCheckpoint(*f.Trigger)
	case f.Notify != nil:
		err = c.h.NotifyCheckpoint(*f.Notify)
	case f.AllowFinish != nil:
		err = c.h.AllowFinish(*f.AllowFinish)
	case f.StopTask != nil, f.Drain != nil:
		stopper, ok := c.h.(runtime.TaskStopper)
		switch {
		case !ok:
			err = fmt.Errorf("control: worker %s: the handler cannot stop tasks (not a runtime.TaskStopper)", c.cfg.WorkerID)
		case f.StopTask != nil:
			err = stopper.StopTask(*f.StopTask)
		default:
			err = stopper.DrainEventTime(*f.Drain)
		}
	case f.Savepoint != nil:
		if loc, ok := c.h.(SavepointLocator); ok {
			loc.SetSavepointDir(f.Savepoint.ID, f.Savepoint.Dir)
		} else {
			err = fmt.Errorf("control: worker %s: the handler takes no savepoint directories (not a SavepointLocator)", c.cfg.WorkerID)
		}
	}
	if err != nil {
		c.log.Debug("control: a task did not take the coordinator's message", "worker", c.cfg.WorkerID, "message", f.kind(), "err", err)
	}
}

// queryTimeout bounds how long a worker waits for its task to answer a
// query (the coordinator's caller has its own deadline).
const queryTimeout = 10 * time.Second

// query answers a query on a goroutine of its own, so that a task slow to
// answer holds up nothing else the coordinator sends.
func (c *Client) query(f *frame) {
	q := *f.Query
	reply := func(value []byte, found bool, err error) {
		_ = c.l.send(&frame{JobID: f.JobID, Attempt: f.Attempt, Seq: f.Seq, QueryReply: &queryReply{Value: value, Found: found, Err: toWire(err)}})
	}
	h, ok := c.h.(QueryHandler)
	if why := c.stale(f.JobID, f.Attempt); why != "" || !ok {
		if !ok {
			why = "the worker answers no queries"
		}
		reply(nil, false, fmt.Errorf("control: worker %s: query %q of task %d: %w: %s", c.cfg.WorkerID, q.Name, q.Task, runtime.ErrQueryUnavailable, why))
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
		defer cancel()
		go func() { // the session's end ends the wait (Close waits for it)
			select {
			case <-c.l.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		reply(h.QueryState(ctx, f.Attempt, q.Task, q.Name, q.Key))
	}()
}

// region carries out a step of a failover region's restart and answers:
// stop and deploy on a goroutine of their own, so that the messages for
// the worker's other tasks go on meanwhile; start at once.
func (c *Client) region(f *frame) {
	m := *f.Region
	reply := func(err error) {
		if err != nil {
			c.log.Warn("control: a step of a failover region's restart failed", "worker", c.cfg.WorkerID, "step", m.Step, "attempt", m.Attempt, "err", err)
		}
		_ = c.l.send(&frame{JobID: f.JobID, Attempt: f.Attempt, Seq: f.Seq, RegionReply: &deployReply{Err: toWire(err)}})
	}
	what := fmt.Sprintf("control: worker %s: %s %d tasks of job %s attempt %d", c.cfg.WorkerID, m.Step, len(m.Tasks), m.JobID, m.Attempt)
	h, ok := c.h.(RegionHandler)
	switch why := c.stale(f.JobID, f.Attempt); {
	case !ok:
		reply(fmt.Errorf("%s: %w", what, ErrRegionUnsupported))
		return
	case why != "":
		reply(fmt.Errorf("%s: %s: %w", what, why, runtime.ErrStaleMessage))
		return
	}
	var step func(context.Context) error
	switch m.Step {
	case regionStart:
		reply(h.StartTasks(m.Attempt, m.Tasks))
		return
	case regionStop:
		step = func(ctx context.Context) error { return h.StopTasks(ctx, m.Attempt, m.Tasks) }
	case regionDeploy:
		d := runtime.RegionDeployment{JobID: m.JobID, RunID: m.RunID, Attempt: m.Attempt, Tasks: m.Tasks,
			OperatorAttempt: m.OperatorAttempt, Restore: m.Restore, RestoreOwned: m.RestoreOwned}
		step = func(ctx context.Context) error { return h.DeployTasks(ctx, d) }
	default:
		reply(fmt.Errorf("%s: %w: unknown step", what, errMalformed))
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { // the session's end ends the step (Close waits for it)
			select {
			case <-c.l.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		reply(step(ctx))
	}()
}

// deploy makes the deployment's attempt current, hands it to the handler
// and answers.
func (c *Client) deploy(f *frame) {
	d := *f.Deploy
	var err error
	c.mu.Lock()
	switch {
	case d.JobID != c.jobID:
		err = fmt.Errorf("control: worker %s: deployment of job %s: the coordinator runs job %s: %w", c.cfg.WorkerID, d.JobID, c.jobID, runtime.ErrStaleMessage)
	case c.deployed && d.Attempt < c.attempt:
		err = fmt.Errorf("control: worker %s: deployment of job %s attempt %d: attempt %d is current: %w", c.cfg.WorkerID, d.JobID, d.Attempt, c.attempt, runtime.ErrStaleMessage)
	default:
		c.attempt, c.deployed = d.Attempt, true
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Debug("control: stale deployment refused", "worker", c.cfg.WorkerID, "err", err)
	} else if err = c.h.Deploy(d); err != nil {
		c.log.Warn("control: deployment failed", "worker", c.cfg.WorkerID, "job", d.JobID, "attempt", d.Attempt, "err", err)
	}
	_ = c.l.send(&frame{JobID: d.JobID, Attempt: d.Attempt, Seq: f.Seq, DeployReply: &deployReply{Err: toWire(err)}}) // fails only once the session ended
}
