package integration

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The chaos job (integration/chaosjob) is built once per test binary.
var chaosBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// TestMain removes the chaos job's build directory after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if chaosBuild.dir != "" {
		os.RemoveAll(chaosBuild.dir)
	}
	os.Exit(code)
}

// chaosJobBinary builds integration/chaosjob (once) and returns its path.
func chaosJobBinary(t *testing.T) string {
	t.Helper()
	chaosBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-chaosjob-")
		if err != nil {
			chaosBuild.err = err
			return
		}
		chaosBuild.dir = dir
		chaosBuild.path = filepath.Join(dir, "chaosjob")
		cmd := exec.Command("go", "build", "-o", chaosBuild.path, "./chaosjob")
		out, err := cmd.CombinedOutput()
		if err != nil {
			chaosBuild.err = fmt.Errorf("go build ./integration/chaosjob: %v\n%s", err, out)
		}
	})
	if chaosBuild.err != nil {
		t.Fatal(chaosBuild.err)
	}
	return chaosBuild.path
}

// syncBuffer is a bytes.Buffer safe for a writer and readers, which can
// wait for the next write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	ch chan struct{} // closed by the next write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// next returns what was written so far and a channel that the next write
// closes.
func (s *syncBuffer) next() (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.b.String(), s.ch
}

// chaosRun is one run of the chaos job: a separate OS process.
type chaosRun struct {
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	err    error // of Wait, once done is closed
}

// chaosJob is the configuration every run of one test's job shares.
type chaosJob struct {
	in, out     string
	checkpoints string
	stateDir    string
	prefix      string
	mode        string
	rate        int
	// backend is the state backend when set; otherwise
	// $SLUICE_IT_STATE_BACKEND or chaosjob's default (rocksdb).
	backend string
	// seeds are the brokers the job reads and writes; nil: the test
	// broker (KAFKA_BROKERS).
	seeds []string
	extra []string
	runs  []*chaosRun
}

func newChaosJob(t *testing.T, in, out, mode string, rate int) *chaosJob {
	return &chaosJob{
		in: in, out: out, mode: mode, rate: rate,
		checkpoints: t.TempDir(), stateDir: t.TempDir(),
		prefix: uniqueName(t, "sluice-it-chaos"),
	}
}

// start starts a run with the job's flags plus args.
func (j *chaosJob) start(t *testing.T, args ...string) *chaosRun {
	t.Helper()
	seeds := j.seeds
	if seeds == nil {
		seeds = brokers(t)
	}
	all := append([]string{
		"-brokers", strings.Join(seeds, ","), "-in", j.in, "-out", j.out,
		"-checkpoints", j.checkpoints, "-state-dir", j.stateDir, "-prefix", j.prefix,
		"-mode", j.mode, "-rate", strconv.Itoa(j.rate),
	}, j.extra...)
	if b := cmp.Or(j.backend, os.Getenv("SLUICE_IT_STATE_BACKEND")); b != "" {
		all = append(all, "-backend", b) // rocksdb (the default) or heap
	}
	r := &chaosRun{done: make(chan struct{})}
	r.cmd = exec.Command(chaosJobBinary(t), append(all, args...)...)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start the chaos job: %v", err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			if dir := os.Getenv("SLUICE_IT_STACKS"); dir != "" && t.Failed() {
				r.dumpStacks(t, dir)
			}
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	j.runs = append(j.runs, r)
	return r
}

// logRuns logs, for a failed test, what each run did: its checkpoints and
// its restore, start and end log lines.
func (j *chaosJob) logRuns(t *testing.T) {
	t.Helper()
	for i, r := range j.runs {
		var lines []string
		for _, l := range strings.Split(r.stderr.String(), "\n") {
			for _, k := range []string{"restoring", "job started", "job failed", "job ended", "already finished", "chaosjob:", "ERROR", "WARN"} {
				if strings.Contains(l, k) {
					lines = append(lines, l)
					break
				}
			}
		}
		t.Logf("run %d (%v):\n%s%s", i+1, r.cmd.ProcessState, r.stdout.String(), strings.Join(lines, "\n"))
	}
}

// dumpStacks asks a live run of a failed test for its goroutines
// (SIGQUIT) and writes its whole stderr, the stacks at its end, to a file
// under dir ($SLUICE_IT_STACKS): what a hung process waited for.
func (r *chaosRun) dumpStacks(t *testing.T, dir string) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return
	}
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
	}
	name := filepath.Join(dir, fmt.Sprintf("%s-%d.stderr", strings.ReplaceAll(t.Name(), "/", "_"), r.cmd.Process.Pid))
	if err := os.WriteFile(name, []byte(r.stderr.String()), 0o644); err != nil {
		t.Logf("write the stacks of process %d: %v", r.cmd.Process.Pid, err)
		return
	}
	t.Logf("the stacks of process %d (%s) are in %s", r.cmd.Process.Pid, strings.Join(r.cmd.Args[len(r.cmd.Args)-min(len(r.cmd.Args), 8):], " "), name)
}

