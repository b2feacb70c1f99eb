package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicehq/sluice/cluster/ha"
	"github.com/sluicehq/sluice/internal/etcdtest"
	"github.com/sluicehq/sluice/internal/testutil"
)

// Leases of the tests: long where a leadership must hold whatever the
// machine's load, the shortest etcd grants (2 s with its default election
// timeout) where a test waits for one to expire.
const (
	holdTTL   = time.Minute
	expireTTL = time.Second
)

var testLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

func open(t *testing.T, endpoints []string, ttl time.Duration) *Services {
	t.Helper()
	s, err := Open(testutil.Context(t, 0), ha.Config{Endpoints: endpoints, SessionTTL: ttl, Prefix: "/test", Logger: testLog})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func campaign(t *testing.T, s *Services, job, candidate string) *Leadership {
	t.Helper()
	l, err := s.Campaign(testutil.Context(t, 0), job, candidate)
	if err != nil {
		t.Fatalf("campaign %s: %v", candidate, err)
	}
	return l
}

type elected struct {
	l   *Leadership
	err error
}

// campaignAsync campaigns in the background.
func campaignAsync(ctx context.Context, s *Services, job, candidate string) <-chan elected {
	ch := make(chan elected, 1)
	go func() {
		l, err := s.Campaign(ctx, job, candidate)
		ch <- elected{l, err}
	}()
	return ch
}

func awaitElected(t *testing.T, what string, ch <-chan elected) *Leadership {
	t.Helper()
	select {
	case e := <-ch:
		if e.err != nil {
			t.Fatalf("%s: campaign: %v", what, e.err)
		}
		return e.l
	case <-time.After(testutil.SafetyNet):
		t.Fatalf("timed out (safety net) waiting for %s to be elected", what)
		return nil
	}
}

// notElected fails if the campaign returned: called while another leader
// holds its key, when no campaign can have won.
func notElected(t *testing.T, what string, ch <-chan elected) {
	t.Helper()
	select {
	case e := <-ch:
		t.Fatalf("%s returned from its campaign while another leads: %+v", what, e)
	default:
	}
}

// awaitCandidates waits until n candidates are in the job's election.
func awaitCandidates(t *testing.T, s *Services, job string, n int64) {
	t.Helper()
	ctx := testutil.Context(t, 0)
	testutil.Await(t, fmt.Sprintf("%d candidates", n), func() bool {
		resp, err := s.client.Get(ctx, s.leaderPrefix(job)+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == n
	})
}

func awaitLeaderInfo(t *testing.T, ch <-chan ha.LeaderInfo, want ha.LeaderInfo) {
	t.Helper()
	select {
	case got, ok := <-ch:
		if !ok {
			t.Fatalf("WatchLeader closed, want %+v", want)
		}
		if got != want {
			t.Fatalf("WatchLeader reported %+v, want %+v", got, want)
		}
	case <-time.After(testutil.SafetyNet):
		t.Fatalf("timed out (safety net) waiting for WatchLeader to report %+v", want)
	}
}

func wantLeader(t *testing.T, s *Services, job, candidate string, epoch int64) {
	t.Helper()
	c, e, err := s.Leader(testutil.Context(t, 0), job)
	if err != nil || c != candidate || e != epoch {
		t.Fatalf("Leader = %q, %d, %v; want %q, %d", c, e, err, candidate, epoch)
	}
}

func wantPointer(t *testing.T, s *Services, job string, want ha.Pointer) {
	t.Helper()
	got, ok, err := s.LatestCheckpoint(testutil.Context(t, 0), job)
	if err != nil || !ok || got != want {
		t.Fatalf("LatestCheckpoint = %+v, %v, %v; want %+v", got, ok, err, want)
	}
}

func ptr(id int64, run string) ha.Pointer {
	return ha.Pointer{ID: id, Path: fmt.Sprintf("/ckpt/job/chk-%d", id), RunID: run}
}

// settled retries op while it fails for want of etcd (reconnecting after
// a restart), and returns its first answer from etcd.
func settled(t *testing.T, op func(context.Context) error) error {
	t.Helper()
	ctx := testutil.Context(t, 0)
	var err error
	testutil.Await(t, "an answer from etcd", func() bool {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err = op(octx)
		return err == nil || errors.Is(err, ha.ErrFenced) || errors.Is(err, ha.ErrStalePointer)
	})
	return err
}

// A standby takes over when the leader resigns; epochs strictly increase;
// workers watching the election follow every change.
func TestResignHandsOver(t *testing.T) {
	eps := etcdtest.Start(t)
	a, b, c := open(t, eps, holdTTL), open(t, eps, holdTTL), open(t, eps, holdTTL)
	worker := open(t, eps, holdTTL)
	ctx := testutil.Context(t, 0)
	watch := worker.WatchLeader(ctx, "job")
	awaitLeaderInfo(t, watch, ha.LeaderInfo{})
	if _, _, err := worker.Leader(ctx, "job"); !errors.Is(err, ha.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ha.ErrNoLeader", err)
	}

	la := campaign(t, a, "job", "a:1")
	if la.Epoch() <= 0 {
		t.Fatalf("epoch %d", la.Epoch())
	}
	awaitLeaderInfo(t, watch, ha.LeaderInfo{Candidate: "a:1", Epoch: la.Epoch()})
	wantLeader(t, worker, "job", "a:1", la.Epoch())

	bch := campaignAsync(ctx, b, "job", "b:1")
	awaitCandidates(t, worker, "job", 2)
	notElected(t, "b", bch)
	wantLeader(t, worker, "job", "a:1", la.Epoch())

	if err := la.Resign(ctx); err != nil {
		t.Fatalf("resign: %v", err)
	}
	testutil.AwaitClosed(t, "a's Lost after resigning", la.Lost())
	if err := la.Err(); !errors.Is(err, ha.ErrLost) {
		t.Fatalf("Err after resign: %v, want ha.ErrLost", err)
	}
	lb := awaitElected(t, "b", bch)
	if lb.Epoch() <= la.Epoch() {
		t.Fatalf("b's epoch %d is not above a's %d", lb.Epoch(), la.Epoch())
	}
	awaitLeaderInfo(t, watch, ha.LeaderInfo{Candidate: "b:1", Epoch: lb.Epoch()})
	wantLeader(t, worker, "job", "b:1", lb.Epoch())
	select {
	case <-lb.Lost():
		t.Fatalf("b lost its leadership: %v", lb.Err())
	default:
	}

	// A third leader, then none.
	cch := campaignAsync(ctx, c, "job", "c:1")
	awaitCandidates(t, worker, "job", 2)
	notElected(t, "c", cch)
	if err := lb.Resign(ctx); err != nil {
		t.Fatalf("resign b: %v", err)
	}
	lc := awaitElected(t, "c", cch)
	if lc.Epoch() <= lb.Epoch() {
		t.Fatalf("c's epoch %d is not above b's %d", lc.Epoch(), lb.Epoch())
	}
	awaitLeaderInfo(t, watch, ha.LeaderInfo{Candidate: "c:1", Epoch: lc.Epoch()})
	if err := lc.Resign(ctx); err != nil {
		t.Fatalf("resign c: %v", err)
	}
	awaitLeaderInfo(t, watch, ha.LeaderInfo{})
	if _, _, err := worker.Leader(ctx, "job"); !errors.Is(err, ha.ErrNoLeader) {
		t.Fatalf("Leader after the last resign: %v, want ha.ErrNoLeader", err)
	}
	// Resigning twice is harmless.
	if err := lc.Resign(ctx); err != nil {
		t.Fatalf("second resign: %v", err)
	}
}

// The leader's lease is revoked from elsewhere (as when it expires): the
// standby is elected, and the former leader's writes are all fenced,
// whether or not it noticed; the stored pointer is the new leader's.
func TestRevokedLeaseFencesFormerLeader(t *testing.T) {
	eps := etcdtest.Start(t)
	a, b, admin := open(t, eps, holdTTL), open(t, eps, holdTTL), open(t, eps, holdTTL)
	ctx := testutil.Context(t, 0)
	la := campaign(t, a, "job", "a")
	if err := la.PublishCheckpoint(ctx, ptr(1, "run-a")); err != nil {
		t.Fatalf("a publishes 1: %v", err)
	}
	if err := la.PublishResult(ctx, []byte("a's result")); err != nil {
		t.Fatalf("a publishes its result: %v", err)
	}
	bch := campaignAsync(ctx, b, "job", "b")
	awaitCandidates(t, admin, "job", 2)

	if _, err := admin.client.Revoke(ctx, la.session.Lease()); err != nil {
		t.Fatalf("revoke a's lease: %v", err)
	}
	lb := awaitElected(t, "b", bch)
	if lb.Epoch() <= la.Epoch() {
		t.Fatalf("b's epoch %d is not above a's %d", lb.Epoch(), la.Epoch())
	}
	// a writes at once, before or after its monitor saw the key go: etcd
	// refuses either way.
	if err := la.PublishCheckpoint(ctx, ptr(10, "run-a")); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("a publishes 10 after the takeover: %v, want ha.ErrFenced", err)
	}
	testutil.AwaitClosed(t, "a's Lost", la.Lost())
	if err := la.Err(); !errors.Is(err, ha.ErrLost) {
		t.Fatalf("a's Err: %v, want ha.ErrLost", err)
	}
	if err := lb.PublishCheckpoint(ctx, ptr(2, "run-b")); err != nil {
		t.Fatalf("b publishes 2: %v", err)
	}
	if err := la.PublishCheckpoint(ctx, ptr(3, "run-a")); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("a publishes 3 after the takeover: %v, want ha.ErrFenced", err)
	}
	if err := la.PublishResult(ctx, []byte("a again")); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("a publishes a result after the takeover: %v, want ha.ErrFenced", err)
	}
	if err := la.ClearResult(ctx); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("a clears the result after the takeover: %v, want ha.ErrFenced", err)
	}
	wantPointer(t, admin, "job", ptr(2, "run-b"))
	if got, ok, err := admin.Result(ctx, "job"); err != nil || !ok || string(got) != "a's result" {
		t.Fatalf("Result = %q, %v, %v; want a's result, untouched", got, ok, err)
	}
	select {
	case <-lb.Lost():
		t.Fatalf("b lost its leadership: %v", lb.Err())
	default:
	}
}

