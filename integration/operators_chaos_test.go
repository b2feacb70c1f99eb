package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The operators job's parameters (integration/chaosjob/operators_job.go),
// evaluated here by plain loops over the input.
const (
	opsPeriod     = 1000 // ms: keyed co-process periods
	opsWindow     = 300  // ms: window join's tumbling windows
	opsJoinLower  = -50  // ms: interval join bounds
	opsJoinUpper  = 100
	opsPartitions = 4 // of each event topic
	// opsJitter bounds how far an event's timestamp lies past its slot
	// (10 ms per event): the disorder within a partition stays below the
	// job's 300 ms of out-of-orderness, so no record is late.
	opsJitter = 150
)

// opsTopics are the suffixes of the operators job's output topics.
var opsTopics = []string{"cop", "ij", "wj", "kbc", "bc", "async", "rich"}

// opsEvent is one input event, as the job reads it.
type opsEvent struct {
	ID      int    `json:"id"`
	Key     string `json:"key"`
	V       int    `json:"v"`
	Version int    `json:"ver"`
	TS      int64  `json:"-"` // the record's timestamp
}

// opsInput is the operators job's input.
type opsInput struct {
	left, right []opsEvent
	muls        []int // version -> the rule's multiplier
}

// newOpsInput makes n events per side over keys keys, out of order by up
// to opsJitter ms, and one rule per version; event i of a side has version
// i*versions/n, so the versions advance with the input.
func newOpsInput(rng *rand.Rand, n, keys, versions int, base int64) opsInput {
	var in opsInput
	side := func(firstID int, offset int64) []opsEvent {
		evs := make([]opsEvent, n)
		for i := range evs {
			evs[i] = opsEvent{
				ID: firstID + i, Key: fmt.Sprintf("k%02d", rng.IntN(keys)), V: rng.IntN(100),
				Version: i * versions / n, TS: base + int64(i)*10 + offset + rng.Int64N(opsJitter),
			}
		}
		return evs
	}
	in.left, in.right = side(0, 0), side(100000, 3)
	for range versions {
		in.muls = append(in.muls, 1+rng.IntN(9))
	}
	return in
}

// produce writes the input: event i of a side into partition i mod
// opsPartitions with its timestamp, the rules over two partitions.
func (in opsInput) produce(ctx context.Context, t *testing.T, prefix string) {
	t.Helper()
	p := newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for topic, evs := range map[string][]opsEvent{prefix + "-left": in.left, prefix + "-right": in.right} {
		for i, e := range evs {
			v, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % opsPartitions), Key: []byte(e.Key), Value: v, Timestamp: time.UnixMilli(e.TS)})
		}
	}
	for ver, mul := range in.muls {
		v := fmt.Sprintf(`{"ver":%d,"mul":%d}`, ver, mul)
		recs = append(recs, &kgo.Record{Topic: prefix + "-rules", Partition: int32(ver % 2), Value: []byte(v), Timestamp: time.UnixMilli(in.left[0].TS)})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce the operators job's input: %v", err)
	}
}

// want evaluates each operator on the input: the committed output of each
// topic as "key|value" lines, sorted.
func (in opsInput) want() map[string][]string {
	w := map[string][]string{}
	add := func(op, key, value string) { w[op] = append(w[op], key+"|"+value) }
	type kp struct {
		key    string
		period int64
	}
	type totals struct{ nl, nr, sl, sr int }
	per := map[kp]*totals{}
	for _, side := range [][]opsEvent{in.left, in.right} {
		for _, e := range side {
			k := kp{e.Key, e.TS - e.TS%opsPeriod}
			if per[k] == nil {
				per[k] = &totals{}
			}
			if e.ID < 100000 {
				per[k].nl, per[k].sl = per[k].nl+1, per[k].sl+e.V
			} else {
				per[k].nr, per[k].sr = per[k].nr+1, per[k].sr+e.V
			}
		}
	}
	for k, s := range per {
		add("cop", k.key, fmt.Sprintf("%d,%d,%d,%d,%d", k.period, s.nl, s.nr, s.sl, s.sr))
	}
	for _, l := range in.left {
		for _, r := range in.right {
			if l.Key != r.Key {
				continue
			}
			if r.TS >= l.TS+opsJoinLower && r.TS <= l.TS+opsJoinUpper {
				add("ij", l.Key, fmt.Sprintf("%d,%d", l.ID, r.ID))
			}
			if l.TS/opsWindow == r.TS/opsWindow {
				add("wj", l.Key, fmt.Sprintf("%d,%d,%d", l.ID, r.ID, l.TS/opsWindow*opsWindow))
			}
		}
		add("kbc", l.Key, fmt.Sprintf("%d,%d,%d", l.ID, l.Version, l.V*in.muls[l.Version]))
		h := fnv.New32a()
		fmt.Fprintf(h, "%s/%d", l.Key, l.ID)
		add("async", l.Key, fmt.Sprintf("%d,%d", l.ID, h.Sum32()))
	}
	for _, r := range in.right {
		add("bc", r.Key, fmt.Sprintf("%d,%d,%d", r.ID, r.Version, r.V*in.muls[r.Version]+r.Version))
		weight := 0
		for _, b := range []byte(r.Key) {
			weight += int(b)
		}
		add("rich", r.Key, fmt.Sprintf("%d,%d", r.ID, r.V*(weight%7+1)))
	}
	for _, lines := range w {
		slices.Sort(lines)
	}
	return w
}

