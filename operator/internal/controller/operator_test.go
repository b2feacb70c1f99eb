package controller

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
)

// The tests run the operator against a real API server (envtest: the
// kube-apiserver and etcd scripts/envtest builds; KUBEBUILDER_ASSETS),
// with the test playing the rest of the cluster (kubelet_test.go), and the
// job's processes are examples/wordcountd, built from this repository,
// on a real Kafka broker (KAFKA_BROKERS: scripts/with-kafka). make
// test-operator sets both; without them the tests are skipped, saying why.

var (
	testEnv     *envtest.Environment
	testCfg     *rest.Config
	testScheme  = k8sruntime.NewScheme()
	jobBinary   string
	brokers     []string
	skipReason  string
	nsCounter   atomic.Int32
	crdDir      = filepath.Join("..", "..", "..", "deploy", "operator", "crd")
	repoRoot, _ = filepath.Abs(filepath.Join("..", "..", ".."))
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	_ = clientgoscheme.AddToScheme(testScheme)
	_ = sluicev1.AddToScheme(testScheme)
	switch {
	case os.Getenv("KUBEBUILDER_ASSETS") == "":
		skipReason = "KUBEBUILDER_ASSETS is not set: run make test-operator (scripts/envtest builds kube-apiserver and etcd)"
	case os.Getenv("KAFKA_BROKERS") == "":
		skipReason = "KAFKA_BROKERS is not set: run make test-operator (scripts/with-kafka starts a broker)"
	}
	if skipReason != "" {
		return m.Run()
	}
	brokers = strings.Split(os.Getenv("KAFKA_BROKERS"), ",")
	// controller-runtime's own errors (a failed reconcile) on stderr.
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	dir, err := os.MkdirTemp("", "sluice-operator-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	jobBinary = os.Getenv("SLUICE_TEST_JOB_BINARY")
	if jobBinary == "" {
		jobBinary = filepath.Join(dir, "wordcountd")
		cmd := exec.Command("go", "build", "-o", jobBinary, "./examples/wordcountd")
		cmd.Dir, cmd.Stdout, cmd.Stderr = repoRoot, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build examples/wordcountd, the test job: %v\n", err)
			return 1
		}
	}
	// scripts/envtest builds kube-apiserver unoptimised (cheap to build,
	// slower to start): on a loaded 2-core machine it takes longer than
	// envtest's default 20 s to serve.
	testEnv = &envtest.Environment{CRDDirectoryPaths: []string{crdDir}, ErrorIfCRDPathMissing: true,
		ControlPlaneStartTimeout: 3 * time.Minute}
	start := time.Now()
	testCfg, err = testEnv.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start envtest (KUBEBUILDER_ASSETS=%s): %v\n", os.Getenv("KUBEBUILDER_ASSETS"), err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "envtest: kube-apiserver and etcd serving after %v\n", time.Since(start).Round(100*time.Millisecond))
	code := m.Run()
	if err := testEnv.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop envtest: %v\n", err)
	}
	return code
}

