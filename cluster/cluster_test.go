package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/ha"
	etcdha "github.com/sluicehq/sluice/cluster/ha/etcd" // the etcd HA services, for the HA tests
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/etcdtest"
	"github.com/sluicehq/sluice/internal/testcerts"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type keyCount struct {
	Key   int64 `json:"k"`
	Count int64 `json:"c"`
}

type runningCount struct {
	count state.ValueState[int64]
	fail  *atomic.Int64 // fails once when it reaches 0
}

func (r *runningCount) Open(ctx *sluice.OperatorContext) error {
	var err error
	r.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

var errInjected = errors.New("injected failure")

func (r *runningCount) ProcessElement(ctx *sluice.KeyedContext[int64], v int64, out sluice.Collector[keyCount]) error {
	n, _, err := r.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := r.count.Update(n); err != nil {
		return err
	}
	if r.fail != nil && r.fail.Add(-1) == 0 {
		return fmt.Errorf("count of key %d: %w", ctx.Key(), errInjected)
	}
	out.Collect(keyCount{Key: ctx.Key(), Count: n})
	return nil
}

// job is what every process of a test builds: the same plan, whatever
// its role.
type job struct {
	records, keys int64
	rate          float64
	par           int
	// srcPar is the source's parallelism (0: par); the datagen source
	// does not rescale, so a rescaled job keeps it.
	srcPar     int
	cpDir, out string
	// backend, when set, gives each process (by worker id, "" for the
	// coordinator) its state backend option.
	backend func(worker string) sluice.Option
	failAt  *atomic.Int64
}

func (j job) env(c cluster.Config, opts ...sluice.Option) *sluice.Environment {
	if j.backend != nil {
		opts = append(opts, j.backend(c.WorkerID))
	}
	env := sluice.NewEnvironment(append([]sluice.Option{
		sluice.WithParallelism(j.par),
		sluice.WithJobName("clustered-count"),
		sluice.WithCheckpointing(50*time.Millisecond, j.cpDir),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(5, 50*time.Millisecond)),
		cluster.With(c),
	}, opts...)...)
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(j.records), source.DatagenRate(j.rate))
	srcPar := j.srcPar
	if srcPar == 0 {
		srcPar = j.par
	}
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen", sluice.UID("gen"), sluice.Parallelism(srcPar))
	counts := sluice.Process[int64, int64, keyCount](sluice.KeyBy(s, func(v int64) int64 { return v % j.keys }),
		&runningCount{fail: j.failAt}, sluice.Name("count"), sluice.UID("count"),
		sluice.QueryableValueState[int64]("count", state.ValueStateDescriptor[int64]{Name: "count"}))
	sluice.SinkTo(counts, filesink.New[keyCount](j.out, codec.JSON[keyCount]{}), sluice.Name("files"), sluice.UID("files"))
	return env
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// checkExact fails unless every key's counts 1..n were committed once.
func checkExact(t *testing.T, out string, records, keys int64) {
	t.Helper()
	got, err := filesink.ReadCommitted(out, codec.JSON[keyCount]{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[keyCount]int{}
	last := map[int64]int64{}
	for _, kc := range got {
		seen[kc]++
		last[kc.Key] = max(last[kc.Key], kc.Count)
	}
	for kc, n := range seen {
		if n != 1 {
			t.Fatalf("%+v committed %d times", kc, n)
		}
	}
	for k := range keys {
		want := records / keys
		if k < records%keys {
			want++
		}
		if last[k] != want {
			t.Errorf("key %d ends at %d, want %d", k, last[k], want)
		}
		for c := int64(1); c <= last[k]; c++ {
			if seen[keyCount{Key: k, Count: c}] != 1 {
				t.Fatalf("count %d of key %d never committed", c, k)
			}
		}
	}
}

// workers starts n workers of j with slots each, in this process; they
// run until the job ends.
func workers(t *testing.T, j job, coord string, n, slots int, started ...func(*cluster.WorkerView)) (wait func() []error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cluster.Config{Role: cluster.RoleWorker, Coordinator: coord, Slots: slots,
				WorkerID: fmt.Sprintf("w%d", i), DataListen: "127.0.0.1:0", Host: "127.0.0.1",
				HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second}
			if len(started) > 0 {
				c.WorkerStarted = started[0]
			}
			ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
			defer cancel()
			errs[i] = j.env(c).Execute(ctx)
		}()
	}
	return func() []error { wg.Wait(); return errs }
}