// kill sends SIGKILL and waits for the process to be gone. It reports
// false when the run had already ended by itself.
func (r *chaosRun) kill(t *testing.T) bool {
	t.Helper()
	select {
	case <-r.done:
		return false
	default:
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("kill the chaos job: %v", err)
	}
	<-r.done
	return true
}

// wait waits for the run to end by itself and returns its exit status
// (-1 when a signal ended it).
func (r *chaosRun) wait(ctx context.Context, t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-ctx.Done():
		t.Fatalf("the chaos job did not end: %v\nstdout:\n%s\nstderr (last lines):\n%s", ctx.Err(), r.stdout.String(), tail(r.stderr.String(), 40))
	}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		return ee.ExitCode()
	}
	if r.err != nil {
		t.Fatalf("wait for the chaos job: %v", r.err)
	}
	return 0
}

// Exit statuses of the chaos job (see integration/chaosjob).
const (
	chaosExitSuspended = 4
	chaosExitCanceled  = 5
	chaosExitLocked    = 6
)

// ended reports whether the process has ended.
func (r *chaosRun) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process unless it has ended; it reports whether
// the signal was sent.
func (r *chaosRun) signal(t *testing.T, sig syscall.Signal) bool {
	t.Helper()
	if r.ended() {
		return false
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return false
		}
		t.Fatalf("send %v to the chaos job: %v", sig, err)
	}
	return true
}

// awaitStdout waits until the run's stdout holds text and reports true,
// or false when the run ended without it.
func (r *chaosRun) awaitStdout(ctx context.Context, t *testing.T, text string) bool {
	t.Helper()
	return r.awaitOutput(ctx, t, &r.stdout, text) != ""
}

// awaitStderr is awaitStdout for the run's logs.
func (r *chaosRun) awaitStderr(ctx context.Context, t *testing.T, text string) bool {
	t.Helper()
	return r.awaitOutput(ctx, t, &r.stderr, text) != ""
}

// awaitOutput waits until b holds one of texts and returns the first of
// them it holds, or "" when the run ended without any.
func (r *chaosRun) awaitOutput(ctx context.Context, t *testing.T, b *syncBuffer, texts ...string) string {
	t.Helper()
	find := func(s string) string {
		for _, x := range texts {
			if strings.Contains(s, x) {
				return x
			}
		}
		return ""
	}
	for {
		s, next := b.next()
		if x := find(s); x != "" {
			return x
		}
		select {
		case <-next:
		case <-r.done:
			// Every byte the process wrote is in b once it is done.
			return find(b.String())
		case <-ctx.Done():
			t.Fatalf("waiting for %q from the chaos job: %v\nstdout:\n%s\nstderr (last lines):\n%s",
				texts, ctx.Err(), r.stdout.String(), tail(r.stderr.String(), 40))
		}
	}
}

// awaitNextCompleted waits until the run has completed a checkpoint more
// than the n it had, and reports true, or false when the run ended first.
func (r *chaosRun) awaitNextCompleted(ctx context.Context, t *testing.T, n int) bool {
	t.Helper()
	for {
		s, next := r.stdout.next()
		if strings.Count(s, " completed: ") > n {
			return true
		}
		select {
		case <-next:
		case <-r.done:
			return strings.Count(r.stdout.String(), " completed: ") > n
		case <-ctx.Done():
			t.Fatalf("waiting for checkpoint %d of the chaos job: %v", n+1, ctx.Err())
		}
	}
}

// awaitSuspended waits, with a generous bound that only turns a hang into
// a failure, for the run to exit after a SIGTERM, and fails the test
// unless it exited by itself with the suspended status, saying so.
func (r *chaosRun) awaitSuspended(ctx context.Context, t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	code := r.wait(ctx, t)
	switch {
	case code == chaosExitSuspended && r.said("job suspended"):
	case code == chaosExitCanceled:
		t.Fatalf("SIGTERM cancelled the job instead of suspending it (exit status %d, %q)\nstdout:\n%s\nstderr (last lines):\n%s",
			code, lastLine(r.stdout.String()), r.stdout.String(), tail(r.stderr.String(), 20))
	default:
		t.Fatalf("after SIGTERM the job ended with %v, want exit status %d (suspended) and \"job suspended\"\nstdout:\n%s\nstderr (last lines):\n%s",
			r.cmd.ProcessState, chaosExitSuspended, r.stdout.String(), tail(r.stderr.String(), 30))
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// persisted sums the in-flight bytes the run's completed checkpoints
// persisted (unaligned checkpoints).
func (r *chaosRun) persisted() int64 {
	var sum int64
	for _, l := range strings.Split(r.stdout.String(), "\n") {
		if !strings.Contains(l, " completed: ") {
			continue
		}
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "persisted="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				sum += n
			}
		}
	}
	return sum
}