// cluster is one test's namespace with the operator and the kubelet.
type cluster struct {
	t      *testing.T
	c      client.Client
	ns     string
	k      *kubelet
	stopOp context.CancelFunc
	opDone chan struct{}
	mu     sync.Mutex
	// coordinators is how many coordinator processes may run at once
	// (1, and the standbys under HA).
	coordinators int
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	// The cases run in parallel (go test -parallel): each has a namespace,
	// a kubelet, an operator, topics and a transactional id prefix of its
	// own, its processes on loopback addresses of their own; they mostly
	// wait on their jobs.
	t.Parallel()
	c, err := client.New(testCfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("t%d", nsCounter.Add(1))
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cl := &cluster{t: t, c: c, ns: ns, coordinators: 1}
	cl.k = newKubelet(t, c, ns, map[string]string{"wordcountd:v1": jobBinary, "wordcountd:v2": jobBinary, "wordcountd:v3": jobBinary})
	kctx, stopK := context.WithCancel(context.Background())
	kdone := make(chan struct{})
	go func() { defer close(kdone); cl.k.run(kctx) }()
	t.Cleanup(func() {
		cl.stopOperator()
		stopK()
		<-kdone
		if t.Failed() {
			t.Logf("the processes' logs:\n%s", cl.k.logs(40))
		}
	})
	cl.startOperator()
	return cl
}

// startOperator runs the operator's manager (a new one after a stop: an
// operator restarted).
func (cl *cluster) startOperator() {
	cl.t.Helper()
	mgr, err := ctrl.NewManager(testCfg, ctrl.Options{
		// Its own namespace only: the tests' operators run at once.
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{cl.ns: {}}},
		Scheme:                 testScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		cl.t.Fatal(err)
	}
	r := &Reconciler{Client: mgr.GetClient(), Scheme: testScheme, Recorder: mgr.GetEventRecorder("sluice-operator"),
		APIReader: mgr.GetAPIReader(), PollInterval: 300 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(testWriter{cl.t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		ServiceAddress: cl.k.serviceAddress}
	if err := r.SetupWithManager(mgr); err != nil {
		cl.t.Fatal(err)
	}
	if err := (&SavepointReconciler{Jobs: r}).SetupWithManager(mgr); err != nil {
		cl.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			cl.t.Errorf("operator: %v", err)
		}
	}()
	cl.mu.Lock()
	cl.stopOp, cl.opDone = cancel, done
	cl.mu.Unlock()
}

func (cl *cluster) stopOperator() {
	cl.mu.Lock()
	stop, done := cl.stopOp, cl.opDone
	cl.stopOp = nil
	cl.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// secrets creates the REST token and the processes' shared secret.
func (cl *cluster) secrets() {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sluice", Namespace: cl.ns},
		StringData: map[string]string{"token": "test-token-0123456789", "internal": "internal-secret-0123456789abcdef"}}
	if err := cl.c.Create(cl.t.Context(), s); err != nil {
		cl.t.Fatal(err)
	}
}

// job is a SluiceJob of wordcountd reading topic in, writing out.
func (cl *cluster) job(name, in, out string, parallelism, slots int32, mode sluicev1.UpgradeMode) *sluicev1.SluiceJob {
	ref := func(key string) *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sluice"}, Key: key}
	}
	return &sluicev1.SluiceJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cl.ns},
		Spec: sluicev1.SluiceJobSpec{
			Image:         "wordcountd:v1",
			Args:          []string{"--interval=1s", fmt.Sprintf("--api=$(SLUICE_POD_IP):%d", PortREST)},
			Parallelism:   parallelism,
			Slots:         slots,
			CheckpointDir: filepath.Join(cl.t.TempDir(), "checkpoints"),
			Env: []corev1.EnvVar{{Name: "KAFKA_BROKERS", Value: strings.Join(brokers, ",")},
				{Name: "SLUICE_INPUT_TOPIC", Value: in}, {Name: "SLUICE_OUTPUT_TOPIC", Value: out},
				// Jobs of tests running at once must not fence each other.
				{Name: "SLUICE_TRANSACTIONAL_ID_PREFIX", Value: "wordcountd-" + cl.ns}},
			Upgrade:  sluicev1.UpgradeSpec{Mode: mode, Timeout: &metav1.Duration{Duration: 2 * time.Minute}},
			Security: sluicev1.SecuritySpec{RESTToken: ref("token"), InternalSecret: ref("internal")},
		},
	}
}

func (cl *cluster) get(name string) *sluicev1.SluiceJob {
	var j sluicev1.SluiceJob
	if err := cl.c.Get(cl.t.Context(), client.ObjectKey{Namespace: cl.ns, Name: name}, &j); err != nil {
		cl.t.Fatal(err)
	}
	return &j
}

