package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	s3storage "github.com/sluicehq/sluice/checkpoint/storage/s3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// The S3 server restarted in the middle of a checkpoint: a
// keyed running count (datagen, RocksDB with incremental checkpoints on
// an S3 server of the test's own, every state stream an object of its
// own, the exactly-once file sink) completes checkpoints; then, while
// subtask 0 of the count takes its snapshot of checkpoint N (the other
// tasks' uploads for N under way or done), the test kills the server with
// SIGKILL and lets the snapshot go on. Checkpoint N fails, as do those
// triggered while the server is down, and the job goes on (tolerable
// failures, no restart); the server restarts on the same port and data
// directory and a checkpoint after N completes on it; then the sources
// emit the rest of their input and the job finishes. The committed output
// holds, for every key, the counts 1..n exactly once each. This fails
// when the job fails or restarts over the outage, when no checkpoint ever
// completes after the server is back (an S3 client or a task stuck on the
// dead connections, a failure counter that never resets), when checkpoint
// N is reported complete, or when the failed checkpoints' records are
// lost or committed twice.
func TestS3ServerRestartMidCheckpoint(t *testing.T) {
	srv := startS3Server(t)
	const records, keys = 6000, 20
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("job log (last lines):\n%s", tail(logs.String(), 60))
			t.Logf("versitygw log (last lines):\n%s", tail(srv.logText(), 30))
		}
	})

	var cps checkpointRecord
	hook := &snapshotHook{in: make(chan int64, 1), release: make(chan struct{})}
	// The last 1000 records wait until a checkpoint completed after the
	// restart, so that the job is still running through the outage.
	gate := &gatedSource{Source: source.NewDatagen(func(i int64) int64 { return i },
		source.DatagenCount(records), source.DatagenRate(1000)), holdAt: records - 1000, open: make(chan struct{})}
	out := t.TempDir()
	env := sluice.NewEnvironment(
		sluice.WithLogger(log),
		sluice.WithParallelism(2),
		sluice.WithJobName("s3-restart"),
		sluice.WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{})),
		sluice.WithStateMemoryThreshold(0),
		sluice.WithCheckpointing(100*time.Millisecond, "s3://"+srv.bucket+"/checkpoints"),
		sluice.WithCheckpointSchemes(s3storage.SchemeOpeners(s3storage.Config{
			Endpoint: "http://" + srv.addr, AccessKeyID: srv.access, SecretAccessKey: srv.secret,
			Region: "us-east-1", MaxAttempts: 2, RequestTimeout: 2 * time.Second,
		})),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) {
			c.TolerableFailed = 1000
			c.Timeout = 30 * time.Second
		}),
		sluice.WithCheckpointListener(cps.add),
		sluice.WithRestartStrategy(sluice.NoRestart()),
	)
	recs := sluice.FromSource(env, gate, sluice.NoWatermarks[int64](), "gen", sluice.UID("gen"))
	counts := sluice.Process[int64, int64, s3KeyCount](sluice.KeyBy(recs, func(v int64) int64 { return v % keys }),
		&hookedCount{hook: hook}, sluice.Name("count"), sluice.UID("count"))
	sluice.SinkTo(counts, filesink.New[s3KeyCount](out, codec.JSON[s3KeyCount]{}), sluice.Name("files"), sluice.UID("files"))

	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ended := func() {
		select {
		case <-job.Done():
			t.Fatalf("the job ended early: %v (checkpoints: %s)", job.Wait(), cps.summary())
		default:
		}
	}
	await(ctx, t, "two checkpoints completed on S3", func() bool {
		ended()
		return cps.completedAfter(0, 0) >= 2
	})

	// Kill the server in the middle of the next checkpoint: while subtask
	// 0 of the count is in its snapshot, the other tasks' snapshots for
	// it taken or being uploaded.
	hook.armed.Store(true)
	var victim int64
	select {
	case victim = <-hook.in:
	case <-job.Done():
		t.Fatalf("the job ended before the next checkpoint: %v", job.Wait())
	case <-ctx.Done():
		t.Fatalf("waiting for the count's snapshot of the next checkpoint: %v (checkpoints: %s)", ctx.Err(), cps.summary())
	}
	srv.kill(t)
	close(hook.release)
	await(ctx, t, fmt.Sprintf("checkpoint %d to fail with the S3 server down", victim), func() bool {
		ended()
		return cps.status(victim) != checkpoint.StatusInProgress
	})
	if st := cps.status(victim); st != checkpoint.StatusFailed {
		t.Fatalf("checkpoint %d, during which the S3 server was killed, ended %v, want FAILED (checkpoints: %s)", victim, st, cps.summary())
	}
	stats, ok := job.CheckpointStats()
	if !ok || stats.Failed < 1 {
		t.Fatalf("checkpoint statistics %+v (ok %v): want at least one failed checkpoint", stats, ok)
	}
	t.Logf("checkpoint %d failed with the server down: %s", victim, cps.failure(victim))

	srv.start(t)
	restarted := cps.mark()
	var after int64
	await(ctx, t, "a checkpoint to complete on the restarted S3 server", func() bool {
		ended()
		after = cps.firstCompletedSince(restarted, victim)
		return after > 0
	})
	close(gate.open)

	select {
	case <-job.Done():
	case <-ctx.Done():
		var stacks strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		t.Fatalf("the job did not finish: %v (checkpoints: %s)\ngoroutines:\n%s", ctx.Err(), cps.summary(), stacks.String())
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("the job failed: %v (checkpoints: %s)", err, cps.summary())
	}
	if n := job.Restarts(); n != 0 {
		t.Fatalf("the job restarted %d times; the outage should have cost checkpoints only", n)
	}

	got, err := filesink.ReadCommitted(out, codec.JSON[s3KeyCount]{})
	if err != nil {
		t.Fatal(err)
	}
	checkS3Counts(t, got, records, keys)
	// The failed checkpoint's discard failed while the server was down;
	// it was retried once the server was back: none of its files is left.
	b, err := s3storage.New(ctx, "s3://"+srv.bucket+"/checkpoints/"+job.ID(), s3storage.Config{
		Endpoint: "http://" + srv.addr, AccessKeyID: srv.access, SecretAccessKey: srv.secret, Region: "us-east-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	for o, err := range b.List(ctx, fmt.Sprintf("chk-%d/", victim)) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("object %s of the failed checkpoint %d is still in the bucket", b.Path(o.Key), victim)
	}
	failed, completed := cps.counts()
	t.Logf("checkpoint %d failed mid-checkpoint, %d failed in all, %d completed (the first after the restart: %d), %d committed records",
		victim, failed, completed, after, len(got))
}