// A paused leader: its process stops (here its connection to etcd is
// frozen, both ways) past its lease, which expires on the server; the
// standby is elected and publishes. When the former leader wakes up, its
// writes are fenced and the pointer stays the new leader's.
func TestPausedLeaderIsFencedAfterExpiry(t *testing.T) {
	eps := etcdtest.Start(t)
	proxy := newFreezeProxy(t, eps[0])
	a := open(t, []string{proxy.endpoint()}, expireTTL)
	b, admin := open(t, eps, holdTTL), open(t, eps, holdTTL)
	ctx := testutil.Context(t, 0)
	la := campaign(t, a, "job", "a")
	if err := la.PublishCheckpoint(ctx, ptr(5, "run-a")); err != nil {
		t.Fatalf("a publishes 5: %v", err)
	}
	bch := campaignAsync(ctx, b, "job", "b")
	awaitCandidates(t, admin, "job", 2)

	proxy.freeze()
	lb := awaitElected(t, "b", bch) // once a's lease expired on the server
	if lb.Epoch() <= la.Epoch() {
		t.Fatalf("b's epoch %d is not above a's %d", lb.Epoch(), la.Epoch())
	}
	wantLeader(t, admin, "job", "b", lb.Epoch())
	if err := lb.PublishCheckpoint(ctx, ptr(6, "run-b")); err != nil {
		t.Fatalf("b publishes 6: %v", err)
	}

	proxy.thaw()
	// An id above b's, so that only the fence can refuse it.
	if err := settled(t, func(ctx context.Context) error { return la.PublishCheckpoint(ctx, ptr(7, "run-a")) }); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("the woken former leader publishes 7: %v, want ha.ErrFenced", err)
	}
	if err := settled(t, func(ctx context.Context) error { return la.PublishResult(ctx, []byte("a")) }); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("the woken former leader publishes a result: %v, want ha.ErrFenced", err)
	}
	testutil.AwaitClosed(t, "a's Lost", la.Lost())
	wantPointer(t, admin, "job", ptr(6, "run-b"))
	if _, ok, err := admin.Result(ctx, "job"); err != nil || ok {
		t.Fatalf("Result: %v, %v; want none", ok, err)
	}
}