// update changes the job's spec (again on a conflict).
func (cl *cluster) update(name string, change func(*sluicev1.SluiceJobSpec)) {
	cl.t.Helper()
	for range 10 {
		j := cl.get(name)
		change(&j.Spec)
		err := cl.c.Update(cl.t.Context(), j)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "modified") {
			cl.t.Fatal(err)
		}
	}
	cl.t.Fatal("update: conflicts")
}

// await polls the job until cond holds.
func (cl *cluster) await(name, what string, timeout time.Duration, cond func(*sluicev1.SluiceJob) bool) *sluicev1.SluiceJob {
	cl.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j := cl.get(name)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			cl.t.Fatalf("%s: not within %v; status: %s", what, timeout, statusString(j))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func statusString(j *sluicev1.SluiceJob) string {
	s := fmt.Sprintf("phase %s job %s/%s parallelism %d epoch %d restore %q", j.Status.Phase, j.Status.Job.ID, j.Status.Job.State,
		j.Status.Job.Parallelism, j.Status.Epoch, j.Status.RestorePath)
	if u := j.Status.Upgrade; u != nil {
		s += fmt.Sprintf("; upgrade mode %s step %q outcome %q rollingBack %v: %s", u.Mode, u.Step, u.Outcome, u.RollingBack, u.Message)
	}
	for _, c := range j.Status.Conditions {
		s += fmt.Sprintf("; %s=%s (%s)", c.Type, c.Status, c.Message)
	}
	return s
}

func running(j *sluicev1.SluiceJob) bool {
	return j.Status.Phase == sluicev1.PhaseRunning && j.Status.Job.State == "RUNNING" &&
		(j.Status.Upgrade == nil || j.Status.Upgrade.Step == "")
}

func upgraded(outcome string) func(*sluicev1.SluiceJob) bool {
	return func(j *sluicev1.SluiceJob) bool {
		return j.Status.Upgrade != nil && j.Status.Upgrade.Step == "" && j.Status.Upgrade.Outcome == outcome && running(j)
	}
}

// noOverlap fails the test when two versions' processes ever ran at
// once, or two coordinators.
func (cl *cluster) noOverlap() {
	cl.t.Helper()
	cl.k.mu.Lock()
	defer cl.k.mu.Unlock()
	if cl.k.overlap != "" {
		cl.t.Errorf("two versions ran at once: %s", cl.k.overlap)
	}
	if cl.k.maxCoordinators > cl.coordinators {
		cl.t.Errorf("%d coordinators ran at once, want at most %d", cl.k.maxCoordinators, cl.coordinators)
	}
}

// --- Kafka ---------------------------------------------------------------

var vocabulary = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}

// topics creates an input and an output topic of two partitions each.
func topics(t *testing.T, prefix string) (string, string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	in, out := fmt.Sprintf("%s-in-%d", prefix, time.Now().UnixNano()), fmt.Sprintf("%s-out-%d", prefix, time.Now().UnixNano())
	resp, err := kadm.NewClient(cl).CreateTopics(t.Context(), 2, 1, nil, in, out)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	return in, out
}

// producer writes lines to the input while the test runs, counting the
// words it wrote.
type producer struct {
	t      *testing.T
	cl     *kgo.Client
	topic  string
	mu     sync.Mutex
	counts map[string]int
	lines  int
	stop   chan struct{}
	done   chan struct{}
}

func newProducer(t *testing.T, topic string) *producer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	p := &producer{t: t, cl: cl, topic: topic, counts: map[string]int{}}
	t.Cleanup(cl.Close)
	return p
}

