package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sluicehq/sluice/cluster/ha"
)

// Leadership is a won election: the job's leader until it is lost. Its
// methods are safe for concurrent use.
type Leadership struct {
	s         *Services
	jobID     string
	candidate string
	session   *concurrency.Session
	key       string // the leader key, <prefix>/jobs/<job>/leader/<lease>
	epoch     int64
	log       *slog.Logger

	lost     chan struct{}
	lostOnce sync.Once
	errMu    sync.Mutex
	err      error
	keyGone  bool
	stop     context.CancelFunc // ends the monitor

	// pubMu serializes PublishCheckpoint; ptr is the stored pointer as
	// last read or written under the fence.
	pubMu sync.Mutex
	ptr   struct {
		known bool
		mod   int64 // the checkpoint key's mod revision (0: absent)
		id    int64
	}
}

// Campaign makes candidate (e.g. the coordinator's RPC address, what
// Leader reports to workers) a candidate for leading the job and blocks
// until it is elected, or ctx is done (the candidacy is then withdrawn).
// Each campaign has a lease of its own (Config.SessionTTL), kept alive
// until the leadership is lost or resigned. etcd being unreachable for a
// while does not end the campaign: it goes on with the same lease, its
// place in the line kept, or with a new one if the lease was lost.
func (s *Services) Campaign(ctx context.Context, jobID, candidate string) (*Leadership, error) {
	if err := checkJobID(jobID); err != nil {
		return nil, err
	}
	if candidate == "" {
		return nil, fmt.Errorf("%w: empty candidate for job %s", ha.ErrInvalidArgument, jobID)
	}
	log := s.log.With("job", jobID, "candidate", candidate)
	var session *concurrency.Session
	for {
		var err error
		if session == nil {
			session, err = s.newSession(ctx)
		}
		if err == nil {
			var l *Leadership
			if l, err = s.elect(ctx, session, jobID, candidate, log); err == nil {
				return l, nil
			}
			if errors.Is(err, errCampaignLost) || ctx.Err() != nil || s.client.Ctx().Err() != nil {
				s.closeSession(session)
				session = nil
			}
		}
		if ctx.Err() != nil || s.client.Ctx().Err() != nil {
			return nil, fmt.Errorf("ha: campaign for job %s: %w", jobID, err)
		}
		log.Warn("ha: campaign again", "error", err)
		sleep(ctx, retryWait)
	}
}

// errCampaignLost is a campaign whose own key or lease went away before
// it was elected (the lease expired while etcd was unreachable, say).
var errCampaignLost = errors.New("candidate key or lease gone while campaigning")

// newSession grants a lease, within ctx, and keeps it alive.
func (s *Services) newSession(ctx context.Context) (*concurrency.Session, error) {
	ttl := ttlSeconds(s.cfg)
	grant, err := s.client.Grant(ctx, ttl)
	if err != nil {
		return nil, fmt.Errorf("grant a lease: %w", err)
	}
	session, err := concurrency.NewSession(s.client, concurrency.WithTTL(int(ttl)), concurrency.WithLease(grant.ID))
	if err != nil {
		s.revoke(grant.ID)
		return nil, fmt.Errorf("keep lease %x alive: %w", grant.ID, err)
	}
	return session, nil
}