// The pointer only moves forward, across leaders too, and a write of the
// pointer behind the leader's back is seen by its compare-and-swap.
func TestPointerIsMonotonic(t *testing.T) {
	eps := etcdtest.Start(t)
	a, b := open(t, eps, holdTTL), open(t, eps, holdTTL)
	ctx := testutil.Context(t, 0)
	if _, ok, err := a.LatestCheckpoint(ctx, "job"); err != nil || ok {
		t.Fatalf("LatestCheckpoint of a new job: %v, %v; want none", ok, err)
	}
	la := campaign(t, a, "job", "a")
	for _, step := range []struct {
		id   int64
		want error
	}{{1, nil}, {1, ha.ErrStalePointer}, {3, nil}, {2, ha.ErrStalePointer}, {3, ha.ErrStalePointer}, {0, ha.ErrInvalidArgument}, {4, nil}} {
		err := la.PublishCheckpoint(ctx, ptr(step.id, "run-a"))
		if step.want == nil && err != nil || step.want != nil && !errors.Is(err, step.want) {
			t.Fatalf("publish %d: %v, want %v", step.id, err, step.want)
		}
	}
	if err := la.PublishCheckpoint(ctx, ha.Pointer{ID: 9}); !errors.Is(err, ha.ErrInvalidArgument) {
		t.Fatalf("publish without a path: %v, want ha.ErrInvalidArgument", err)
	}
	wantPointer(t, b, "job", ptr(4, "run-a"))

	// Someone writes the pointer behind a's back (an operator, say): a's
	// compare-and-swap sees it and decides on what is stored.
	behind := storedPointerJSON(t, 8)
	if _, err := b.client.Put(ctx, a.jobKey("job", "checkpoint"), behind); err != nil {
		t.Fatal(err)
	}
	if err := la.PublishCheckpoint(ctx, ptr(5, "run-a")); !errors.Is(err, ha.ErrStalePointer) {
		t.Fatalf("publish 5 over 8: %v, want ha.ErrStalePointer", err)
	}
	if err := la.PublishCheckpoint(ctx, ptr(9, "run-a")); err != nil {
		t.Fatalf("publish 9 over 8: %v", err)
	}

	// The next leader cannot go back either.
	bch := campaignAsync(ctx, b, "job", "b")
	awaitCandidates(t, a, "job", 2)
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	lb := awaitElected(t, "b", bch)
	if err := lb.PublishCheckpoint(ctx, ptr(9, "run-b")); !errors.Is(err, ha.ErrStalePointer) {
		t.Fatalf("b publishes 9: %v, want ha.ErrStalePointer", err)
	}
	if err := lb.PublishCheckpoint(ctx, ptr(10, "run-b")); err != nil {
		t.Fatalf("b publishes 10: %v", err)
	}
	wantPointer(t, a, "job", ptr(10, "run-b"))
	// The resigned leader is fenced.
	if err := la.PublishCheckpoint(ctx, ptr(11, "run-a")); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("resigned a publishes 11: %v, want ha.ErrFenced", err)
	}
}