// write produces n lines now.
func (p *producer) write(n int) {
	p.t.Helper()
	recs := make([]*kgo.Record, 0, n)
	p.mu.Lock()
	for range n {
		i := p.lines
		p.lines++
		line := vocabulary[i%len(vocabulary)] + " " + vocabulary[(i*7+3)%len(vocabulary)]
		for _, w := range strings.Fields(line) {
			p.counts[w]++
		}
		recs = append(recs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(line)})
	}
	p.mu.Unlock()
	if err := p.cl.ProduceSync(p.t.Context(), recs...).FirstErr(); err != nil {
		p.t.Fatal(err)
	}
}

// flow writes a few lines every 100 ms until stopped: input flowing
// through an upgrade.
func (p *producer) flow() {
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
				p.write(3)
			}
		}
	}()
}

func (p *producer) halt() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
}

func (p *producer) expected() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// exactlyOnce reads the committed output until every word's last count
// is n, the times the producer wrote it, and fails unless its counts are
// 1..n once each: each input line counted exactly once through whatever
// happened.
func exactlyOnce(t *testing.T, topic string, want map[string]int, timeout time.Duration) {
	t.Helper()
	for w, counts := range output(t, topic, want, timeout) {
		if !slices.Equal(counts, seq(1, want[w])) {
			t.Errorf("word %q: counts %v, want 1..%d once each", w, counts, want[w])
		}
	}
}

// restartedOnce is exactlyOnce for a stateless upgrade: every word's
// counts are 1..a (the old version's, committed before it stopped) then
// 1..n (the new version's, from no state and the earliest offsets), and
// some word's a is not 0.
func restartedOnce(t *testing.T, topic string, want map[string]int, timeout time.Duration) {
	t.Helper()
	restarted := 0
	for w, counts := range output(t, topic, want, timeout) {
		a := len(counts) - want[w]
		if a < 0 || !slices.Equal(counts, append(seq(1, a), seq(1, want[w])...)) {
			t.Errorf("word %q: counts %v, want 1..a then 1..%d", w, counts, want[w])
		}
		if a > 0 {
			restarted++
		}
	}
	if restarted == 0 {
		t.Error("no word's counts started again: the new version did not start from no state")
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// output reads the committed output until every word's last count is
// the one wanted, and returns each word's counts in order.
func output(t *testing.T, topic string, want map[string]int, timeout time.Duration) map[string][]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string][]int{}
	deadline := time.Now().Add(timeout)
	done := func() bool {
		for w, n := range want {
			if c := seen[w]; len(c) == 0 || c[len(c)-1] != n {
				return false
			}
		}
		return true
	}
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("the output did not reach the expected counts within %v: want %v, have %v", timeout, want, lens(seen))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			n, err := strconv.Atoi(string(r.Value))
			if err != nil {
				t.Fatalf("output record %q=%q: %v", r.Key, r.Value, err)
			}
			seen[string(r.Key)] = append(seen[string(r.Key)], n)
		})
	}
	return seen
}

func lens(m map[string][]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = v[len(v)-1]
	}
	return out
}

// --- the cases -------------------------------------------------------------

const runTimeout = 3 * time.Minute