// elect campaigns with session until elected.
func (s *Services) elect(ctx context.Context, session *concurrency.Session, jobID, candidate string, log *slog.Logger) (*Leadership, error) {
	select {
	case <-session.Done():
		return nil, errCampaignLost
	default:
	}
	election := concurrency.NewElection(session, s.leaderPrefix(jobID))
	// Campaign puts the key if the lease has none yet, else takes it up
	// again where it is in the line.
	if err := election.Campaign(ctx, candidate); err != nil {
		return nil, err
	}
	// Campaign returns once every older key is gone, even if its own went
	// too: check that it still holds, with the lease kept alive.
	resp, err := s.client.Get(ctx, election.Key())
	if err != nil {
		return nil, fmt.Errorf("read own leader key: %w", err)
	}
	select {
	case <-session.Done():
		return nil, errCampaignLost
	default:
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != election.Rev() {
		return nil, errCampaignLost
	}
	mctx, stop := context.WithCancel(s.client.Ctx())
	l := &Leadership{
		s: s, jobID: jobID, candidate: candidate, session: session,
		key: election.Key(), epoch: election.Rev(),
		log:  log.With("epoch", election.Rev()),
		lost: make(chan struct{}), stop: stop,
	}
	s.wg.Go(func() { l.monitor(mctx, resp.Header.Revision) })
	l.log.Info("ha: elected leader")
	return l, nil
}

// closeSession stops the keep-alives and revokes the lease, deleting its
// key.
func (s *Services) closeSession(session *concurrency.Session) {
	session.Orphan()
	s.revoke(session.Lease())
}

// revoke revokes a lease, if etcd answers soon: past the lease's duration
// it is gone anyway.
func (s *Services) revoke(id clientv3.LeaseID) {
	if s.client.Ctx().Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.client.Ctx(), min(s.cfg.SessionTTL, s.cfg.DialTimeout))
	defer cancel()
	_, _ = s.client.Revoke(ctx, id)
}

// monitor closes Lost when the leader key is deleted or the lease is no
// longer kept alive. When the client gave up on the lease but the server
// may still hold it (etcd unreachable, then back), it revokes it, so that
// a standby need not wait for it to expire. It ends early when ctx is
// done (Resign, or the Services closed).
func (l *Leadership) monitor(ctx context.Context, rev int64) {
	defer l.stop()
	cause, keyGone := l.watch(ctx, rev)
	if l.s.client.Ctx().Err() != nil {
		cause, keyGone = errors.New("services closed"), false
	} else if cause == nil {
		return // resigned: Resign revokes
	}
	l.markLost(cause, keyGone)
	l.session.Orphan()
	if !keyGone {
		l.s.revoke(l.session.Lease())
	}
}

// watch returns why the leadership is lost and whether its key is known
// gone, or nil when ctx is done.
func (l *Leadership) watch(ctx context.Context, rev int64) (cause error, keyGone bool) {
	for {
		wctx, wcancel := context.WithCancel(ctx)
		wch := l.s.client.Watch(wctx, l.key, clientv3.WithRev(rev+1))
		cause, keyGone, again := l.watchOnce(ctx, wch, &rev)
		wcancel()
		if !again {
			return cause, keyGone
		}
		// The watch broke (compacted): read the key, and watch again from
		// there.
		for {
			if ctx.Err() != nil {
				return nil, false
			}
			resp, err := l.s.client.Get(ctx, l.key)
			if err == nil {
				if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.epoch {
					return errors.New("leader key deleted"), true
				}
				rev = resp.Header.Revision
				break
			}
			sleep(ctx, retryWait)
		}
	}
}

func (l *Leadership) watchOnce(ctx context.Context, wch clientv3.WatchChan, rev *int64) (cause error, keyGone, again bool) {
	for {
		select {
		case <-ctx.Done():
			return nil, false, false
		case <-l.session.Done():
			return errors.New("lease not kept alive (expired, revoked, or etcd unreachable for the lease duration)"), false, false
		case wr, ok := <-wch:
			if !ok {
				if ctx.Err() != nil {
					return nil, false, false
				}
				return nil, false, true
			}
			if err := wr.Err(); err != nil {
				l.log.Warn("ha: watch leader key", "error", err)
				return nil, false, true
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != l.epoch {
					return errors.New("leader key deleted (lease revoked or expired)"), true, false
				}
				*rev = ev.Kv.ModRevision
			}
		}
	}
}

