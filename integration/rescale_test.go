package integration

// Rescale in place on a real broker: the chaos job's keyed count, read
// from and written to Kafka exactly once, rescaled through its REST API
// (PUT /jobs/:jobid/resource-requirements) while input flows, in one
// process and on a cluster of processes. Each rescale stops the job at a
// checkpoint of its own and runs on from it at the new parallelism: the
// Kafka splits and the sink's transactions follow as operator state, the
// counts as key groups. The committed output is that of one run without
// a rescale.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/api"
)

var apiListening = regexp.MustCompile(`msg="api listening".* address=(\S+)`)

// apiOf is the REST client of a run started with -rest, once it listens.
func apiOf(ctx context.Context, t *testing.T, r *chaosRun) (*api.Client, string) {
	t.Helper()
	m := r.awaitMatch(ctx, t, &r.stderr, apiListening)
	if m == nil {
		t.Fatalf("the run ended (%v) before its API listened\nstderr (last lines):\n%s", r.cmd.ProcessState, tail(r.stderr.String(), 30))
	}
	c := api.NewClient(m[1], "")
	jobs, err := c.Jobs(ctx)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("GET /jobs/overview: %v %+v", err, jobs)
	}
	return c, jobs[0].JID
}

// rescaleTo asks the job for parallelism p on every vertex and waits until
// it runs at it; it returns how long that took.
func rescaleTo(ctx context.Context, t *testing.T, c *api.Client, jid string, p int) time.Duration {
	t.Helper()
	job, err := c.Job(ctx, jid)
	if err != nil {
		t.Fatal(err)
	}
	req := api.JobResourceRequirements{}
	want := map[string]int{}
	for _, v := range job.Vertices {
		q := min(p, v.MaxParallelism)
		req[v.ID] = api.JobVertexResourceRequirements{Parallelism: api.ParallelismBounds{LowerBound: q, UpperBound: q}}
		want[v.ID] = q
	}
	start := time.Now()
	if err := c.SetResourceRequirements(ctx, jid, req); err != nil {
		t.Fatalf("rescale to %d: %v", p, err)
	}
	for {
		job, err = c.Job(ctx, jid)
		if err != nil {
			t.Fatal(err)
		}
		if job.State == "RUNNING" && !slices.ContainsFunc(job.Vertices, func(v api.JobVertexInfo) bool { return v.Parallelism != want[v.ID] }) {
			break
		}
		if job.State != "RUNNING" && job.State != "RESTARTING" {
			t.Fatalf("rescale to %d: the job is %s", p, job.State)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rescale to %d: the job runs at %+v: %v", p, job.Vertices, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	got, err := c.ResourceRequirements(ctx, jid)
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range got {
		if r.Parallelism.LowerBound != want[id] || r.Parallelism.UpperBound != want[id] {
			t.Fatalf("GET resource-requirements after the rescale to %d: vertex %s %+v", p, id, r.Parallelism)
		}
	}
	return time.Since(start)
}

// rescaleWhileFlowing rescales the job of run through steps, each once a
// checkpoint completed since the last (so records flowed at every
// parallelism), and fails the test if the job finished reading before
// the last one.
func rescaleWhileFlowing(ctx context.Context, t *testing.T, coord *chaosRun, steps []int) []string {
	t.Helper()
	c, jid := apiOf(ctx, t, coord)
	var took []string
	for _, p := range steps {
		if !coord.awaitNextCompleted(ctx, t, coord.completed()) {
			t.Fatalf("the job ended before the rescale to %d: %q", p, lastLine(coord.stdout.String()))
		}
		d := rescaleTo(ctx, t, c, jid, p)
		took = append(took, fmt.Sprintf("%d in %v", p, d.Round(time.Millisecond)))
		if coord.said("final checkpoint ") {
			t.Fatalf("the job read all its input before the rescale to %d ended; make the input larger or slower", p)
		}
	}
	if n := strings.Count(coord.stderr.String(), `msg="rescaling the job in place`); n != len(steps) {
		t.Errorf("the job logged %d rescales, want %d", n, len(steps))
	}
	return took
}

// One process, 1 -> 4 -> 2.
func TestRescaleInPlaceOneProcess(t *testing.T) {
	const keys, perKey = 16, 150
	ctx := jobContext(t, 90*time.Second)
	adm := kadm.NewClient(newClient(t))
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 300)
	job.backend = "rocksdb"
	run := job.start(t, "-parallelism", "1", "-rest", "127.0.0.1:0")
	took := rescaleWhileFlowing(ctx, t, run, []int{4, 2})
	if code := run.wait(ctx, t); code != 0 {
		t.Fatalf("the job exited %d, want 0\nstderr (last lines):\n%s", code, tail(run.stderr.String(), 30))
	}
	if strings.Contains(run.stderr.String(), "job failed; restarting") {
		t.Errorf("the job restarted: a rescale is no failure")
	}
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("rescaled to %s; %d checkpoints, %d committed records", strings.Join(took, ", "), run.completed(), n)
}

// A coordinator and three workers of two slots, 2 -> 6 -> 3 -> 4.
func TestRescaleInPlaceCluster(t *testing.T) {
	const keys, perKey = 16, 200
	ctx := jobContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t))
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 100)
	job.backend = "rocksdb"
	c := startChaosCluster(ctx, t, job, "-parallelism", "2", "-restarts", "5", "-rest", "127.0.0.1:0")
	for i := range 3 {
		c.startWorker(t, fmt.Sprintf("w%d", i+1))
	}
	took := rescaleWhileFlowing(ctx, t, c.coord, []int{6, 3, 4})
	c.finish(ctx, t)
	if r := c.restarts(); r != 0 {
		t.Errorf("the job restarted %d times: a rescale is no failure", r)
	}
	if d := c.lastDeployment(); !strings.Contains(d, " slots=4 ") {
		t.Errorf("the last attempt was not deployed on 4 slots: %s", d)
	}
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("rescaled to %s; %d checkpoints, %d committed records", strings.Join(took, ", "), c.coord.completed(), n)
}