// A SluiceJob is deployed secured and its job runs once: one
// coordinator, the output exactly once on a real broker, the status and
// the objects as the spec says. Secured: mutual TLS and a shared secret
// between the processes, the REST API over HTTPS (the operator verifies
// its certificate against the Secret's CA) with a token. Its autoscaler
// is reported in the status, and a SluiceSavepoint is taken on demand,
// then disposed of with the resource.
func TestJobRunsExactlyOnce(t *testing.T) {
	cl := newCluster(t)
	cl.secrets()
	in, out := topics(t, "create")
	p := newProducer(t, in)
	p.write(200)
	job := cl.job("wc", in, out, 2, 2, sluicev1.UpgradeSavepoint)
	job.Spec.Security.TLSSecretName = cl.tlsSecret("wc")
	job.Spec.Configuration = map[string]string{"job.autoscaler.enabled": "true"}
	if err := cl.c.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	j := cl.await("wc", "the job runs, its autoscaler reported", runTimeout, func(j *sluicev1.SluiceJob) bool {
		return running(j) && j.Status.Autoscaler != nil && j.Status.Autoscaler.Enabled && j.Status.Autoscaler.LastOutcome != ""
	})
	if sec := j.Status.Deployed.Security; sec.InternalSecret == nil || sec.InternalSecret.Name != "sluice" || sec.TLSSecretName == "" {
		t.Errorf("status.deployed has no security: %+v", j.Status.Deployed.Security)
	}
	if c := condition(j, ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("condition Ready: %+v", c)
	}
	// Each process was given the certificate, and the coordinator serves
	// its API with it.
	cl.k.mu.Lock()
	for _, pd := range cl.k.pods {
		env := map[string]bool{}
		for _, e := range pd.spec.Containers[0].Env {
			env[e.Name] = true
		}
		if !env["SLUICE_TLS_CERT"] || !env["SLUICE_INTERNAL_SECRET"] ||
			pd.component == ComponentCoordinator && !env["SLUICE_CONF_SECURITY_SSL_REST_CERT_FILE"] {
			t.Errorf("pod %s: no TLS or secret in its variables %v", pd.name, env)
		}
	}
	cl.k.mu.Unlock()

	path := cl.savepointResource("wc", "sp1")
	p.write(100)
	exactlyOnce(t, out, p.expected(), runTimeout)
	cl.noOverlap()
	// Deleting the resource disposes of its savepoint's files.
	if err := cl.c.Delete(t.Context(), &sluicev1.SluiceSavepoint{ObjectMeta: metav1.ObjectMeta{Name: "sp1", Namespace: cl.ns}}); err != nil {
		t.Fatal(err)
	}
	awaitCond(t, "the SluiceSavepoint deleted and its files disposed of", runTimeout, func() bool {
		var sp sluicev1.SluiceSavepoint
		err := cl.c.Get(t.Context(), client.ObjectKey{Namespace: cl.ns, Name: "sp1"}, &sp)
		_, serr := os.Stat(path)
		return apierrors.IsNotFound(err) && os.IsNotExist(serr)
	})
}

// savepointResource creates a SluiceSavepoint of the job and waits until
// it completed; it returns its path, a directory holding the savepoint.
func (cl *cluster) savepointResource(job, name string) string {
	cl.t.Helper()
	sp := &sluicev1.SluiceSavepoint{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cl.ns},
		Spec: sluicev1.SluiceSavepointSpec{JobName: job}}
	if err := cl.c.Create(cl.t.Context(), sp); err != nil {
		cl.t.Fatal(err)
	}
	awaitCond(cl.t, "the SluiceSavepoint completes", runTimeout, func() bool {
		if err := cl.c.Get(cl.t.Context(), client.ObjectKeyFromObject(sp), sp); err != nil {
			cl.t.Fatal(err)
		}
		if sp.Status.State == sluicev1.SavepointFailed {
			cl.t.Fatalf("SluiceSavepoint %s failed: %s", name, sp.Status.Error)
		}
		return sp.Status.State == sluicev1.SavepointCompleted
	})
	if !slices.Contains(sp.Finalizers, FinalizerDispose) {
		cl.t.Errorf("SluiceSavepoint %s has no finalizer %s: %v", name, FinalizerDispose, sp.Finalizers)
	}
	if _, err := os.Stat(filepath.Join(sp.Status.Path, "_metadata")); err != nil {
		cl.t.Fatalf("SluiceSavepoint %s completed at %q, which holds no savepoint: %v", name, sp.Status.Path, err)
	}
	return sp.Status.Path
}