// s3KeyCount is one output record of the restart test's job.
type s3KeyCount struct {
	Key   int64 `json:"k"`
	Count int64 `json:"c"`
}

// checkS3Counts asserts that for every key the committed counts are
// 1..n, n its number of input records, each once.
func checkS3Counts(t *testing.T, got []s3KeyCount, records, keys int64) {
	t.Helper()
	byKey := map[int64][]int64{}
	for _, kc := range got {
		byKey[kc.Key] = append(byKey[kc.Key], kc.Count)
	}
	for k := range keys {
		want := records / keys
		if k < records%keys {
			want++
		}
		c := byKey[k]
		slices.Sort(c)
		ok := int64(len(c)) == want
		for i := 0; ok && i < len(c); i++ {
			ok = c[i] == int64(i+1)
		}
		if !ok {
			t.Errorf("key %d: committed counts %s, want 1..%d once each", k, summarize(c), want)
		}
		delete(byKey, k)
	}
	for k := range byKey {
		t.Errorf("output has unexpected key %d", k)
	}
	if int64(len(got)) != records {
		t.Errorf("%d committed records, want %d", len(got), records)
	}
}

// hookedCount keeps a running count per key in keyed state; subtask 0
// calls hook in the synchronous part of every checkpoint.
type hookedCount struct {
	hook    *snapshotHook
	count   state.ValueState[int64]
	subtask int
}

func (c *hookedCount) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.subtask = ctx.Subtask
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *hookedCount) ProcessElement(ctx *sluice.KeyedContext[int64], _ int64, out sluice.Collector[s3KeyCount]) error {
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.count.Update(n); err != nil {
		return err
	}
	out.Collect(s3KeyCount{Key: ctx.Key(), Count: n})
	return nil
}

func (c *hookedCount) SnapshotState(id int64) error {
	if c.subtask != 0 {
		return nil
	}
	return c.hook.at(id)
}

// snapshotHook holds one snapshot, the first after it is armed, until
// the test releases it.
type snapshotHook struct {
	armed   atomic.Bool
	in      chan int64    // receives the checkpoint id of the held snapshot
	release chan struct{} // closed by the test
}

func (h *snapshotHook) at(id int64) error {
	if !h.armed.CompareAndSwap(true, false) {
		return nil
	}
	h.in <- id
	select {
	case <-h.release:
		return nil
	case <-time.After(time.Minute): // only turns a hung test into an error
		return fmt.Errorf("snapshot of checkpoint %d: the test did not release it", id)
	}
}

// gatedSource emits, over all its readers, holdAt records of its source
// and then nothing until open is closed.
type gatedSource struct {
	source.Source[int64]
	holdAt  int64
	open    chan struct{}
	emitted atomic.Int64
}

func (g *gatedSource) held() bool {
	select {
	case <-g.open:
		return false
	default:
		return g.emitted.Load() >= g.holdAt
	}
}

func (g *gatedSource) NewReader(ctx source.ReaderContext) (source.Reader[int64], error) {
	r, err := g.Source.NewReader(ctx)
	if err != nil {
		return nil, err
	}
	cr, ok := r.(source.CheckpointedReader[int64])
	if !ok {
		return nil, errors.New("gatedSource: the reader keeps no position in checkpoints")
	}
	return &gatedReader{CheckpointedReader: cr, g: g}, nil
}

type gatedReader struct {
	source.CheckpointedReader[int64]
	g *gatedSource
}