func storedPointerJSON(t *testing.T, id int64) string {
	t.Helper()
	return fmt.Sprintf(`{"id":%d,"path":"/elsewhere/chk-%d","epoch":0}`, id, id)
}

// The job result: published, read, cleared, all by the leader, and
// fenced.
func TestResult(t *testing.T) {
	eps := etcdtest.Start(t)
	a, reader := open(t, eps, holdTTL), open(t, eps, holdTTL)
	ctx := testutil.Context(t, 0)
	if _, ok, err := reader.Result(ctx, "job"); err != nil || ok {
		t.Fatalf("Result of a new job: %v, %v; want none", ok, err)
	}
	la := campaign(t, a, "job", "a")
	if err := la.PublishResult(ctx, []byte(`{"status":"FINISHED"}`)); err != nil {
		t.Fatalf("publish result: %v", err)
	}
	if got, ok, err := reader.Result(ctx, "job"); err != nil || !ok || string(got) != `{"status":"FINISHED"}` {
		t.Fatalf("Result = %q, %v, %v", got, ok, err)
	}
	if err := la.ClearResult(ctx); err != nil {
		t.Fatalf("clear result: %v", err)
	}
	if _, ok, err := reader.Result(ctx, "job"); err != nil || ok {
		t.Fatalf("Result after clearing: %v, %v; want none", ok, err)
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := la.PublishResult(ctx, []byte("late")); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("publish result after resigning: %v, want ha.ErrFenced", err)
	}
	if _, ok, err := reader.Result(ctx, "job"); err != nil || ok {
		t.Fatalf("Result after a fenced publish: %v, %v; want none", ok, err)
	}
}