// awaitCond polls cond until it holds.
func awaitCond(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tlsSecret creates a kubernetes.io/tls Secret as cert-manager writes
// one: a CA, and a certificate it signed for the job's coordinator
// Service name (the operator verifies the REST API's for it) that every
// process presents to the others.
func (cl *cluster) tlsSecret(job string) string {
	cl.t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		cl.t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		cl.t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		cl.t.Fatal(err)
	}
	svc := job + "-coordinator." + cl.ns + ".svc"
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: svc}, DNSNames: []string{svc},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		cl.t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		cl.t.Fatal(err)
	}
	name := job + "-tls"
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cl.ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
			"ca.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		}}
	if err := cl.c.Create(cl.t.Context(), s); err != nil {
		cl.t.Fatal(err)
	}
	return name
}

// Under HA, two coordinators (a standby), the leader SIGKILLed mid-run:
// the standby takes the job over from its latest checkpoint, and the
// operator follows it (status.job.coordinator), its calls going to the
// new leader's API, not to the standby that the killed one restarts as:
// a SluiceSavepoint after the failover completes; the output stays
// exactly once.
func TestHALeaderKilled(t *testing.T) {
	cl := newCluster(t)
	cl.coordinators = 2
	cl.secrets()
	in, out := topics(t, "ha")
	p := newProducer(t, in)
	p.write(60)
	job := cl.job("wc", in, out, 2, 2, sluicev1.UpgradeSavepoint)
	job.Spec.Security.TLSSecretName = cl.tlsSecret("wc")
	job.Spec.HA = &sluicev1.HASpec{EtcdEndpoints: []string{testEnv.ControlPlane.Etcd.URL.String()}, Standbys: 1}
	// A short lease: the standby is elected 3 s after the leader died.
	job.Spec.Configuration = map[string]string{"high-availability.etcd.lease-duration": "3s"}
	cl.start(job, p, out)
	p.flow()
	j := cl.await("wc", "the operator finds the leader", runTimeout, func(j *sluicev1.SluiceJob) bool {
		return running(j) && j.Status.Job.Coordinator != ""
	})
	leader := j.Status.Job.Coordinator
	standby := ""
	for _, pd := range cl.k.owned(cl.ns, "Deployment/wc-coordinator") {
		if pd.name != leader {
			standby = pd.name
		}
	}
	if standby == "" {
		t.Fatalf("no standby coordinator beside the leader %s", leader)
	}
	cl.k.kill(leader)
	cl.await("wc", "the standby leads, the operator follows", runTimeout, func(j *sluicev1.SluiceJob) bool {
		return running(j) && j.Status.Job.Coordinator == standby
	})
	cl.savepointResource("wc", "after-failover")
	p.halt()
	p.write(30)
	exactlyOnce(t, out, p.expected(), runTimeout)
	cl.noOverlap()
}

