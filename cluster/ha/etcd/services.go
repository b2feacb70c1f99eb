package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/sluicehq/sluice/cluster/ha"
)

// retryWait is the pause before a read loop tries etcd again after an
// error that is not the end (etcd unreachable, a watch compacted).
const retryWait = 200 * time.Millisecond

func init() {
	ha.RegisterType("etcd", func(ctx context.Context, cfg ha.Config) (ha.Services, error) {
		s, err := Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return services{s}, nil
	})
}

// services are Services as ha.Services: Campaign returns the
// ha.Leadership interface.
type services struct{ *Services }

func (s services) Campaign(ctx context.Context, jobID, candidate string) (ha.Leadership, error) {
	l, err := s.Services.Campaign(ctx, jobID, candidate)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Services are the HA services of the jobs of one process, on one etcd
// client. Their methods are safe for concurrent use.
type Services struct {
	cfg    ha.Config
	client *clientv3.Client
	log    *slog.Logger

	wg        sync.WaitGroup // the goroutines of leaderships and watches
	closeOnce sync.Once
	closeErr  error
}

// Open connects to etcd and checks that it answers within ctx and the
// dial timeout.
func Open(ctx context.Context, cfg ha.Config) (*Services, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Username:    cfg.Username,
		Password:    cfg.Password,
		TLS:         cfg.TLS,
		Logger:      zapToSlog(cfg.Logger),
		// Reconnect soon after etcd is back: gRPC's default backoff grows
		// to two minutes, far past a lease.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: cfg.DialTimeout,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("ha: connect to etcd %v: %s: %w", cfg.Endpoints, whyRefused(cfg, err), err)
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := client.Get(cctx, cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("ha: etcd %v: %s: %w", cfg.Endpoints, whyRefused(cfg, err), err)
	}
	return &Services{cfg: cfg, client: client, log: cfg.Logger}, nil
}

// whyRefused says, naming the keys to check, why etcd did not answer.
func whyRefused(cfg ha.Config, err error) string {
	msg := err.Error()
	if cfg.Username != "" && !errors.Is(err, rpctypes.ErrAuthFailed) && !errors.Is(err, rpctypes.ErrGRPCAuthFailed) {
		// The client hides a refused login behind its dial's timeout:
		// ask etcd about the user alone.
		if perr := probeLogin(cfg); perr != nil {
			err = perr
		}
	}
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrGRPCAuthFailed):
		return fmt.Sprintf("authentication failed for user %q (%s, %s)", cfg.Username, ha.KeyUsername.Name(), ha.KeyPassword.Name())
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrGRPCPermissionDenied):
		return fmt.Sprintf("user %q may not read %s/ (%s)", cfg.Username, cfg.Prefix, ha.KeyUsername.Name())
	case errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrGRPCUserEmpty),
		errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrGRPCInvalidAuthToken):
		return fmt.Sprintf("etcd wants a user (%s, %s)", ha.KeyUsername.Name(), ha.KeyPassword.Name())
	case strings.Contains(msg, "certificate") || strings.Contains(msg, "tls:") || strings.Contains(msg, "x509"):
		return fmt.Sprintf("TLS failed (%s, %s, %s; https endpoints)", ha.KeyTLSCA.Name(), ha.KeyTLSCert.Name(), ha.KeyTLSKey.Name())
	case cfg.TLS != nil:
		return fmt.Sprintf("no answer (with TLS from %s, %s, %s: https endpoints and etcd's CA?)", ha.KeyTLSCA.Name(), ha.KeyTLSCert.Name(), ha.KeyTLSKey.Name())
	}
	return "no answer (high-availability.etcd.endpoints)"
}

// probeLogin logs in as cfg's user on a client of its own: the error
// etcd gives a wrong password (nil when the login works or etcd does not
// answer).
func probeLogin(cfg ha.Config) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: cfg.DialTimeout, TLS: cfg.TLS, Logger: zap.NewNop()})
	if err != nil {
		return nil
	}
	defer c.Close()
	sctx, scancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
	_, err = c.Status(sctx, cfg.Endpoints[0]) // answered, if only "user name is empty"
	scancel()
	if err != nil && !errors.Is(err, rpctypes.ErrUserEmpty) && !errors.Is(err, rpctypes.ErrGRPCUserEmpty) {
		return nil // etcd does not answer at all (TLS, the network)
	}
	// etcd checks a password with bcrypt: slow on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), max(cfg.DialTimeout, 10*time.Second))
	defer cancel()
	if _, err := c.Authenticate(ctx, cfg.Username, cfg.Password); errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrGRPCAuthFailed) {
		return err
	}
	return nil
}