// markLost closes Lost, once; keyGone says the leader key is known to be
// deleted (and so the lease, most likely: nothing to revoke).
func (l *Leadership) markLost(cause error, keyGone bool) {
	l.errMu.Lock()
	l.keyGone = l.keyGone || keyGone
	l.errMu.Unlock()
	l.lostOnce.Do(func() {
		l.errMu.Lock()
		l.err = fmt.Errorf("ha: job %s, epoch %d: %w: %w", l.jobID, l.epoch, ha.ErrLost, cause)
		l.errMu.Unlock()
		close(l.lost)
		l.log.Warn("ha: leadership lost", "cause", cause)
	})
}

// JobID is the job led.
func (l *Leadership) JobID() string { return l.jobID }

// Candidate is the string the leader campaigned with.
func (l *Leadership) Candidate() string { return l.candidate }

// Epoch is the leadership's epoch: its election key's create revision,
// strictly greater than every earlier leader's of the job.
func (l *Leadership) Epoch() int64 { return l.epoch }

// Lost is closed when the leadership is lost: its key deleted, its lease
// no longer kept alive, a fenced write refused, Resign, or the Services
// closed. The leader must then stop acting as one.
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Err is nil while the leadership holds, then why it was lost (wrapping
// ErrLost, and ErrFenced when a fenced write found it).
func (l *Leadership) Err() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// Resign gives the leadership up: Lost is closed, the lease revoked and
// the key with it, and the next candidate is elected at once. When etcd
// cannot be reached the lease expires by itself after its duration (or a
// later Resign revokes it). Resigning a lost leadership is harmless.
func (l *Leadership) Resign(ctx context.Context) error {
	l.markLost(errors.New("resigned"), false)
	l.stop()
	l.session.Orphan()
	l.errMu.Lock()
	keyGone := l.keyGone
	l.errMu.Unlock()
	if keyGone {
		return nil
	}
	_, err := l.s.client.Revoke(ctx, l.session.Lease())
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("ha: resign job %s, epoch %d: revoke lease %x: %w", l.jobID, l.epoch, l.session.Lease(), err)
	}
	l.errMu.Lock()
	l.keyGone = true
	l.errMu.Unlock()
	if err == nil {
		l.log.Info("ha: resigned")
	}
	return nil
}

// fence is the compare of every write: the leader key still exists with
// the leadership's create revision.
func (l *Leadership) fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.epoch)
}

// fenced is the error of a write the fence refused; the leadership is
// lost.
func (l *Leadership) fenced(op string) error {
	l.markLost(ha.ErrFenced, true)
	return fmt.Errorf("ha: %s for job %s, epoch %d: %w", op, l.jobID, l.epoch, ha.ErrFenced)
}