func condition(j *sluicev1.SluiceJob, typ string) *metav1.Condition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == typ {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// start creates the job and waits until it runs and has written output.
func (cl *cluster) start(j *sluicev1.SluiceJob, p *producer, out string) {
	cl.t.Helper()
	if err := cl.c.Create(cl.t.Context(), j); err != nil {
		cl.t.Fatal(err)
	}
	cl.await(j.Name, "the job runs", runTimeout, running)
	output(cl.t, out, p.expected(), runTimeout)
}

func (cl *cluster) events(reason string) int {
	var evs eventsv1.EventList
	if err := cl.c.List(cl.t.Context(), &evs, client.InNamespace(cl.ns)); err != nil {
		cl.t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

func upgradeSavepoints(j *sluicev1.SluiceJob) []string {
	var out []string
	for _, s := range j.Status.Savepoints.History {
		if s.Trigger == TriggerUpgrade {
			out = append(out, s.Location)
		}
	}
	return out
}

// An upgrade in each mode with input flowing: the old version gone before
// the new one starts, the output exactly once (savepoint, last-state), or
// counted again from no state (stateless).
func TestUpgradeSavepoint(t *testing.T) { testUpgrade(t, sluicev1.UpgradeSavepoint) }
func TestUpgradeLastState(t *testing.T) { testUpgrade(t, sluicev1.UpgradeLastState) }
func TestUpgradeStateless(t *testing.T) { testUpgrade(t, sluicev1.UpgradeStateless) }

func testUpgrade(t *testing.T, mode sluicev1.UpgradeMode) {
	cl := newCluster(t)
	cl.secrets()
	in, out := topics(t, string(mode))
	p := newProducer(t, in)
	p.write(60)
	// Two workers: a StatefulSet replaces them one at a time, so a version
	// not drained first would run beside the old one.
	cl.start(cl.job("wc", in, out, 4, 2, mode), p, out)
	p.flow()
	cl.update("wc", func(s *sluicev1.SluiceJobSpec) { s.Image = "wordcountd:v2" })
	j := cl.await("wc", "the upgrade", runTimeout, upgraded(OutcomeSucceeded))
	p.halt()
	p.write(30)
	if j.Status.Deployed.Image != "wordcountd:v2" || j.Status.LastStable.Image != "wordcountd:v2" {
		t.Errorf("deployed %s, last stable %s, want wordcountd:v2", j.Status.Deployed.Image, j.Status.LastStable.Image)
	}
	switch mode {
	case sluicev1.UpgradeSavepoint:
		if sps := upgradeSavepoints(j); len(sps) != 1 || j.Status.RestorePath != sps[0] {
			t.Errorf("restored from %q, the upgrade's savepoints %v: want the one savepoint", j.Status.RestorePath, sps)
		}
	case sluicev1.UpgradeStateless:
		if j.Status.Epoch != 1 {
			t.Errorf("epoch %d, want 1: a stateless upgrade starts a checkpoint directory of its own", j.Status.Epoch)
		}
	}
	if mode == sluicev1.UpgradeStateless {
		restartedOnce(t, out, p.expected(), runTimeout)
	} else {
		exactlyOnce(t, out, p.expected(), runTimeout)
	}
	cl.noOverlap()
	if cl.events("UpgradeSucceeded") != 1 {
		t.Errorf("%d UpgradeSucceeded events, want 1", cl.events("UpgradeSucceeded"))
	}
}

// A new version that never runs (its processes exit at once) is rolled
// back to the last good spec from the upgrade's savepoint, and the status
// and an event say so; the output stays exactly once.
func TestFailedUpgradeRolledBack(t *testing.T) {
	cl := newCluster(t)
	cl.secrets()
	in, out := topics(t, "rollback")
	p := newProducer(t, in)
	p.write(60)
	j := cl.job("wc", in, out, 2, 2, sluicev1.UpgradeSavepoint)
	j.Spec.Upgrade.Timeout = &metav1.Duration{Duration: 30 * time.Second}
	cl.start(j, p, out)
	p.flow()
	cl.update("wc", func(s *sluicev1.SluiceJobSpec) {
		s.Image = "wordcountd:v2"
		s.Args = append(s.Args, "--no-such-flag")
	})
	j = cl.await("wc", "the rollback", runTimeout, upgraded(OutcomeRolledBack))
	p.halt()
	p.write(30)
	if j.Status.Deployed.Image != "wordcountd:v1" || slices.Contains(j.Status.Deployed.Args, "--no-such-flag") {
		t.Errorf("deployed %s %v after the rollback, want wordcountd:v1 without --no-such-flag", j.Status.Deployed.Image, j.Status.Deployed.Args)
	}
	if c := condition(j, ConditionUpgradeFailed); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "RUNNING") {
		t.Errorf("condition UpgradeFailed: %+v", c)
	}
	if sps := upgradeSavepoints(j); len(sps) != 1 || j.Status.RestorePath != sps[0] {
		t.Errorf("rolled back from %q, the upgrade's savepoints %v: want its one savepoint", j.Status.RestorePath, sps)
	}
	exactlyOnce(t, out, p.expected(), runTimeout)
	cl.noOverlap()
	if cl.events("UpgradeRolledBack") != 1 {
		t.Errorf("%d UpgradeRolledBack events, want 1", cl.events("UpgradeRolledBack"))
	}
	// The spec that failed is not tried again until it changes.
	if j = cl.get("wc"); j.Status.Deployed.Image != "wordcountd:v1" || j.Status.Upgrade.Outcome != OutcomeRolledBack {
		t.Errorf("after the rollback: %s", statusString(j))
	}
}

// A rescale 2 -> 4 -> 3 with input flowing, on the slots the two workers
// have: the operator asks the job to rescale in place (PUT
// /jobs/:id/resource-requirements), which takes no savepoint and starts
// no process; the savepoint fallback of a job without the call is tested
// against a fake job server (upgrade_test.go, jobapi).
func TestRescale(t *testing.T) {
	cl := newCluster(t)
	cl.secrets()
	in, out := topics(t, "rescale")
	p := newProducer(t, in)
	p.write(60)
	cl.start(cl.job("wc", in, out, 2, 2, sluicev1.UpgradeSavepoint), p, out)
	p.flow()
	for _, par := range []int32{4, 3} {
		cl.update("wc", func(s *sluicev1.SluiceJobSpec) { s.Parallelism = par })
		j := cl.await("wc", fmt.Sprintf("the rescale to %d", par), runTimeout, func(j *sluicev1.SluiceJob) bool {
			return upgraded(OutcomeSucceeded)(j) && j.Status.Job.Parallelism == par && j.Status.Deployed.Parallelism == par
		})
		if n := len(upgradeSavepoints(j)); n != 0 {
			t.Errorf("after the rescale to %d: %d savepoints, want none (in place)", par, n)
		}
		var sts appsv1.StatefulSet
		if err := cl.c.Get(t.Context(), client.ObjectKey{Namespace: cl.ns, Name: "wc-worker"}, &sts); err != nil {
			t.Fatal(err)
		}
		if *sts.Spec.Replicas != 2 {
			t.Errorf("parallelism %d on 2 slots a worker: %d workers, want 2", par, *sts.Spec.Replicas)
		}
	}
	p.halt()
	p.write(30)
	exactlyOnce(t, out, p.expected(), runTimeout)
	cl.noOverlap()
}

// The operator stops mid-upgrade, after the savepoint and before the new
// version runs; a new operator goes on from the step its status records:
// no second savepoint, the new version from the first, exactly once.
func TestOperatorRestartedMidUpgrade(t *testing.T) {
	cl := newCluster(t)
	cl.secrets()
	in, out := topics(t, "restart")
	p := newProducer(t, in)
	p.write(60)
	cl.start(cl.job("wc", in, out, 2, 2, sluicev1.UpgradeSavepoint), p, out)
	p.flow()
	// With the kubelet paused the old processes cannot go: the upgrade
	// waits in Draining, its savepoint taken.
	cl.k.paused.Store(true)
	cl.update("wc", func(s *sluicev1.SluiceJobSpec) { s.Image = "wordcountd:v2" })
	j := cl.await("wc", "the upgrade draining", runTimeout, func(j *sluicev1.SluiceJob) bool {
		return j.Status.Upgrade != nil && j.Status.Upgrade.Step == sluicev1.StepDraining
	})
	saved := j.Status.Upgrade.RestorePath
	cl.stopOperator()
	cl.k.paused.Store(false)
	cl.startOperator()
	j = cl.await("wc", "the upgrade after the operator's restart", runTimeout, upgraded(OutcomeSucceeded))
	p.halt()
	p.write(30)
	if sps := upgradeSavepoints(j); len(sps) != 1 || sps[0] != saved || j.Status.RestorePath != saved {
		t.Errorf("restored from %q, savepoints %v: want the one taken before the restart, %q", j.Status.RestorePath, sps, saved)
	}
	exactlyOnce(t, out, p.expected(), runTimeout)
	cl.noOverlap()
}