// A keyed count on a coordinator and three workers of two slots,
// parallelism 6: the records cross workers over TCP, checkpoints complete,
// the output is exactly once, and the workers exit when the job ends.
func TestJobOnThreeWorkers(t *testing.T) {
	j := job{records: 6000, keys: 24, rate: 3000, par: 6, cpDir: t.TempDir(), out: t.TempDir()}
	addr := freeAddr(t)
	coordCfg := cluster.Config{Role: cluster.RoleCoordinator, Listen: addr,
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	var completed atomic.Int64
	jb, err := j.env(coordCfg, sluice.WithCheckpointListener(func(s checkpoint.Stats) {
		if s.Status == checkpoint.StatusCompleted {
			completed.Add(1)
		}
	})).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	views := make(chan *cluster.WorkerView, 3)
	wait := workers(t, j, addr, 3, 2, func(v *cluster.WorkerView) { views <- v })
	// The coordinator runs no task: a query goes to the worker running
	// the subtask that owns the key, over the control plane.
	answered := map[int64]bool{}
	testutil.Await(t, "every key's count answered by its subtask on its worker", func() bool {
		for k := range j.keys {
			res, err := jb.QueryState(ctx, "count", fmt.Sprint(k))
			if errors.Is(err, sluice.ErrQueryUnavailable) {
				return false // deploying
			}
			if err != nil {
				t.Fatalf("query of key %d: %v", k, err)
			}
			if want := ownerOf(t, k, j.par); res.Subtask != want {
				t.Fatalf("key %d answered by subtask %d, its key group is subtask %d's", k, res.Subtask, want)
			}
			var n int64
			if res.Found {
				if err := json.Unmarshal(res.Value, &n); err != nil || n < 1 || n > j.records/j.keys+1 {
					t.Fatalf("key %d: count %s (%v)", k, res.Value, err)
				}
				answered[k] = true
			}
		}
		return len(answered) == int(j.keys)
	})
	if _, err := jb.QueryState(ctx, "count", "x"); !errors.Is(err, sluice.ErrQueryKey) {
		t.Fatalf("a key that does not parse: %v", err)
	}
	// The coordinator serves every task's figures, from the workers.
	testutil.Await(t, "task metrics of the 12 tasks from the 3 workers", func() bool {
		ms := jb.Metrics()
		on := map[string]bool{}
		var in int64
		for _, m := range ms {
			on[m.Worker] = true
			in += m.RecordsIn
		}
		return len(ms) == 12 && len(on) == 3 && !on[""] && in > 0
	})
	// A worker serves its own tasks' metrics, labelled with its id.
	v := <-views
	collector := metrics.NewCollector()
	collector.AddJob(v)
	reg := prometheus.NewRegistry()
	prometheus.WrapRegistererWith(prometheus.Labels{"worker": v.WorkerID()}, reg).MustRegister(collector)
	testutil.Await(t, "the worker's task metrics", func() bool {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if !strings.Contains(mf.GetName(), "numRecordsIn") {
				continue
			}
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if l.GetName() == "worker" && l.GetValue() == v.WorkerID() && len(mf.Metric) == 4 {
						return true
					}
				}
			}
		}
		return false
	})
	// The coordinator's API says which worker runs each subtask.
	a := api.New(api.Options{PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer a.Close()
	id := a.AddJob(jb)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	var details struct {
		Vertices []struct{ ID string } `json:"vertices"`
	}
	getJSON(t, srv.URL+"/jobs/"+id, &details)
	if len(details.Vertices) == 0 {
		t.Fatal("the job has no vertex")
	}
	var bp api.JobVertexBackPressureInfo
	getJSON(t, srv.URL+"/jobs/"+id+"/vertices/"+details.Vertices[0].ID+"/backpressure", &bp)
	if len(bp.Subtasks) != 6 {
		t.Fatalf("backpressure of vertex %s: %d subtasks, want 6", details.Vertices[0].ID, len(bp.Subtasks))
	}
	for _, st := range bp.Subtasks {
		if st.TaskManagerID == "" {
			t.Fatalf("subtask %d has no taskmanager-id: %+v", st.Subtask, bp.Subtasks)
		}
	}
	if err := jb.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	for i, err := range wait() {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	if completed.Load() < 2 {
		t.Errorf("%d checkpoints completed, want a few", completed.Load())
	}
	checkExact(t, j.out, j.records, j.keys)
}

// A task failing on a worker restarts the whole job from its latest
// checkpoint on the workers; the output stays exactly once.
func TestJobOnWorkersRestartsAfterATaskFailure(t *testing.T) {
	fail := &atomic.Int64{}
	fail.Store(1500)
	j := job{records: 8000, keys: 16, rate: 8000, par: 4, cpDir: t.TempDir(), out: t.TempDir(), failAt: fail}
	addr := freeAddr(t)
	coordCfg := cluster.Config{Role: cluster.RoleCoordinator, Listen: addr,
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	jb, err := j.env(coordCfg).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wait := workers(t, j, addr, 2, 2)
	if err := jb.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	wait()
	if jb.Restarts() < 1 {
		t.Fatalf("the job restarted %d times; the injected failure should have restarted it", jb.Restarts())
	}
	checkExact(t, j.out, j.records, j.keys)
}

// A worker built from other code (another plan) is refused with an error
// that says so.
func TestWorkerOfOtherCodeIsRefused(t *testing.T) {
	j := job{records: 1 << 40, keys: 4, rate: 1000, par: 2, cpDir: t.TempDir(), out: t.TempDir()}
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	jb, err := j.env(cluster.Config{Role: cluster.RoleCoordinator, Listen: addr, SlotTimeout: time.Minute}).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		jb.Cancel()
		_ = jb.Wait()
	}()
	other := j
	other.par = 3 // another plan
	worker := cluster.Config{Role: cluster.RoleWorker, Coordinator: addr, DataListen: "127.0.0.1:0", WorkerID: "odd"}
	err = other.env(worker).Execute(ctx)
	if !errors.Is(err, cluster.ErrFingerprintMismatch) {
		t.Fatalf("worker of another plan: %v, want ErrFingerprintMismatch", err)
	}
	// The same plan with other checkpointing or another state backend.
	for name, opt := range map[string]sluice.Option{
		"at-least-once checkpoints": sluice.WithCheckpointingMode(sluice.AtLeastOnce),
		"another interval":          sluice.WithCheckpointing(time.Second, j.cpDir),
		"unaligned checkpoints":     sluice.WithUnalignedCheckpoints(0),
		"RocksDB":                   sluice.WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{})),
	} {
		if err := j.env(worker, opt).Execute(ctx); !errors.Is(err, cluster.ErrFingerprintMismatch) {
			t.Errorf("worker with %s: %v, want ErrFingerprintMismatch", name, err)
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// HA: two coordinators campaign on a real etcd, over TLS with a user;
// the workers follow the leader through etcd. Each coordinator listens on
// a port of its choice and publishes the port bound. The leader stops
// (suspends, resigning: not ErrLeadershipLost); the standby, which said it
// stands by and is given no resume option, takes over, resumes from the
// checkpoint the job's pointer in etcd names (the leader's last) and
// finishes the job on the same workers: exactly once.
func TestStandbyCoordinatorTakesOver(t *testing.T) {
	etcd := etcdtest.StartServer(t, etcdtest.WithTLS(testcerts.NewTestCA(t, "etcd CA")), etcdtest.WithAuth("sluice", "etcd password"))
	endpoints := etcd.Endpoints()
	withEtcd := func(c cluster.Config) cluster.Config {
		c.EtcdEndpoints, c.EtcdUsername, c.EtcdPassword, c.EtcdTLSCA = endpoints, "sluice", "etcd password", etcd.CAFile()
		return c
	}
	j := job{records: 9000, keys: 12, rate: 3000, par: 4, cpDir: t.TempDir(), out: t.TempDir()}
	var standing atomic.Int64
	coordinator := func(addr string) cluster.Config {
		return withEtcd(cluster.Config{Role: cluster.RoleCoordinator, Listen: addr, Host: "127.0.0.1",
			LeaseDuration: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second,
			Standby: func(waiting bool) {
				if waiting {
					standing.Add(1)
				} else {
					standing.Add(-1)
				}
			}})
	}
	ctxA, suspendA := context.WithCancel(context.Background())
	defer suspendA()
	var completedA, lastA atomic.Int64
	leader, err := j.env(coordinator("127.0.0.1:0"), sluice.WithCheckpointListener(func(s checkpoint.Stats) {
		if s.Status == checkpoint.StatusCompleted {
			completedA.Add(1)
			lastA.Store(s.ID)
		}
	})).ExecuteAsync(ctxA)
	if err != nil {
		t.Fatal(err)
	}
	standby := make(chan *sluice.Job, 1)
	var logsB testutil.LogRecorder
	var observedB standbyObserver // the root's StandbyObservers hear what Config.Standby does
	var firstB atomic.Int64       // the checkpoint the standby's first attempt restored
	ctxB, cancelB := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancelB()
	go func() {
		jb, err := j.env(coordinator("127.0.0.1:0"), sluice.WithLogger(logsB.Logger()), sluice.WithObservers(&observedB), sluice.WithRestoreListener(func(ri sluice.RestoreInfo) {
			firstB.CompareAndSwap(0, ri.CheckpointID)
		})).ExecuteAsync(ctxB)
		if err != nil {
			t.Errorf("standby coordinator: %v", err)
		}
		standby <- jb
	}()
	var wg sync.WaitGroup
	var workerLogs [2]testutil.LogRecorder
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := withEtcd(cluster.Config{Role: cluster.RoleWorker, Slots: 2, WorkerID: fmt.Sprintf("w%d", i), DataListen: "127.0.0.1:0",
				Host: "127.0.0.1", HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second})
			if err := j.env(c, sluice.WithLogger(workerLogs[i].Logger())).Execute(ctxB); err != nil {
				t.Errorf("worker %d: %v", i, err)
			}
		}()
	}
	testutil.Await(t, "three checkpoints of the first leader", func() bool { return completedA.Load() >= 3 })
	select {
	case <-standby:
		t.Fatal("the standby started while the leader leads")
	default:
	}
	testutil.Await(t, "the standby to say it stands by", func() bool { return standing.Load() == 1 })
	if got := observedB.said(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("the standby's StandbyObserver heard %v, want [true]", got)
	}
	// The leader published the port it listens on, not :0.
	if addr := leaderAddr(t, etcd, leader.ID()); strings.HasSuffix(addr, ":0") || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("the leader published %q, want the address it is bound to", addr)
	}
	suspendA()
	if err := leader.Wait(); !errors.Is(err, sluice.ErrJobSuspended) || errors.Is(err, cluster.ErrLeadershipLost) {
		t.Fatalf("the first leader: %v, want suspended, not ErrLeadershipLost", err)
	}
	var next *sluice.Job
	select {
	case next = <-standby:
	case <-time.After(testutil.SafetyNet):
		t.Fatal("the standby never took over")
	}
	if next == nil {
		t.FailNow()
	}
	// The workers learn of the new leader from etcd's watch, which ends
	// their wait between attempts to reach a coordinator.
	var addrB string
	for _, l := range logsB.Find("coordinator listening") {
		if m := regexp.MustCompile(`^INFO .* address=(\S+)`).FindStringSubmatch(l); m != nil {
			addrB = m[1]
		}
	}
	if addrB == "" {
		t.Fatalf("the standby logged no address it listens on: %q", logsB.Find("coordinator listening"))
	}
	for i := range workerLogs {
		testutil.Await(t, "the worker to log the new leader", func() bool {
			for _, l := range workerLogs[i].Find("the job's leader changed") {
				if strings.Contains(l, "coordinator="+addrB) {
					return true
				}
			}
			return false
		})
	}
	if err := next.Wait(); err != nil {
		t.Fatalf("the second leader's job: %v", err)
	}
	wg.Wait()
	if got := observedB.said(); !slices.Equal(got, []bool{true, false}) {
		t.Errorf("the second leader's StandbyObserver heard %v, want [true false]", got)
	}
	if got := firstB.Load(); got != lastA.Load() {
		t.Fatalf("the standby restored checkpoint %d, want the first leader's last checkpoint %d", got, lastA.Load())
	}
	if said := logsB.Find("resuming from the checkpoint the HA store points to"); len(said) != 1 || !strings.Contains(said[0], fmt.Sprintf("checkpoint=%d", lastA.Load())) {
		t.Fatalf("the standby logged %q; want it to resume from the pointer's checkpoint %d", said, lastA.Load())
	}
	checkExact(t, j.out, j.records, j.keys)
}