// createTopicNamed creates topic with the given partitions and deletes it
// at cleanup.
func createTopicNamed(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.DeleteTopics(ctx, topic); err != nil {
			t.Logf("delete topic %s: %v", topic, err)
		}
	})
}

var asyncSnapshotLine = regexp.MustCompile(`(?m)^async in flight at checkpoint (\d+) subtask (\d+): (\d+)$`)

// asyncInFlightAt sums, over the subtasks, the async calls in flight when
// the run snapshot checkpoint id.
func (r *chaosRun) asyncInFlightAt(id int64) int {
	sum := 0
	for _, m := range asyncSnapshotLine.FindAllStringSubmatch(r.stdout.String(), -1) {
		if c, _ := strconv.ParseInt(m[1], 10, 64); c == id {
			n, _ := strconv.Atoi(m[3])
			sum += n
		}
	}
	return sum
}

// restoredAsyncInFlight returns, for each restore of run i of the job,
// the async calls in flight in the checkpoint it restored (as the run that
// completed that checkpoint printed).
func (j *chaosJob) restoredAsyncInFlight(i int) []int {
	var out []int
	for _, rs := range j.runs[i].restores() {
		n := 0
		for k := i - 1; k >= 0; k-- {
			if slices.ContainsFunc(j.runs[k].completedCheckpoints(), func(c checkpointLine) bool { return c.ID == rs.ID }) {
				n = j.runs[k].asyncInFlightAt(rs.ID)
				break
			}
		}
		out = append(out, n)
	}
	return out
}

// awaitCheckpointWithAsyncInFlight waits until the run completed a
// checkpoint whose snapshot held async calls in flight, and reports true,
// or false when the run ended first.
func (r *chaosRun) awaitCheckpointWithAsyncInFlight(ctx context.Context, t *testing.T) bool {
	t.Helper()
	for {
		s, next := r.stdout.next()
		for _, c := range r.completedCheckpoints() {
			if strings.Contains(s, fmt.Sprintf("checkpoint %d completed:", c.ID)) && r.asyncInFlightAt(c.ID) > 0 {
				return true
			}
		}
		select {
		case <-next:
		case <-r.done:
			return false
		case <-ctx.Done():
			t.Fatalf("waiting for a checkpoint with async calls in flight: %v\nstdout:\n%s", ctx.Err(), r.stdout.String())
		}
	}
}