// checkpointLine is a checkpoint the run completed or restored, as its
// stdout says.
type checkpointLine struct {
	ID   int64
	Path string
	// Line is the line's index among the run's stdout lines.
	Line int
}

// parseCheckpointLines returns the lines of the run's stdout that begin
// with prefix followed by a checkpoint id ("checkpoint " for completed
// checkpoints, "restored from checkpoint " for restores).
func (r *chaosRun) parseCheckpointLines(prefix string) []checkpointLine {
	var out []checkpointLine
	for i, l := range strings.Split(r.stdout.String(), "\n") {
		rest, ok := strings.CutPrefix(l, prefix)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		id, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		c := checkpointLine{ID: id, Line: i}
		for _, x := range f[1:] {
			if v, ok := strings.CutPrefix(x, "path="); ok {
				// A checkpoint's directory, whether the line names it or
				// its _metadata.
				c.Path = strings.TrimSuffix(filepath.Clean(v), string(filepath.Separator)+"_metadata")
			}
		}
		out = append(out, c)
	}
	return out
}

// completedCheckpoints lists the checkpoints the run completed.
func (r *chaosRun) completedCheckpoints() []checkpointLine {
	return r.parseCheckpointLines("checkpoint ")
}

// restores lists the checkpoints the run restored from, one per attempt
// that restored.
func (r *chaosRun) restores() []checkpointLine {
	return r.parseCheckpointLines("restored from checkpoint ")
}

// lastCompleted is the id of the newest checkpoint the run completed, 0
// when none.
func (r *chaosRun) lastCompleted() int64 {
	var last int64
	for _, c := range r.completedCheckpoints() {
		last = max(last, c.ID)
	}
	return last
}

// said reports whether the run printed line as a line of its own.
func (r *chaosRun) said(line string) bool {
	return slices.Contains(strings.Split(r.stdout.String(), "\n"), line)
}

// completed counts the checkpoints the run completed.
func (r *chaosRun) completed() int {
	return strings.Count(r.stdout.String(), " completed: ")
}

// awaitCompleted waits until the run has completed n checkpoints.
func (r *chaosRun) awaitCompleted(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	await(ctx, t, fmt.Sprintf("%d completed checkpoints", n), func() bool {
		select {
		case <-r.done:
			t.Fatalf("the chaos job ended (%v) before %d checkpoints completed\nstderr:\n%s", r.err, n, tail(r.stderr.String(), 40))
		default:
		}
		return r.completed() >= n
	})
}