// standbyObserver records what a coordinator's StandbyObserver is told.
type standbyObserver struct {
	mu    sync.Mutex
	calls []bool
}

func (o *standbyObserver) ObserveStandby(waiting bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, waiting)
}

func (o *standbyObserver) said() []bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.calls)
}

// leaderAddr is the address the job's leader published in etcd.
func leaderAddr(t *testing.T, etcd *etcdtest.Server, jobID string) string {
	t.Helper()
	s, err := ha.Open(testutil.Context(t, 0), ha.Config{Endpoints: etcd.Endpoints(), TLS: etcd.ClientTLS(), Username: "sluice", Password: "etcd password"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr, _, err := s.Leader(testutil.Context(t, 0), jobID)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// A leader whose leadership goes (its lease revoked, as when it stays
// paused past it) ends its job with ErrLeadershipLost; a leader that
// finishes resigns before Wait returns, so a standby need not wait for
// its lease (a minute here) to expire.
func TestLeadershipLostAndResigned(t *testing.T) {
	endpoints := etcdtest.Start(t)
	coordinator := cluster.Config{Role: cluster.RoleCoordinator, Listen: "127.0.0.1:0", Host: "127.0.0.1", EtcdEndpoints: endpoints,
		LeaseDuration: time.Minute, HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	services, err := etcdha.Open(ctx, ha.Config{Endpoints: endpoints})
	if err != nil {
		t.Fatal(err)
	}
	defer services.Close()

	// Lost: the leader key's lease revoked behind the leader's back.
	lost := job{records: 1 << 40, keys: 4, rate: 1000, par: 1, cpDir: t.TempDir(), out: t.TempDir()}
	jb, err := lost.env(coordinator).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := services.Client().Get(ctx, "/sluice/jobs/"+jb.ID()+"/leader/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the leader key: %v %v", resp, err)
	}
	if _, err := services.Client().Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	if err := jb.Wait(); !errors.Is(err, cluster.ErrLeadershipLost) {
		t.Fatalf("the job of a leader whose lease was revoked: %v, want ErrLeadershipLost", err)
	}

	// Finished: no leader key is left once Wait returns.
	finished := job{records: 200, keys: 4, rate: 4000, par: 2, cpDir: t.TempDir(), out: t.TempDir()}
	addr := freeAddr(t)
	c := coordinator
	c.Listen = addr
	jb, err = finished.env(c).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wait := workers(t, finished, addr, 1, 2)
	if err := jb.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := services.Leader(ctx, jb.ID()); !errors.Is(err, ha.ErrNoLeader) {
		t.Errorf("after the job finished: %v, want no leader (the leader resigned)", err)
	}
	wait()
}

// Stop-with-savepoint of a job at parallelism 4 on two workers, then the
// job restored from that savepoint at parallelism 6 on three workers:
// every count exactly once (the rescale redistributes the key groups).
func TestStopWithSavepointAndRescaleOnWorkers(t *testing.T) {
	out, cpDir, spDir := t.TempDir(), t.TempDir(), t.TempDir()
	run := func(par, nWorkers int, restore string, stop bool) (savepoint string) {
		t.Helper()
		j := job{records: 9000, keys: 18, rate: 4000, par: par, srcPar: 2, cpDir: cpDir, out: out}
		addr := freeAddr(t)
		coordCfg := cluster.Config{Role: cluster.RoleCoordinator, Listen: addr,
			HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
		defer cancel()
		var opts []sluice.Option
		if restore != "" {
			opts = append(opts, sluice.WithRestoreFrom(restore))
		}
		var completed atomic.Int64
		opts = append(opts, sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				completed.Add(1)
			}
		}))
		jb, err := j.env(coordCfg, opts...).ExecuteAsync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wait := workers(t, j, addr, nWorkers, 2)
		if stop {
			testutil.Await(t, "two checkpoints before the savepoint", func() bool { return completed.Load() >= 2 })
			path, err := jb.StopWithSavepoint(ctx, spDir, false)
			if err != nil {
				t.Fatalf("stop with savepoint: %v", err)
			}
			restore = path
		}
		if err := jb.Wait(); err != nil {
			t.Fatalf("job at parallelism %d: %v", par, err)
		}
		for i, err := range wait() {
			if err != nil {
				t.Errorf("worker %d: %v", i, err)
			}
		}
		return restore
	}
	savepoint := run(4, 2, "", true)
	if savepoint == "" {
		t.Fatal("no savepoint")
	}
	got, err := filesink.ReadCommitted(out, codec.JSON[keyCount]{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || len(got) >= 9000 {
		t.Fatalf("%d records committed before the stop; want some, not all", len(got))
	}
	run(6, 3, savepoint, false)
	checkExact(t, out, 9000, 18)
}

// mutualTLS is a process's mutual TLS with a certificate named cn of ca.
func mutualTLS(t *testing.T, ca *testcerts.CA, cn string) peerauth.Config {
	t.Helper()
	cert, key := ca.MustIssue(t, cn).Files(t)
	return peerauth.Config{TLS: true, CertFile: cert, KeyFile: key, TrustFile: ca.File(t)}
}

// With mutual TLS the control plane and the data plane are authenticated
// and encrypted; the job runs exactly once as over plain TCP. A worker
// without a certificate, or with one of another CA, never registers.
func TestJobOnWorkersWithMutualTLS(t *testing.T) {
	ca := testcerts.NewTestCA(t, "deployment CA")
	j := job{records: 4000, keys: 8, rate: 8000, par: 4, cpDir: t.TempDir(), out: t.TempDir()}
	addr := freeAddr(t)
	hb := func(c cluster.Config) cluster.Config {
		c.HeartbeatInterval, c.HeartbeatTimeout = 100*time.Millisecond, 2*time.Second
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	coord := hb(cluster.Config{Role: cluster.RoleCoordinator, Listen: addr, SlotTimeout: 20 * time.Second})
	coord.Security = mutualTLS(t, ca, "coordinator")
	jb, err := j.env(coord).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, sec := range map[string]peerauth.Config{
		"no certificate":  {},
		"another CA":      mutualTLS(t, testcerts.NewTestCA(t, "another CA"), "stranger"),
		"a shared secret": {Secret: []byte("a secret nobody configured")},
	} {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		stranger := hb(cluster.Config{Role: cluster.RoleWorker, Coordinator: addr, Slots: 4, WorkerID: "stranger",
			DataListen: "127.0.0.1:0", Host: "127.0.0.1"})
		stranger.Security = sec
		_ = j.env(stranger).Execute(sctx) // cannot register: retries until its context ends
		scancel()
		if ws := jb.Metrics(); len(ws) != 0 {
			t.Fatalf("a worker with %s got tasks: %+v", name, ws)
		}
	}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := hb(cluster.Config{Role: cluster.RoleWorker, Coordinator: addr, Slots: 2, WorkerID: fmt.Sprintf("w%d", i),
				DataListen: "127.0.0.1:0", Host: "127.0.0.1"})
			c.Security = mutualTLS(t, ca, c.WorkerID)
			if err := j.env(c).Execute(ctx); err != nil {
				t.Errorf("worker %d: %v", i, err)
			}
		}()
	}
	if err := jb.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	wg.Wait()
	checkExact(t, j.out, j.records, j.keys)
}

// Listening beyond loopback without authentication is refused, naming
// the keys; security.internal.insecure accepts it, with a WARN.
func TestSecureByDefault(t *testing.T) {
	j := job{records: 10, keys: 2, rate: 1000, par: 1, cpDir: t.TempDir(), out: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	_, err := j.env(cluster.Config{Role: cluster.RoleCoordinator, Listen: ":0"}).ExecuteAsync(ctx)
	if !errors.Is(err, peerauth.ErrInsecureListen) || !strings.Contains(err.Error(), peerauth.KeyInsecure) {
		t.Fatalf("a coordinator on every interface without authentication: %v, want ErrInsecureListen naming %s", err, peerauth.KeyInsecure)
	}
	err = j.env(cluster.Config{Role: cluster.RoleWorker, Coordinator: "127.0.0.1:1", DataListen: ":0", WorkerID: "w"}).Execute(ctx)
	if !errors.Is(err, peerauth.ErrInsecureListen) {
		t.Fatalf("a worker on every interface without authentication: %v, want ErrInsecureListen", err)
	}
	var logs syncBuffer
	c := cluster.Config{Role: cluster.RoleCoordinator, Listen: ":0", SlotTimeout: time.Minute}
	c.Security.Insecure = true
	jb, err := j.env(c, sluice.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))).ExecuteAsync(ctx)
	if err != nil {
		t.Fatalf("with %s: %v", peerauth.KeyInsecure, err)
	}
	jb.Cancel()
	_ = jb.Wait()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "not authenticated") {
		t.Errorf("an insecure coordinator did not warn:\n%s", logs.String())
	}
}