// A campaign given up (its context cancelled) withdraws its candidacy;
// jobs are independent elections.
func TestCampaignCancelledAndJobsApart(t *testing.T) {
	eps := etcdtest.Start(t)
	a, b := open(t, eps, holdTTL), open(t, eps, holdTTL)
	ctx := testutil.Context(t, 0)
	la := campaign(t, a, "job-1", "a")
	cctx, cancel := context.WithCancel(ctx)
	bch := campaignAsync(cctx, b, "job-1", "b")
	awaitCandidates(t, a, "job-1", 2)
	cancel()
	select {
	case e := <-bch:
		if !errors.Is(e.err, context.Canceled) {
			t.Fatalf("cancelled campaign: %+v, want context.Canceled", e)
		}
	case <-time.After(testutil.SafetyNet):
		t.Fatal("timed out (safety net) waiting for the cancelled campaign")
	}
	awaitCandidates(t, a, "job-1", 1)
	wantLeader(t, b, "job-1", "a", la.Epoch())

	// Another job's election is its own: b leads job-2 at once.
	lb := campaign(t, b, "job-2", "b")
	wantLeader(t, a, "job-2", "b", lb.Epoch())
	if err := lb.PublishCheckpoint(ctx, ptr(1, "run-b")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.LatestCheckpoint(ctx, "job-1"); err != nil || ok {
		t.Fatalf("job-1's pointer: %v, %v; want none", ok, err)
	}

	if _, err := a.Campaign(ctx, "a/b", "x"); !errors.Is(err, ha.ErrInvalidArgument) {
		t.Fatalf("campaign for job a/b: %v, want ha.ErrInvalidArgument", err)
	}
	if _, err := a.Campaign(ctx, "job-3", ""); !errors.Is(err, ha.ErrInvalidArgument) {
		t.Fatalf("campaign without a candidate: %v, want ha.ErrInvalidArgument", err)
	}
}

// Closing the Services loses their leaderships at once.
func TestCloseLosesLeadership(t *testing.T) {
	eps := etcdtest.Start(t)
	s, err := Open(testutil.Context(t, 0), ha.Config{Endpoints: eps, SessionTTL: holdTTL, Logger: testLog})
	if err != nil {
		t.Fatal(err)
	}
	l := campaign(t, s, "job", "a")
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("a leadership survived closing its services")
	}
	if err := l.Err(); !errors.Is(err, ha.ErrLost) {
		t.Fatalf("Err: %v, want ha.ErrLost", err)
	}
}