// Close closes the etcd client, after which no call succeeds. Leaderships
// not resigned are lost at once here and on the server when their lease
// expires: resign first to hand over without waiting.
func (s *Services) Close() error {
	s.closeOnce.Do(func() {
		if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.closeErr = fmt.Errorf("ha: close etcd client: %w", err)
		}
		s.wg.Wait()
	})
	return s.closeErr
}

// Client is the etcd client, for what this package does not cover.
func (s *Services) Client() *clientv3.Client { return s.client }

func checkJobID(jobID string) error {
	if jobID == "" || strings.Contains(jobID, "/") {
		return fmt.Errorf("%w: job id %q (not empty, no /)", ha.ErrInvalidArgument, jobID)
	}
	return nil
}

func (s *Services) jobKey(jobID, leaf string) string {
	return s.cfg.Prefix + "/jobs/" + jobID + "/" + leaf
}

// leaderPrefix is the election prefix, without its trailing slash.
func (s *Services) leaderPrefix(jobID string) string { return s.jobKey(jobID, "leader") }

// Leader returns the job's current leader, or ErrNoLeader.
func (s *Services) Leader(ctx context.Context, jobID string) (candidate string, epoch int64, err error) {
	if err := checkJobID(jobID); err != nil {
		return "", 0, err
	}
	li, _, err := s.leader(ctx, jobID)
	if err != nil {
		return "", 0, fmt.Errorf("ha: leader of job %s: %w", jobID, err)
	}
	if li.Epoch == 0 {
		return "", 0, fmt.Errorf("ha: job %s: %w", jobID, ha.ErrNoLeader)
	}
	return li.Candidate, li.Epoch, nil
}

// leader reads the first-created key of the election: the zero LeaderInfo
// when there is none, and the revision read at.
func (s *Services) leader(ctx context.Context, jobID string) (ha.LeaderInfo, int64, error) {
	resp, err := s.client.Get(ctx, s.leaderPrefix(jobID)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return ha.LeaderInfo{}, 0, err
	}
	if len(resp.Kvs) == 0 {
		return ha.LeaderInfo{}, resp.Header.Revision, nil
	}
	kv := resp.Kvs[0]
	return ha.LeaderInfo{Candidate: string(kv.Value), Epoch: kv.CreateRevision}, resp.Header.Revision, nil
}

// WatchLeader reports the job's leader: the current one first (the zero
// LeaderInfo when there is none), then each change, until ctx is done or
// the Services are closed, when the channel is closed. A reader that
// falls behind misses intermediate leaders, never the latest; etcd being
// unreachable delays the reports, it does not end them.
func (s *Services) WatchLeader(ctx context.Context, jobID string) <-chan ha.LeaderInfo {
	ch := make(chan ha.LeaderInfo)
	if err := checkJobID(jobID); err != nil {
		s.log.Error("ha: watch leader", "job", jobID, "error", err)
		close(ch)
		return ch
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.client.Ctx(), cancel)
	s.wg.Go(func() {
		defer close(ch)
		defer stop()
		defer cancel()
		s.watchLeader(ctx, jobID, ch)
	})
	return ch
}