// A worker that cannot reach its coordinator says so at INFO, with the
// address it tried, once; its retries say it at DEBUG.
func TestWorkerSaysItCannotReachItsCoordinator(t *testing.T) {
	j := job{records: 10, keys: 2, rate: 1000, par: 1, cpDir: t.TempDir(), out: t.TempDir()}
	addr := freeAddr(t) // nobody listens there
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- j.env(cluster.Config{Role: cluster.RoleWorker, Coordinator: addr, WorkerID: "w", DataListen: "127.0.0.1:0",
			HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second}, sluice.WithLogger(logger)).Execute(wctx)
	}()
	testutil.Await(t, "two attempts to reach the coordinator", func() bool {
		return strings.Count(logs.String(), "cannot reach the coordinator") >= 2
	})
	stop()
	<-done
	var info, debug int
	for _, l := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(l, "cannot reach the coordinator") {
			continue
		}
		if !strings.Contains(l, "coordinator="+addr) {
			t.Errorf("the line does not name the address tried: %s", l)
		}
		switch {
		case strings.Contains(l, "level=INFO"):
			info++
		case strings.Contains(l, "level=DEBUG"):
			debug++
		}
	}
	if info != 1 || debug == 0 {
		t.Errorf("%d INFO and %d DEBUG lines about the unreachable coordinator, want one INFO, then DEBUG", info, debug)
	}
}