func (r *gatedReader) PollNext(out source.Output[int64]) (source.Status, error) {
	if r.g.held() {
		return source.NothingAvailable, nil
	}
	return r.CheckpointedReader.PollNext(countingOutput{Output: out, n: &r.g.emitted})
}

func (r *gatedReader) Available() <-chan struct{} {
	if r.g.held() {
		return r.g.open
	}
	return r.CheckpointedReader.Available()
}

type countingOutput struct {
	source.Output[int64]
	n *atomic.Int64
}

func (o countingOutput) Collect(v int64, ts int64) error {
	o.n.Add(1)
	return o.Output.Collect(v, ts)
}

// checkpointRecord is what the checkpoint listener reported, in order.
type checkpointRecord struct {
	mu     sync.Mutex
	events []checkpoint.Stats
}

func (r *checkpointRecord) add(s checkpoint.Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

// mark is the number of reports so far, for firstCompletedSince.
func (r *checkpointRecord) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// completedAfter counts the checkpoints with an id above id reported
// complete at or after report from.
func (r *checkpointRecord) completedAfter(from int, id int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.events[from:] {
		if s.Status == checkpoint.StatusCompleted && s.Kind == checkpoint.KindCheckpoint && s.ID > id {
			n++
		}
	}
	return n
}

// firstCompletedSince returns the first checkpoint with an id above id
// reported complete at or after report from, 0 when none.
func (r *checkpointRecord) firstCompletedSince(from int, id int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.events[from:] {
		if s.Status == checkpoint.StatusCompleted && s.ID > id {
			return s.ID
		}
	}
	return 0
}

// status is how checkpoint id ended, StatusInProgress until it did.
func (r *checkpointRecord) status(id int64) checkpoint.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.events {
		if s.ID == id {
			return s.Status
		}
	}
	return checkpoint.StatusInProgress
}

// failure says why checkpoint id failed.
func (r *checkpointRecord) failure(id int64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.events {
		if s.ID == id {
			return fmt.Sprintf("%v: %s", s.FailureReason, s.FailureMessage)
		}
	}
	return "not reported"
}

func (r *checkpointRecord) counts() (failed, completed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.events {
		if s.Status == checkpoint.StatusCompleted {
			completed++
		} else {
			failed++
		}
	}
	return failed, completed
}

// summary lists the reports as id:status.
func (r *checkpointRecord) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, s := range r.events {
		fmt.Fprintf(&b, "%d:%v ", s.ID, s.Status)
	}
	return strings.TrimSpace(b.String())
}

// s3Server is a versitygw of the test's own, on a fixed port and data
// directory across restarts.
type s3Server struct {
	bin, root, addr string
	bucket          string
	access, secret  string
	logPath         string
	cmd             *exec.Cmd
	done            chan struct{}
}

// versitygwBinary finds versitygw: $VERSITYGW, else
// $(go env GOPATH)/bin/versitygw, else on PATH. Without one the test is
// skipped, except under CI=true, where it fails.
func versitygwBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("VERSITYGW"); p != "" {
		return p
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(gopath))) {
			p := filepath.Join(dir, "bin", "versitygw")
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p
			}
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	const how = "run scripts/deps test, or go install github.com/versity/versitygw/cmd/versitygw@v1.8.0, or set VERSITYGW"
	if os.Getenv("CI") == "true" {
		t.Fatalf("versitygw not found and CI=true: %s", how)
	}
	t.Skipf("versitygw not found: %s", how)
	return ""
}

// startS3Server starts a versitygw on a free port of 127.0.0.1 with a
// bucket, and stops it at cleanup.
func startS3Server(t *testing.T) *s3Server {
	t.Helper()
	var secret [16]byte
	_, _ = rand.Read(secret[:])
	dir := t.TempDir()
	s := &s3Server{
		bin: versitygwBinary(t), root: filepath.Join(dir, "root"), bucket: "restart-test",
		access: "sluice-restart", secret: hex.EncodeToString(secret[:]), logPath: filepath.Join(dir, "versitygw.log"),
	}
	if err := os.MkdirAll(filepath.Join(s.root, s.bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	l.Close()
	t.Cleanup(func() {
		if s.cmd != nil && !s.ended() {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	s.start(t)
	return s
}

// start starts the server and waits until it answers its health check.
func (s *s3Server) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, "--port", s.addr, "--region", "us-east-1", "--health", "/sluice-health", "posix", s.root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.access, "ROOT_SECRET_ACCESS_KEY="+s.secret)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	await(ctx, t, "versitygw on "+s.addr+" to answer", func() bool {
		if s.ended() {
			t.Fatalf("versitygw exited (%v) while starting on %s:\n%s", cmd.ProcessState, s.addr, tail(s.logText(), 25))
		}
		resp, err := hc.Get("http://" + s.addr + "/sluice-health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// kill kills the server with SIGKILL and waits until it is gone.
func (s *s3Server) kill(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("kill versitygw: %v", err)
	}
	<-s.done
}

func (s *s3Server) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *s3Server) logText() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}
