package integration

// The failover downtime benchmarks (issue 28's figures; measured, not
// asserted, and skipped unless SLUICE_BENCH_FAILOVER is set):
//
//	SLUICE_BENCH_FAILOVER=10 scripts/with-kafka go test -count=1 -v \
//	    -run 'TestBenchWorkerKillDowntime|TestBenchLeaderKillDowntime' ./integration
//
// The variable's value is the number of faults per case (default 10);
// SLUICE_BENCH_RESTART_DELAY sets the fixed restart delay (default
// 500ms, the chaos job's) and SLUICE_BENCH_CASES picks cases by name
// (comma separated: rocksdb-download, rocksdb-local, heap);
// SLUICE_BENCH_PAD_STATE adds that many random bytes of keyed state per
// key (16 keys), SLUICE_BENCH_S3=1 puts the checkpoints on the S3
// server of scripts/with-s3 (scripts/with-s3 scripts/with-kafka go test
// ...), where a download costs what it does in production, and
// SLUICE_BENCH_LOG_LEVEL=DEBUG sets every process's log level (with
// SLUICE_BENCH_LOGS, to trace one restart).
//
// Worker kills: a coordinator and three workers of two slots run the
// keyed count at parallelism 6; a worker that runs tasks is killed with
// SIGKILL and started again with its id (and its working directory), for
// RocksDB downloading its state, RocksDB with local recovery (every
// subtask's directory kept across attempts; the tasks of the two
// survivors restore from their local copies, the restarted worker's from
// the copies its killed process left, each verified) and the heap.
//
// Leader kills: two coordinators campaign in etcd (a 2 s lease), two
// workers of two slots run the keyed count at parallelism 4 with RocksDB
// and local recovery; the leader is killed with SIGKILL and started again
// as the standby, so that the next kill finds one.
//
// Per fault: the time from the kill to the first record a counting
// subtask processed after it (the chaos job prints each subtask's first
// record of an attempt), and to the next checkpoint completed after it,
// median and max; and where the time went, from the processes' log
// timestamps (the first line of each phase after the kill).

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testutil"
)

// benchFaults is the number of faults per case, or skips the test.
func benchFaults(t *testing.T) int {
	t.Helper()
	v := os.Getenv("SLUICE_BENCH_FAILOVER")
	if v == "" {
		t.Skip("a benchmark: set SLUICE_BENCH_FAILOVER (the number of faults)")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		n = 10
	}
	return n
}

// saveRuns writes every process's output to SLUICE_BENCH_LOGS/<test>/,
// when set, to read where a failover's time went.
func saveRuns(t *testing.T, job *chaosJob) {
	dir := os.Getenv("SLUICE_BENCH_LOGS")
	if dir == "" {
		return
	}
	dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "-"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Error(err)
		return
	}
	for i, r := range job.runs {
		for name, b := range map[string]*syncBuffer{"stdout": &r.stdout, "stderr": &r.stderr} {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("run%d.%s", i, name)), []byte(b.String()), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
}

// benchJob applies SLUICE_BENCH_PAD_STATE and SLUICE_BENCH_S3 to job.
func benchJob(t *testing.T, job *chaosJob) string {
	t.Helper()
	what := "checkpoints on the local disk"
	if os.Getenv("SLUICE_BENCH_S3") != "" {
		job.checkpoints = testutil.S3Location(t)
		what = "checkpoints on S3"
	}
	if pad := os.Getenv("SLUICE_BENCH_PAD_STATE"); pad != "" {
		job.extra = append(job.extra, "-pad-state", pad)
		what += ", " + pad + " bytes of state per key"
	}
	if level := os.Getenv("SLUICE_BENCH_LOG_LEVEL"); level != "" {
		job.extra = append(job.extra, "-log-level", level)
	}
	return what
}

func benchRestartDelay() string {
	return cmp.Or(os.Getenv("SLUICE_BENCH_RESTART_DELAY"), "500ms")
}

func benchCase(name string) bool {
	v := os.Getenv("SLUICE_BENCH_CASES")
	return v == "" || slices.Contains(strings.Split(v, ","), name)
}