func (s *Services) watchLeader(ctx context.Context, jobID string, ch chan<- ha.LeaderInfo) {
	pfx := s.leaderPrefix(jobID) + "/"
	last, sent := ha.LeaderInfo{}, false
	for ctx.Err() == nil {
		li, rev, err := s.leader(ctx, jobID)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("ha: read leader", "job", jobID, "error", err)
				sleep(ctx, retryWait)
			}
			continue
		}
		if !sent || li != last {
			select {
			case ch <- li:
				last, sent = li, true
			case <-ctx.Done():
				return
			}
		}
		// Any change under the prefix may change the leader: read again.
		wctx, wcancel := context.WithCancel(ctx)
		wch := s.client.Watch(wctx, pfx, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		select {
		case wr, ok := <-wch:
			switch {
			case ctx.Err() != nil:
			case !ok:
				sleep(ctx, retryWait)
			case wr.Err() != nil:
				s.log.Warn("ha: watch leader", "job", jobID, "error", wr.Err())
				sleep(ctx, retryWait)
			}
		case <-ctx.Done():
		}
		wcancel()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// storedPointer is the JSON of the checkpoint key; Epoch is the leader
// that wrote it, for whoever reads the key with etcdctl.
type storedPointer struct {
	ID    int64  `json:"id"`
	Path  string `json:"path"`
	RunID string `json:"run_id,omitempty"`
	Epoch int64  `json:"epoch"`
}

// maxPointerPath bounds the path of a checkpoint pointer.
const maxPointerPath = 4096

// decodePointer decodes the checkpoint key's value: a checkpoint id of 1
// or more and a path (a directory, no control character), or
// ErrBadPointer naming the key.
func decodePointer(key string, value []byte) (storedPointer, error) {
	var p storedPointer
	if err := json.Unmarshal(value, &p); err != nil {
		return storedPointer{}, fmt.Errorf("ha: %s: %w: %w", key, ha.ErrBadPointer, err)
	}
	switch {
	case p.ID < 1:
		return storedPointer{}, fmt.Errorf("ha: %s: %w: checkpoint id %d", key, ha.ErrBadPointer, p.ID)
	case p.Path == "" || len(p.Path) > maxPointerPath || strings.ContainsFunc(p.Path, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return storedPointer{}, fmt.Errorf("ha: %s: %w: a path of %d bytes that is empty, too long or not plain text", key, ha.ErrBadPointer, len(p.Path))
	case len(p.RunID) > 256:
		return storedPointer{}, fmt.Errorf("ha: %s: %w: a run id of %d bytes", key, ha.ErrBadPointer, len(p.RunID))
	}
	return p, nil
}

// LatestCheckpoint reads the job's checkpoint pointer; false when no
// checkpoint was published. No leadership is needed.
func (s *Services) LatestCheckpoint(ctx context.Context, jobID string) (ha.Pointer, bool, error) {
	if err := checkJobID(jobID); err != nil {
		return ha.Pointer{}, false, err
	}
	key := s.jobKey(jobID, "checkpoint")
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return ha.Pointer{}, false, fmt.Errorf("ha: read checkpoint pointer of job %s: %w", jobID, err)
	}
	if len(resp.Kvs) == 0 {
		return ha.Pointer{}, false, nil
	}
	p, err := decodePointer(key, resp.Kvs[0].Value)
	if err != nil {
		return ha.Pointer{}, false, err
	}
	return ha.Pointer{ID: p.ID, Path: p.Path, RunID: p.RunID}, true, nil
}

// Result reads the job's result; false when none was published (or it
// was cleared). No leadership is needed.
func (s *Services) Result(ctx context.Context, jobID string) ([]byte, bool, error) {
	return s.get(ctx, jobID, "result")
}

// Scaling reads the job's scaling state (Leadership.PublishScaling);
// false when none was published. No leadership is needed.
func (s *Services) Scaling(ctx context.Context, jobID string) ([]byte, bool, error) {
	return s.get(ctx, jobID, "scaling")
}

// get reads the job's key leaf; false when it does not exist.
func (s *Services) get(ctx context.Context, jobID, leaf string) ([]byte, bool, error) {
	if err := checkJobID(jobID); err != nil {
		return nil, false, err
	}
	resp, err := s.client.Get(ctx, s.jobKey(jobID, leaf))
	if err != nil {
		return nil, false, fmt.Errorf("ha: read %s of job %s: %w", leaf, jobID, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	return resp.Kvs[0].Value, true, nil
}

// ttlSeconds is cfg's lease in etcd's whole seconds, rounded up.
func ttlSeconds(cfg ha.Config) int64 {
	s := int64((cfg.SessionTTL + time.Second - 1) / time.Second)
	return max(s, 1)
}