// logMsg is the message of a text log line.
var logMsg = regexp.MustCompile(`msg=(?:"([^"]*)"|(\S+))`)

// A worker that stops is reported once, at INFO, its cause in words; no
// gRPC code reaches the log.
func TestWorkerLossLoggedOnceInWords(t *testing.T) {
	j := job{records: 1 << 40, keys: 4, rate: 2000, par: 2, cpDir: t.TempDir(), out: t.TempDir()}
	addr := freeAddr(t)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	var completed atomic.Int64
	jb, err := j.env(cluster.Config{Role: cluster.RoleCoordinator, Listen: addr, SlotTimeout: time.Minute,
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second},
		sluice.WithLogger(logger), sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				completed.Add(1)
			}
		})).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		jb.Cancel()
		_ = jb.Wait()
	}()
	wctx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- j.env(cluster.Config{Role: cluster.RoleWorker, Coordinator: addr, Slots: 2, WorkerID: "w2",
			DataListen: "127.0.0.1:0", Host: "127.0.0.1", HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second}).Execute(wctx)
	}()
	testutil.Await(t, "a checkpoint on the worker", func() bool { return completed.Load() >= 1 })
	stopWorker()
	<-done
	testutil.Await(t, "the loss logged", func() bool { return strings.Contains(logs.String(), `msg="worker lost"`) })
	// The loss itself once; the attempt's stop and the restart it causes
	// (other events) at INFO too.
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "w2 lost") && !strings.Contains(l, "level=INFO") {
			t.Errorf("a failover line not at INFO: %s", l)
		}
		if m := logMsg.FindStringSubmatch(l); m != nil && strings.Contains(m[1]+m[2], "lost") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], `msg="worker lost" role=coordinator worker=w2 tasks=`) ||
		!strings.Contains(lines[0], `cause="connection closed"`) {
		t.Errorf("the loss of w2 logged as %q, want one INFO line: worker lost, w2, cause \"connection closed\"", lines)
	}
	for _, bad := range []string{"rpc error", "code = ", "desc = "} {
		if strings.Contains(logs.String(), bad) {
			t.Errorf("the coordinator's log has %q:\n%s", bad, logs.String())
		}
	}
}