// etcd restarted within the lease: the leadership survives. The server
// keeps the lease across its restart, the client resumes the keep-alives,
// the key and the epoch stay, fenced writes succeed again, the standby
// stays a standby.
func TestEtcdRestartWithinLeaseKeepsLeadership(t *testing.T) {
	srv := etcdtest.StartServer(t)
	eps := srv.Endpoints()
	a, b, admin := open(t, eps, holdTTL), open(t, eps, holdTTL), open(t, eps, holdTTL)
	ctx := testutil.Context(t, 0)
	la := campaign(t, a, "job", "a")
	if err := la.PublishCheckpoint(ctx, ptr(1, "run-a")); err != nil {
		t.Fatal(err)
	}
	bch := campaignAsync(ctx, b, "job", "b")
	awaitCandidates(t, admin, "job", 2)

	srv.Restart()
	if err := settled(t, func(ctx context.Context) error { return la.PublishCheckpoint(ctx, ptr(2, "run-a")) }); err != nil {
		t.Fatalf("publish after etcd's restart: %v", err)
	}
	wantPointer(t, admin, "job", ptr(2, "run-a"))
	wantLeader(t, admin, "job", "a", la.Epoch())
	ttl, err := admin.client.TimeToLive(ctx, la.session.Lease())
	if err != nil || ttl.TTL <= 0 {
		t.Fatalf("a's lease after the restart: %+v, %v", ttl, err)
	}
	select {
	case <-la.Lost():
		t.Fatalf("a lost its leadership over a restart within the lease: %v", la.Err())
	default:
	}
	notElected(t, "b", bch)

	// The election goes on as before.
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if lb := awaitElected(t, "b", bch); lb.Epoch() <= la.Epoch() {
		t.Fatalf("b's epoch %d is not above a's %d", lb.Epoch(), la.Epoch())
	}
}

// etcd away longer than the lease: the leadership is lost (the client
// gives up on the lease while etcd is down), and after the restart the
// standby is elected — the lease the server brought back is revoked by
// the former leader or expires — and the former leader is fenced.
func TestEtcdDownPastLeaseLosesLeadership(t *testing.T) {
	srv := etcdtest.StartServer(t)
	eps := srv.Endpoints()
	a, b, admin := open(t, eps, expireTTL), open(t, eps, holdTTL), open(t, eps, holdTTL)
	ctx := testutil.Context(t, 0)
	la := campaign(t, a, "job", "a")
	if err := la.PublishCheckpoint(ctx, ptr(1, "run-a")); err != nil {
		t.Fatal(err)
	}
	bch := campaignAsync(ctx, b, "job", "b")
	awaitCandidates(t, admin, "job", 2)

	srv.Stop()
	testutil.AwaitClosed(t, "a's Lost while etcd is down", la.Lost())
	if err := la.Err(); !errors.Is(err, ha.ErrLost) {
		t.Fatalf("Err: %v, want ha.ErrLost", err)
	}
	srv.Restart()
	lb := awaitElected(t, "b", bch)
	if lb.Epoch() <= la.Epoch() {
		t.Fatalf("b's epoch %d is not above a's %d", lb.Epoch(), la.Epoch())
	}
	if err := settled(t, func(ctx context.Context) error { return la.PublishCheckpoint(ctx, ptr(2, "run-a")) }); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("the former leader publishes after the takeover: %v, want ha.ErrFenced", err)
	}
	if err := settled(t, func(ctx context.Context) error { return lb.PublishCheckpoint(ctx, ptr(2, "run-b")) }); err != nil {
		t.Fatalf("b publishes 2: %v", err)
	}
	wantPointer(t, admin, "job", ptr(2, "run-b"))
}

// Open fails when etcd does not answer, and on a bad configuration.
func TestOpenFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	_, err = Open(testutil.Context(t, 0), ha.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 300 * time.Millisecond, Logger: testLog})
	if err == nil {
		t.Fatal("Open succeeded with no etcd")
	}
	if _, err := Open(testutil.Context(t, 0), ha.Config{}); !errors.Is(err, ha.ErrInvalidConfig) {
		t.Fatalf("Open without endpoints: %v, want ha.ErrInvalidConfig", err)
	}
}