// PublishCheckpoint moves the job's checkpoint pointer to p, fenced: it
// fails with ErrFenced when another leader took over (whatever Lost
// says), and with ErrStalePointer when the stored pointer's id is not
// lower than p.ID. Only after it returned nil may the checkpoint be
// notified complete.
func (l *Leadership) PublishCheckpoint(ctx context.Context, p ha.Pointer) error {
	if p.ID < 1 || p.Path == "" {
		return fmt.Errorf("ha: publish checkpoint for job %s: %w: pointer %+v (id at least 1, a path)", l.jobID, ha.ErrInvalidArgument, p)
	}
	value, err := json.Marshal(storedPointer{ID: p.ID, Path: p.Path, RunID: p.RunID, Epoch: l.epoch})
	if err != nil {
		return fmt.Errorf("ha: publish checkpoint %d for job %s: %w", p.ID, l.jobID, err)
	}
	key := l.s.jobKey(l.jobID, "checkpoint")
	op := fmt.Sprintf("publish checkpoint %d", p.ID)
	l.pubMu.Lock()
	defer l.pubMu.Unlock()
	for fresh := false; ; {
		if !l.ptr.known {
			// A fenced read: a former leader learns it is fenced before
			// anything about the pointer.
			resp, err := l.s.client.Txn(ctx).If(l.fence()).Then(clientv3.OpGet(key)).Commit()
			if err != nil {
				return fmt.Errorf("ha: %s for job %s: read pointer: %w", op, l.jobID, err)
			}
			if !resp.Succeeded {
				return l.fenced(op)
			}
			if err := l.setPointer(key, resp.Responses[0].GetResponseRange().Kvs); err != nil {
				return err
			}
			fresh = true
		}
		if l.ptr.mod != 0 && l.ptr.id >= p.ID {
			if !fresh {
				// Known from an earlier call: make sure under the fence.
				l.ptr.known = false
				continue
			}
			return fmt.Errorf("ha: %s for job %s: stored pointer is checkpoint %d: %w", op, l.jobID, l.ptr.id, ha.ErrStalePointer)
		}
		resp, err := l.s.client.Txn(ctx).
			If(l.fence(), clientv3.Compare(clientv3.ModRevision(key), "=", l.ptr.mod)).
			Then(clientv3.OpPut(key, string(value))).
			Else(clientv3.OpGet(l.key), clientv3.OpGet(key)).
			Commit()
		if err != nil {
			// The outcome is unknown: read the pointer again next time.
			l.ptr.known = false
			return fmt.Errorf("ha: %s for job %s: %w", op, l.jobID, err)
		}
		if resp.Succeeded {
			l.ptr.mod, l.ptr.id = resp.Header.Revision, p.ID
			return nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 0 || kvs[0].CreateRevision != l.epoch {
			l.ptr.known = false
			return l.fenced(op)
		}
		// The pointer changed under the fence since it was read: decide
		// again on what is stored now.
		if err := l.setPointer(key, resp.Responses[1].GetResponseRange().Kvs); err != nil {
			return err
		}
		fresh = true
	}
}

func (l *Leadership) setPointer(key string, kvs []*mvccpb.KeyValue) error {
	l.ptr.known, l.ptr.mod, l.ptr.id = true, 0, 0
	if len(kvs) == 0 {
		return nil
	}
	p, err := decodePointer(key, kvs[0].Value)
	if err != nil {
		l.ptr.known = false
		return err
	}
	l.ptr.mod, l.ptr.id = kvs[0].ModRevision, p.ID
	return nil
}

// PublishResult stores the job result (opaque bytes, e.g. a
// storage.JobResult's JSON), fenced: ErrFenced when another leader took
// over.
func (l *Leadership) PublishResult(ctx context.Context, data []byte) error {
	return l.fencedWrite(ctx, "publish result", clientv3.OpPut(l.s.jobKey(l.jobID, "result"), string(data)))
}

// PublishScaling stores the job's scaling state (opaque bytes: the
// parallelism it runs at, the resource requirements set and the
// autoscaler's decisions), fenced: ErrFenced when another leader took
// over. A leader taking over reads it (Services.Scaling) and resumes at
// that parallelism instead of the plan's.
func (l *Leadership) PublishScaling(ctx context.Context, data []byte) error {
	return l.fencedWrite(ctx, "publish scaling", clientv3.OpPut(l.s.jobKey(l.jobID, "scaling"), string(data)))
}

// ClearResult deletes the job result, fenced: ErrFenced when another
// leader took over.
func (l *Leadership) ClearResult(ctx context.Context) error {
	return l.fencedWrite(ctx, "clear result", clientv3.OpDelete(l.s.jobKey(l.jobID, "result")))
}

func (l *Leadership) fencedWrite(ctx context.Context, op string, w clientv3.Op) error {
	resp, err := l.s.client.Txn(ctx).If(l.fence()).Then(w).Commit()
	if err != nil {
		return fmt.Errorf("ha: %s for job %s: %w", op, l.jobID, err)
	}
	if !resp.Succeeded {
		return l.fenced(op)
	}
	return nil
}