func TestBenchWorkerKillDowntime(t *testing.T) {
	kills := benchFaults(t)
	for _, name := range []string{"rocksdb-download", "rocksdb-local", "heap"} {
		if !benchCase(name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			const keys = 16
			perKey := 60 * kills
			ctx := jobContext(t, time.Duration(kills)*20*time.Second+time.Minute)
			adm := kadm.NewClient(newClient(t))
			job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 100)
			job.backend = strings.TrimSuffix(strings.TrimSuffix(name, "-download"), "-local")
			setup := benchJob(t, job)
			local := name == "rocksdb-local"
			args := []string{"-parallelism", "6", "-restarts", strconv.Itoa(kills + 5), "-rest", "127.0.0.1:0",
				"-restart-delay", benchRestartDelay(), "-report-first-record"}
			if local {
				args = append(args, "-local-recovery")
			}
			c := startChaosCluster(ctx, t, job, args...)
			ids := []string{"w1", "w2", "w3"}
			start := func(id string) {
				if local {
					c.startWorker(t, id, "-state-dir", filepath.Join(job.stateDir, id))
				} else {
					c.startWorker(t, id)
				}
			}
			for _, id := range ids {
				start(id)
			}
			client, jid := apiOf(ctx, t, c.coord)
			var first, running, checkpointed []time.Duration
			var phases []map[string]time.Duration
			for i := range kills {
				if !c.coord.awaitNextCompleted(ctx, t, c.coord.completed()) || c.coord.said("final checkpoint ") {
					t.Fatalf("the job is ending after %d kills; make the input larger", i)
				}
				id := ids[i%len(ids)]
				before := len(failovers(ctx, t, client, jid))
				killed := time.Now()
				c.killWorker(t, id)
				start(id)
				var d api.FailoverDowntimeInfo
				for {
					f := failovers(ctx, t, client, jid)
					if len(f) > before && f[len(f)-1].CheckpointAfter >= 0 {
						d = f[len(f)-1]
						break
					}
					select {
					case <-ctx.Done():
						t.Fatalf("kill %d: no outage that ended: %v", i, ctx.Err())
					case <-time.After(20 * time.Millisecond):
					}
				}
				at := time.UnixMilli(d.Timestamp)
				running = append(running, at.Add(time.Duration(d.RunningAfter)*time.Millisecond).Sub(killed))
				checkpointed = append(checkpointed, at.Add(time.Duration(d.CheckpointAfter)*time.Millisecond).Sub(killed))
				first = append(first, firstRecordAfter(ctx, t, job, killed))
				phases = append(phases, failoverPhases(job, killed))
				t.Logf("kill %d of %s: detected after %v, running after %v, first record after %v, checkpoint after %v; phases %s", i+1, id,
					at.Sub(killed).Round(time.Millisecond), running[i].Round(time.Millisecond), first[i].Round(time.Millisecond),
					checkpointed[i].Round(time.Millisecond), formatPhases(phases[i]))
			}
			t.Logf("%s, %s, %d worker kills, restart delay %s: kill to running median %v max %v; kill to first record median %v max %v; kill to completed checkpoint median %v max %v",
				name, setup, kills, benchRestartDelay(), median(running), slices.Max(running).Round(time.Millisecond),
				median(first), slices.Max(first).Round(time.Millisecond),
				median(checkpointed), slices.Max(checkpointed).Round(time.Millisecond))
			t.Logf("%s: median phases after the kill: %s", name, formatPhases(medianPhases(phases)))
			saveRuns(t, job)
			c.finish(ctx, t)
			checkJobOutput(ctx, t, job, keys, perKey)
		})
	}
}

// TestBenchLeaderKillDowntime: see the file's comment.
func TestBenchLeaderKillDowntime(t *testing.T) {
	kills := benchFaults(t)
	const keys = 16
	perKey := 80 * kills
	ctx := jobContext(t, time.Duration(kills)*25*time.Second+time.Minute)
	adm := kadm.NewClient(newClient(t))
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 100)
	job.backend = "rocksdb"
	setup := benchJob(t, job)
	c := startHACluster(t, job, "-parallelism", "4", "-local-recovery", "-report-first-record",
		"-restarts", strconv.Itoa(kills+5), "-restart-delay", benchRestartDelay())
	names := []string{"coordinator A", "coordinator B"}
	leader := c.startCoordinator(ctx, t, names[0])
	epoch := c.awaitLeader(ctx, t, leader)
	standby := c.startCoordinator(ctx, t, names[1])
	var workers []*haProc
	for _, id := range []string{"w1", "w2"} {
		w := c.startWorker(t, id)
		workers = append(workers, w)
	}
	var first, checkpointed []time.Duration
	var phases []map[string]time.Duration
	for i := range kills {
		if !leader.run.awaitNextCompleted(ctx, t, leader.run.completed()) || leader.run.said("final checkpoint ") {
			t.Fatalf("the job is ending after %d kills; make the input larger", i)
		}
		killed := time.Now()
		if !leader.run.kill(t) {
			t.Fatalf("%s ended by itself before its SIGKILL", leader.name)
		}
		epoch = c.awaitTakeover(ctx, t, standby, epoch)
		if !standby.run.awaitNextCompleted(ctx, t, 0) {
			t.Fatalf("%s ended before it completed a checkpoint", standby.name)
		}
		checkpointed = append(checkpointed, time.Since(killed))
		first = append(first, firstRecordAfter(ctx, t, job, killed))
		phases = append(phases, failoverPhases(job, killed))
		t.Logf("kill %d of the leader: first record after %v, checkpoint after %v (seen); phases %s", i+1,
			first[i].Round(time.Millisecond), checkpointed[i].Round(time.Millisecond), formatPhases(phases[i]))
		// The killed leader comes back as the standby.
		leader, standby = standby, c.startCoordinator(ctx, t, leader.name)
	}
	t.Logf("%d leader kills (lease 2 s), RocksDB with local recovery, %s, restart delay %s: kill to first record median %v max %v; kill to completed checkpoint median %v max %v",
		kills, setup, benchRestartDelay(), median(first), slices.Max(first).Round(time.Millisecond),
		median(checkpointed), slices.Max(checkpointed).Round(time.Millisecond))
	t.Logf("median phases after the kill: %s", formatPhases(medianPhases(phases)))
	saveRuns(t, job)
	c.finish(ctx, t, leader, workers)
	checkJobOutput(ctx, t, job, keys, perKey)
}