// The reactive mode (-D scheduler-mode=reactive): the job's parallelism
// follows the slots of the workers there are. It starts at 2 on one
// worker of two slots; a second worker joins and the job scales up to 4
// once the slots were stable for the stabilization timeout, a third and
// it scales up to 6 (the Kafka source to its topic's 4 partitions only:
// a fifth reader would read nothing); the second is killed with SIGKILL
// and the restart that follows scales the job down to the 4 slots left.
// The output is exact.
func TestReactiveModeCluster(t *testing.T) {
	const keys, perKey = 16, 200
	ctx := jobContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t))
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 100)
	job.backend = "rocksdb"
	c := startChaosCluster(ctx, t, job, "-parallelism", "2", "-restarts", "5", "-rest", "127.0.0.1:0",
		"-D", "scheduler-mode=reactive",
		"-D", "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout=300ms",
		"-D", "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling=300ms")
	c.startWorker(t, "w1")
	deployedAt := func(slots int) {
		t.Helper()
		if !c.awaitCoordinator(ctx, t, fmt.Sprintf("a deployment on %d slots", slots), func(s string) bool {
			return strings.Contains(c.lastDeployment(), fmt.Sprintf(" slots=%d ", slots))
		}) {
			t.Fatalf("the coordinator ended (%v, %q) before it deployed the job on %d slots", c.coord.cmd.ProcessState,
				lastLine(c.coord.stdout.String()), slots)
		}
		if !c.coord.awaitNextCompleted(ctx, t, c.coord.completed()) {
			t.Fatalf("the job ended after its deployment on %d slots: %q", slots, lastLine(c.coord.stdout.String()))
		}
		if c.coord.said("final checkpoint ") {
			t.Fatalf("the job read all its input by its deployment on %d slots; make the input larger or slower", slots)
		}
	}
	deployedAt(2)
	c.startWorker(t, "w2")
	deployedAt(4)
	c.startWorker(t, "w3")
	deployedAt(6)
	api, jid := apiOf(ctx, t, c.coord)
	info, err := api.Job(ctx, jid)
	if err != nil {
		t.Fatal(err)
	}
	var par []string
	for _, v := range info.Vertices {
		par = append(par, fmt.Sprintf("%s=%d", v.Name, v.Parallelism))
	}
	if want := []string{"kafka-in -> pace=4", "count -> kafka-out=6"}; !slices.Equal(par, want) {
		t.Errorf("on 6 slots the job runs at %v, want %v (the source bounded by its 4 partitions)", par, want)
	}
	before := c.restarts()
	c.killWorker(t, "w2")
	if !c.awaitCoordinator(ctx, t, "the restart after the loss of w2", func(s string) bool {
		return strings.Count(s, "job failed; restarting") > before
	}) {
		t.Fatalf("the coordinator ended (%v, %q) without restarting the job after w2 was killed", c.coord.cmd.ProcessState, lastLine(c.coord.stdout.String()))
	}
	deployedAt(4)
	c.finish(ctx, t)
	if n := strings.Count(c.coord.stderr.String(), `msg="rescaling the job in place`); n != 2 {
		t.Errorf("the job rescaled in place %d times, want 2 (two workers joined)", n)
	}
	if !strings.Contains(c.coord.stderr.String(), `msg="the restart rescales the job to the slots there are"`) {
		t.Errorf("the restart after the loss of w2 did not say it scaled the job down")
	}
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("%d restarts, %d checkpoints, %d committed records", c.restarts(), c.coord.completed(), n)
}