// await polls cond until it holds; ctx's deadline only turns a hang into
// a failure.
func await(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// keyName is the key of the chaos job's input records.
func keyName(k int) string { return fmt.Sprintf("k%03d", k) }

// produceKeyed writes perKey records for each of keys keys to topic,
// interleaved, and waits until all are acknowledged.
func produceKeyed(ctx context.Context, t *testing.T, topic string, keys, perKey int) {
	t.Helper()
	produceKeyedAt(ctx, t, brokers(t), topic, keys, perKey)
}

// produceKeyedAt is produceKeyed to the brokers at seeds.
func produceKeyedAt(ctx context.Context, t *testing.T, seeds []string, topic string, keys, perKey int) {
	t.Helper()
	p := newClientAt(t, seeds, kgo.DefaultProduceTopic(topic))
	recs := make([]*kgo.Record, 0, keys*perKey)
	for i := range perKey {
		for k := range keys {
			recs = append(recs, &kgo.Record{Key: []byte(keyName(k)), Value: []byte(strconv.Itoa(i))})
		}
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce the input: %v", err)
	}
}

// outRecord is one committed output record.
type outRecord struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

// readCommitted reads every record of topic a read_committed consumer can
// see once the job that wrote it has ended: it waits until no transaction
// is open on any partition of topic, then reads up to the end, in offset
// order per partition.
func readCommitted(ctx context.Context, t *testing.T, topic string) []outRecord {
	t.Helper()
	return readCommittedAt(ctx, t, brokers(t), topic)
}

// readCommittedAt is readCommitted from the brokers at seeds.
//
// A commit is durable when the transaction coordinator answers EndTxn, but
// its markers reach the partitions after that (the coordinator writes them
// to each partition's leader in the background, later after a broker
// restart), and until then the partition's last stable offset stays before
// the transaction: reading up to the last stable offsets right after the
// job ended misses its last transactions. Every transaction of an ended
// job is resolved, so the wait ends unless one was left open, which the
// failure names.
func readCommittedAt(ctx context.Context, t *testing.T, seeds []string, topic string) []outRecord {
	t.Helper()
	adm := kadm.NewClient(newClientAt(t, seeds))
	awaitWhy(ctx, t, "every transaction on "+topic+" resolved (last stable offset = end offset)", func() string {
		return openTransactions(ctx, adm, topic)
	})
	return readCommittedSoFarAt(ctx, t, seeds, topic)
}

// openTransactions names the partitions of topic whose last stable offset
// is behind their end offset (a transaction open, or its markers not yet
// written), or says why it cannot tell; "" when there is none.
func openTransactions(ctx context.Context, adm *kadm.Client, topic string) string {
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return fmt.Sprintf("last stable offsets: %v", err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Sprintf("end offsets: %v", err)
	}
	var open, failed []string
	end.Each(func(o kadm.ListedOffset) {
		s, ok := lso.Lookup(o.Topic, o.Partition)
		switch {
		case o.Err != nil || !ok || s.Err != nil:
			failed = append(failed, fmt.Sprintf("%s/%d: end offset %v, last stable offset %v", o.Topic, o.Partition, o.Err, s.Err))
		case s.Offset < o.Offset:
			open = append(open, fmt.Sprintf("%s/%d stable at %d, ends at %d", o.Topic, o.Partition, s.Offset, o.Offset))
		}
	})
	slices.Sort(open)
	slices.Sort(failed)
	return strings.Join(append(failed, open...), "; ")
}

// readCommittedSoFar reads what a read_committed consumer of topic sees
// now, up to the last stable offset of each partition as it is when
// called, for a job that still runs.
func readCommittedSoFar(ctx context.Context, t *testing.T, topic string) []outRecord {
	t.Helper()
	return readCommittedSoFarAt(ctx, t, brokers(t), topic)
}

// readCommittedSoFarAt is readCommittedSoFar from the brokers at seeds.
func readCommittedSoFarAt(ctx context.Context, t *testing.T, seeds []string, topic string) []outRecord {
	t.Helper()
	adm := kadm.NewClient(newClientAt(t, seeds))
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("last stable offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	lso.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl := newClientAt(t, seeds, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	var out []outRecord
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s up to its last stable offsets %v: %v", topic, want, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset < end && !r.Attrs.IsControl() {
				out = append(out, outRecord{r.Partition, r.Offset, string(r.Key), string(r.Value)})
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

// checkExactCounts asserts that for every key the committed output holds
// the counts 1..perKey, each once, in order: no gap, no duplicate.
func checkExactCounts(t *testing.T, got []outRecord, keys, perKey int) {
	t.Helper()
	byKey := map[string][]int64{}
	for _, r := range got {
		n, err := strconv.ParseInt(r.Value, 10, 64)
		if err != nil {
			t.Fatalf("output record %+v: value is not a count: %v", r, err)
		}
		byKey[r.Key] = append(byKey[r.Key], n)
	}
	bad := 0
	for k := range keys {
		counts := byKey[keyName(k)]
		ok := len(counts) == perKey
		for i := 0; ok && i < perKey; i++ {
			ok = counts[i] == int64(i+1)
		}
		if !ok && bad < 5 {
			bad++
			t.Errorf("key %s: committed counts %v, want 1..%d once each, in order", keyName(k), summarize(counts), perKey)
		}
		delete(byKey, keyName(k))
	}
	for k := range byKey {
		t.Errorf("output has unexpected key %q", k)
	}
	if len(got) != keys*perKey {
		t.Errorf("%d committed output records, want %d", len(got), keys*perKey)
	}
}

// summarize shows where a sequence of counts departs from 1, 2, 3...
func summarize(c []int64) string {
	for i, n := range c {
		if n != int64(i+1) {
			lo := max(0, i-3)
			hi := min(len(c), i+4)
			return fmt.Sprintf("(%d counts) ...%v... (first departure at position %d)", len(c), c[lo:hi], i)
		}
	}
	return fmt.Sprintf("(%d counts) 1..%d", len(c), len(c))
}

// checkKcatAgrees reads topic with kcat under read_committed and compares
// partition, key and value of every record with got.
func checkKcatAgrees(t *testing.T, topic string, got []outRecord) {
	t.Helper()
	var mine []string
	for _, r := range got {
		mine = append(mine, fmt.Sprintf("%d:%s:%s", r.Partition, r.Key, r.Value))
	}
	slices.Sort(mine)
	theirs := kcatReadFormat(t, topic, "%p:%k:%s\n")
	if !slices.Equal(theirs, mine) {
		t.Fatalf("kcat (read_committed) sees %d records, franz-go %d; first difference: %s",
			len(theirs), len(mine), firstDifference(theirs, mine))
	}
}

func firstDifference(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: kcat %q, franz-go %q", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d vs %d)", len(a), len(b))
}