var firstRecordLine = regexp.MustCompile(`(?m)^first record processed subtask=\d+ attempt=\d+ opened=(\d+) arrived=(\d+) at=(\d+)$`)

// firstRecords returns, from every process of the job, when the counting
// subtasks opened after killed processed their first records: when each
// reached the operator and when it was counted. A subtask opened before
// the kill (the failed attempt, whose first record may come late) is left
// out.
func firstRecords(job *chaosJob, killed time.Time) (arrived, counted []time.Time) {
	unix := func(s string) time.Time {
		n, _ := strconv.ParseInt(s, 10, 64)
		return time.Unix(0, n)
	}
	for _, r := range job.runs {
		for _, m := range firstRecordLine.FindAllStringSubmatch(r.stdout.String(), -1) {
			if unix(m[1]).After(killed) {
				arrived, counted = append(arrived, unix(m[2])), append(counted, unix(m[3]))
			}
		}
	}
	return arrived, counted
}

// firstRecordAfter waits for a counting subtask of any process of the job
// to process a record in an attempt that started after the kill, and
// returns how long after the kill it did.
func firstRecordAfter(ctx context.Context, t *testing.T, job *chaosJob, killed time.Time) time.Duration {
	t.Helper()
	for {
		if _, counted := firstRecords(job, killed); len(counted) > 0 {
			return slices.MinFunc(counted, time.Time.Compare).Sub(killed)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no record processed after the kill at %v: %v", killed, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// phaseMarks are the log lines that start each phase of a failover, in
// the order they happen.
// A phase with after set counts only the lines after that phase began.
var phaseMarks = []struct{ name, text, after string }{
	{"lost", `msg="worker lost"`, ""},
	{"coordinator-lost", `msg="coordinator lost; cancelling the tasks"`, ""},
	{"leading", `msg="leading the job"`, ""},
	{"restarting", `msg="job failed; restarting"`, ""},
	{"deploying", `msg="deploying attempt"`, ""},
	{"deployed", `msg="tasks deployed"`, "deploying"},
	{"restored-local", `msg="rocksdb backend: local recovery"`, ""},
	{"restored-download", `msg="rocksdb backend: downloaded checkpoint"`, ""},
	// From the chaos job's stdout: the first record of an attempt begun
	// after the kill reached a counting subtask, and was counted and
	// handed to the Kafka sink.
	{"record-arrived", "", ""},
	{"record-counted", "", ""},
	{"checkpoint", `msg="checkpoint completed"`, "deploying"},
}

var logTime = regexp.MustCompile(`^time=(\S+) `)

// failoverPhases reads, from every process's log, when each phase first
// began after the kill (offsets from it).
func failoverPhases(job *chaosJob, killed time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	var lines []string
	for _, r := range job.runs {
		lines = append(lines, strings.Split(r.stderr.String(), "\n")...)
	}
	// Twice: a phase that counts after another needs that one first.
	for range 2 {
		for _, l := range lines {
			m := logTime.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			ts, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil || ts.Before(killed.Truncate(time.Millisecond)) {
				continue
			}
			for _, p := range phaseMarks {
				if after, ok := out[p.after]; p.after != "" && (!ok || ts.Sub(killed) < after) {
					continue
				}
				if p.text != "" && strings.Contains(l, p.text) {
					if d, ok := out[p.name]; !ok || ts.Sub(killed) < d {
						out[p.name] = ts.Sub(killed)
					}
				}
			}
		}
	}
	if arrived, counted := firstRecords(job, killed); len(arrived) > 0 {
		out["record-arrived"] = slices.MinFunc(arrived, time.Time.Compare).Sub(killed)
		out["record-counted"] = slices.MinFunc(counted, time.Time.Compare).Sub(killed)
	}
	return out
}

func formatPhases(p map[string]time.Duration) string {
	var parts []string
	for _, m := range phaseMarks {
		if d, ok := p[m.name]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", m.name, d.Round(time.Millisecond)))
		}
	}
	return strings.Join(parts, " ")
}

func medianPhases(all []map[string]time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, m := range phaseMarks {
		var ds []time.Duration
		for _, p := range all {
			if d, ok := p[m.name]; ok {
				ds = append(ds, d)
			}
		}
		if len(ds) > 0 {
			out[m.name] = median(ds)
		}
	}
	return out
}

func failovers(ctx context.Context, t *testing.T, c *api.Client, jid string) []api.FailoverDowntimeInfo {
	t.Helper()
	job, err := c.Job(ctx, jid)
	if err != nil {
		t.Fatal(err)
	}
	return job.Failovers
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}