// Every DataStream operator rescaled in place, 2 -> 3 -> 1, in one
// process: the operators job (keyed co-process with map state and
// timers, interval and window joins, keyed and non-keyed broadcast state,
// unordered async I/O with calls in flight, a rich map) is rescaled once
// its async operator held calls in flight at a checkpoint (the stop
// checkpoints' are logged). Each operator's committed output equals a
// plain evaluation of the input, each result once.
func TestRescaleOperatorsInPlace(t *testing.T) {
	const n, keys, versions = 1500, 12, 30
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 28))
	ctx := jobContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t))
	in, out := uniqueName(t, "sluice-it-ops-in"), uniqueName(t, "sluice-it-ops-out")
	createTopicNamed(ctx, t, adm, in+"-left", opsPartitions)
	createTopicNamed(ctx, t, adm, in+"-right", opsPartitions)
	createTopicNamed(ctx, t, adm, in+"-rules", 2)
	for _, op := range opsTopics {
		createTopicNamed(ctx, t, adm, out+"-"+op, 2)
	}
	input := newOpsInput(rng, n, keys, versions, time.Now().Add(-10*time.Minute).UnixMilli())
	input.produce(ctx, t, in)
	want := input.want()
	job := newChaosJob(t, in, out, "aligned", 250)
	job.extra = []string{"-job", "operators", "-rule-rate", "5", "-async-capacity", "4", "-parallelism", "2", "-rest", "127.0.0.1:0"}
	run := job.start(t)
	if !run.awaitCheckpointWithAsyncInFlight(ctx, t) {
		job.logRuns(t)
		t.Fatal("the run ended before a checkpoint with async calls in flight: the input is too short")
	}
	took := rescaleWhileFlowing(ctx, t, run, []int{3, 1})
	if code := run.wait(ctx, t); code != 0 {
		job.logRuns(t)
		t.Fatalf("the job exited %d\nstderr:\n%s", code, tail(run.stderr.String(), 40))
	}
	for _, op := range opsTopics {
		var got []string
		for _, r := range readCommitted(ctx, t, out+"-"+op) {
			got = append(got, r.Key+"|"+r.Value)
		}
		slices.Sort(got)
		if missing, extra := sortedDiff(want[op], got); len(missing)+len(extra) > 0 {
			t.Errorf("operator %s: %d committed results, want %d; missing %d %v, duplicate or unexpected %d %v",
				op, len(got), len(want[op]), len(missing), head(missing, 5), len(extra), head(extra, 5))
		}
	}
	if t.Failed() {
		job.logRuns(t)
	}
	t.Logf("rescaled to %s; async calls in flight in the checkpoints restored: %v", strings.Join(took, ", "), job.restoredAsyncInFlight(0))
}