// A task failure restarts the job with every slot on the worker it had:
// RocksDB recovers its state from the worker's local copy of the
// checkpoint (local recovery) instead of downloading it.
func TestRestartedTasksRecoverRocksDBLocally(t *testing.T) {
	fail := &atomic.Int64{}
	fail.Store(1200)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	root := t.TempDir()
	j := job{records: 6000, keys: 16, rate: 6000, par: 4, cpDir: t.TempDir(), out: t.TempDir(), failAt: fail,
		backend: func(worker string) sluice.Option {
			return sluice.WithStateBackend(rocksdb.Factory(filepath.Join(root, "w-"+worker), rocksdb.Options{LocalRecovery: true, Logger: logger}))
		}}
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	jb, err := j.env(cluster.Config{Role: cluster.RoleCoordinator, Listen: addr,
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second}).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wait := workers(t, j, addr, 2, 2)
	if err := jb.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	wait()
	if jb.Restarts() < 1 {
		t.Fatal("the injected failure did not restart the job")
	}
	if info, ok := jb.LastRestore(); !ok || info.CheckpointID == 0 {
		t.Skip("the failure came before the first checkpoint: nothing to recover")
	}
	if n := strings.Count(logs.String(), "rocksdb backend: local recovery"); n == 0 {
		t.Fatalf("no task recovered locally after the restart; logs:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "rocksdb backend: downloaded checkpoint") {
		t.Fatalf("a task on the worker it had downloaded its state; logs:\n%s", logs.String())
	}
	checkExact(t, j.out, j.records, j.keys)
}

// A worker lost (its process gone) restarts the job with the tasks of the
// workers still there on the slots they had: their RocksDB state comes
// from the local copy, not a byte downloaded, and only the lost worker's
// subtasks, placed on the spare slots (of any worker), download theirs.
// The output stays exactly once.
func TestWorkerLossKeepsSurvivorsLocal(t *testing.T) {
	root := t.TempDir()
	logs := map[string]*syncBuffer{"w0": {}, "w1": {}, "w2": {}}
	j := job{records: 12000, keys: 16, rate: 6000, par: 4, cpDir: t.TempDir(), out: t.TempDir(),
		backend: func(worker string) sluice.Option {
			var logger *slog.Logger
			if b := logs[worker]; b != nil {
				logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
			}
			return sluice.WithStateBackend(rocksdb.Factory(filepath.Join(root, "w-"+worker), rocksdb.Options{LocalRecovery: true, Logger: logger}))
		}}
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	var completed atomic.Int64
	jb, err := j.env(cluster.Config{Role: cluster.RoleCoordinator, Listen: addr,
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second},
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				completed.Add(1)
			}
		})).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Three workers of two slots for four subtasks: two slots spare.
	stops := map[string]context.CancelFunc{}
	done := map[string]chan error{}
	for id := range logs {
		wctx, stop := context.WithCancel(ctx)
		ch := make(chan error, 1)
		stops[id], done[id] = stop, ch
		go func() {
			ch <- j.env(cluster.Config{Role: cluster.RoleWorker, Coordinator: addr, Slots: 2, WorkerID: id,
				DataListen: "127.0.0.1:0", Host: "127.0.0.1", HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second}).Execute(wctx)
		}()
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	// The count subtasks each worker runs before the loss.
	counts := map[string]int{}
	testutil.Await(t, "two checkpoints and every task's figures", func() bool {
		clear(counts)
		n := 0
		for _, m := range jb.Metrics() {
			if m.Worker != "" && strings.Contains(m.Vertex, "count") {
				counts[m.Worker]++
				n++
			}
		}
		return completed.Load() >= 2 && n == j.par
	})
	lost := ""
	for id := range counts {
		if lost == "" || id < lost {
			lost = id
		}
	}
	restarts := jb.Restarts()
	stops[lost]()
	if err := <-done[lost]; err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("worker %s: %v", lost, err)
	}
	if err := jb.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	if jb.Restarts() <= restarts {
		t.Fatalf("the loss of worker %s restarted the job %d times", lost, jb.Restarts()-restarts)
	}
	if info, ok := jb.LastRestore(); !ok || info.CheckpointID == 0 {
		t.Fatalf("the restart after the loss restored nothing (%+v)", info)
	}
	downloads := 0
	for id, b := range logs {
		l := b.String()
		local := strings.Count(l, "rocksdb backend: local recovery")
		downloaded := strings.Count(l, "rocksdb backend: downloaded checkpoint")
		downloads += downloaded
		switch {
		case id == lost:
		case local != counts[id]:
			// The subtasks it ran recover locally; those of the lost
			// worker it takes on its spare slots download.
			t.Errorf("worker %s ran %d count subtasks before the loss and recovered %d locally (%d downloaded); logs:\n%s",
				id, counts[id], local, downloaded, l)
		}
	}
	if downloads != counts[lost] {
		t.Errorf("%d restores downloaded their state, want %d (the subtasks of the lost worker %s)", downloads, counts[lost], lost)
	}
	for id, ch := range done {
		if id != lost {
			if err := <-ch; err != nil {
				t.Errorf("worker %s: %v", id, err)
			}
		}
	}
	checkExact(t, j.out, j.records, j.keys)
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ownerOf is the subtask owning key k at parallelism par (max
// parallelism 128).
func ownerOf(t *testing.T, k int64, par int) int {
	b, err := codec.DefaultKey[int64]().Append(nil, k)
	if err != nil {
		t.Fatal(err)
	}
	return state.OperatorIndexFor(state.KeyGroupFor(b, 128), 128, par)
}