// Every DataStream operator of the API across SIGKILLs of a separate
// process against the real broker: the operators job (chaosjob -job
// operators) runs a keyed co-process with map state and event-time
// timers, an interval join, a tumbling event-time window join, a keyed
// and a non-keyed broadcast process (rules that come while their events
// do), unordered async I/O against a slow service with capacity 4, and a
// rich map, all on one out-of-order input with watermarks, into one
// transactional sink. The process is killed mid-transaction twice
// (-kill-in-interval, after waiting for async calls in flight), right
// after a checkpoint completed, and right after a checkpoint whose async
// operator held calls in flight completed; each run restores the latest
// checkpoint. Each operator's read_committed output must equal a plain
// evaluation of the input, each result once; at least one restore must
// have replayed async calls in flight, and the last run's rich map must
// have been closed on every subtask.
func TestOperatorsExactlyOnceUnderKills(t *testing.T) {
	const n, keys, versions, parallelism = 1500, 12, 30, 2
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 16))
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

	// 2n events at 250/s: 12 s of input over the runs; the rules come at
	// about the pace of their versions' events (30 in 6 s, the first half).
	job := newChaosJob(t, in, out, "aligned", 250)
	job.extra = []string{"-job", "operators", "-rule-rate", "5", "-async-capacity", "4", "-parallelism", strconv.Itoa(parallelism)}
	start := time.Now()
	selfKilled := func(run *chaosRun, what string) {
		t.Helper()
		run.wait(ctx, t)
		if ws, ok := run.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			job.logRuns(t)
			t.Fatalf("%s: the run ended with %v, want killed by SIGKILL (-kill-in-interval)\nstderr:\n%s", what, run.cmd.ProcessState, tail(run.stderr.String(), 30))
		}
	}
	lastID := func() int64 {
		var id int64
		for _, r := range job.runs {
			id = max(id, r.lastCompleted())
		}
		return id
	}
	// 1: mid-transaction, in the interval after checkpoint 2.
	selfKilled(job.start(t, "-kill-in-interval", "2"), "run 1")
	// 2: right after a checkpoint completed (the second of the run).
	run := job.start(t)
	if !run.awaitNextCompleted(ctx, t, 1) || !run.kill(t) {
		job.logRuns(t)
		t.Fatal("run 2 ended before its kill: the input is too short")
	}
	// 3: mid-transaction again, after the checkpoint that follows the newest one.
	selfKilled(job.start(t, "-kill-in-interval", strconv.FormatInt(lastID()+1, 10)), "run 3")
	// 4: right after a checkpoint with async calls in flight completed;
	// again (up to twice) while no restore has replayed async calls in
	// flight (each run prints its restore before it processes).
	killAfterAsync := func(run *chaosRun) {
		t.Helper()
		if !run.awaitCheckpointWithAsyncInFlight(ctx, t) || !run.kill(t) {
			job.logRuns(t)
			t.Fatal("a run ended before its kill after a checkpoint with async calls in flight: the input is too short")
		}
	}
	replayed := func() bool {
		for i := range job.runs {
			if slices.ContainsFunc(job.restoredAsyncInFlight(i), func(n int) bool { return n > 0 }) {
				return true
			}
		}
		return false
	}
	killAfterAsync(job.start(t))
	for extra := 0; ; extra++ {
		run = job.start(t)
		if !run.awaitStdout(ctx, t, "restored from checkpoint ") {
			job.logRuns(t)
			t.Fatal("a run after a kill did not restore a checkpoint")
		}
		if replayed() || extra == 2 {
			break
		}
		killAfterAsync(run)
	}
	if code := run.wait(ctx, t); code != 0 {
		job.logRuns(t)
		t.Fatalf("the last run exited with status %d\nstderr:\n%s", code, tail(run.stderr.String(), 40))
	}
	elapsed := time.Since(start)

	for _, op := range opsTopics {
		var got []string
		for _, r := range readCommitted(ctx, t, out+"-"+op) {
			got = append(got, r.Key+"|"+r.Value)
		}
		slices.Sort(got)
		if missing, extra := sortedDiff(want[op], got); len(missing)+len(extra) > 0 {
			t.Errorf("operator %s: %d committed results, want %d; missing %d %v, duplicate or unexpected %d %v",
				op, len(got), len(want[op]), len(missing), head(missing, 5), len(extra), head(extra, 5))
		} else {
			t.Logf("operator %s: %d results, exactly once", op, len(got))
		}
	}
	var restored, atKill []int
	for i := range job.runs {
		restored = append(restored, job.restoredAsyncInFlight(i)...)
	}
	for _, r := range job.runs {
		for _, m := range regexp.MustCompile(`(?m)^async calls in flight at the kill: (\d+)$`).FindAllStringSubmatch(r.stdout.String(), -1) {
			k, _ := strconv.Atoi(m[1])
			atKill = append(atKill, k)
		}
	}
	if !replayed() {
		t.Errorf("no restore replayed async calls in flight (calls in flight in the restored checkpoints: %v)", restored)
	}
	if len(atKill) != 2 || slices.Contains(atKill, 0) {
		t.Errorf("async calls in flight at the two -kill-in-interval kills: %v, want two counts > 0", atKill)
	}
	for s := range parallelism {
		if !strings.Contains(run.stdout.String(), fmt.Sprintf("rich map closed subtask %d: ", s)) {
			t.Errorf("the last run did not close the rich map of subtask %d", s)
		}
	}
	if t.Failed() {
		job.logRuns(t)
		return
	}
	completed := 0
	for _, r := range job.runs {
		completed += r.completed()
	}
	t.Logf("%d runs (%d killed) in %v, %d checkpoints completed; async calls in flight at the kills %v, in the restored checkpoints %v",
		len(job.runs), len(job.runs)-1, elapsed.Round(100*time.Millisecond), completed, atKill, restored)
}

// sortedDiff returns what of want is missing from got and what got holds
// beyond want (duplicates included), both sorted.
func sortedDiff(want, got []string) (missing, extra []string) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || i < len(want) && want[i] < got[j]:
			missing = append(missing, want[i])
			i++
		case i == len(want) || got[j] < want[i]:
			extra = append(extra, got[j])
			j++
		default:
			i++
			j++
		}
	}
	return missing, extra
}

func head(s []string, n int) []string { return s[:min(n, len(s))] }
