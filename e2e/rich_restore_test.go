package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/state"
)

// The rich-function restore tests run datagen -> RichMap -> RichFilter ->
// RichFlatMap -> ProcessStream -> file sink, every function counting the
// records it was called with in its own operator list state (written in
// SnapshotState, read back at Open), and compare the committed output
// with a plain Go evaluation of the same chain: across crashes injected
// in each function, and across a stop with a savepoint at parallelism 2
// and a restore at 3. They also check the functions' life cycle: every
// opened instance is closed, on failure too, and the runtime context
// (attempt, subtask, parallelism, restored) is what the run implies.

// richOut is one record of the chain; each function fills its fields.
type richOut struct {
	In     int64 `json:"i"`
	Mapped int64 `json:"m"`
	Seen   int64 `json:"s"` // the map subtask's count of records, this one included
	Copy   int64 `json:"c"` // which of the flat map's copies
	Sub    int   `json:"b"` // the process function's subtask
	Par    int   `json:"p"` // and parallelism
	PSeen  int64 `json:"q"` // the process subtask's count of records, this one included
}

// The pure parts of the chain, shared by the functions and the plain
// evaluation.
func richMapped(v int64) int64   { return v*7 + 3 }
func richKeep(r richOut) bool    { return r.Mapped%5 != 0 }
func richCopies(r richOut) int64 { return r.Mapped % 3 }

// richPlain evaluates the chain without the runtime: what subtask s of
// par emits for the first limit[s] records of its datagen share (i = s,
// s+par, ...; all of them if limit is nil), and the number of calls each
// function gets, by function name.
func richPlain(n int64, par int, limit []int64) (map[int][]richOut, map[string]int64) {
	out, calls := map[int][]richOut{}, map[string]int64{}
	for s := range par {
		var seen, pseen int64
		for i := int64(s); i < n && (limit == nil || seen < limit[s]); i += int64(par) {
			seen++
			calls["map"]++
			calls["filter"]++
			r := richOut{In: i, Mapped: richMapped(i), Seen: seen}
			if !richKeep(r) {
				continue
			}
			calls["flatmap"]++
			for j := range richCopies(r) {
				pseen++
				calls["process"]++
				o := r
				o.Copy, o.Sub, o.Par, o.PSeen = j, s, par, pseen
				out[s] = append(out[s], o)
			}
		}
	}
	return out, calls
}

// fnEvent is an Open or a Close of one function instance.
type fnEvent struct {
	fn                    string
	open                  bool
	inst                  *counted
	attempt, subtask, par int
	restored              bool
	entries               int   // list entries restored at Open
	count                 int64 // the restored sum at Open, the count at Close
	snap                  int64 // at Close: the count of the last snapshot (-1: none)
}

// fnLog records the Open and Close events of every function of a run, in
// the order they happened.
type fnLog struct {
	mu     sync.Mutex
	events []fnEvent
	errs   []string
}

func (l *fnLog) add(e fnEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *fnLog) fail(format string, args ...any) {
	l.mu.Lock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *fnLog) snapshot() ([]fnEvent, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events), slices.Clone(l.errs)
}

// counted is what the four functions share: a count of the calls of its
// subtask in operator list state "calls", the open/close log, crashes to
// inject and a progress counter.
type counted struct {
	name     string
	log      *fnLog
	crash    *crashes
	progress *atomic.Int64
	rt       *sluice.OperatorContext
	st       state.OperatorListState[int64]
	calls    int64
	snap     int64
	opened   bool
}

func (c *counted) Open(ctx *sluice.OperatorContext) error {
	if c.opened {
		c.log.fail("%s subtask %d: instance opened twice (attempt %d)", c.name, ctx.Subtask, ctx.Attempt)
	}
	c.opened, c.rt, c.snap = true, ctx, -1
	st, err := state.GetOperatorListState(ctx.OperatorState, state.ListStateDescriptor[int64]{Name: "calls"})
	if err != nil {
		return fmt.Errorf("%s: operator state: %w", c.name, err)
	}
	c.st = st
	vs, err := st.Get()
	if err != nil {
		return fmt.Errorf("%s: read operator state: %w", c.name, err)
	}
	if len(vs) > 0 && !ctx.Restored {
		c.log.fail("%s subtask %d: %d state entries without a restore", c.name, ctx.Subtask, len(vs))
	}
	c.calls = 0
	for _, v := range vs {
		c.calls += v
	}
	c.log.add(fnEvent{fn: c.name, open: true, inst: c, attempt: ctx.Attempt, subtask: ctx.Subtask, par: ctx.Parallelism,
		restored: ctx.Restored, entries: len(vs), count: c.calls})
	return nil
}

func (c *counted) SnapshotState(int64) error {
	c.snap = c.calls
	return c.st.Update([]int64{c.calls})
}

func (c *counted) Close() error {
	c.log.add(fnEvent{fn: c.name, inst: c, attempt: c.rt.Attempt, subtask: c.rt.Subtask, par: c.rt.Parallelism, count: c.calls, snap: c.snap})
	return nil
}

// call counts one call and reports whether it crashes now.
func (c *counted) call(v int64) error {
	c.calls++
	if c.progress != nil {
		c.progress.Add(1)
	}
	if c.crash.hit() {
		return fmt.Errorf("%s of %d: %w", c.name, v, errInjectedCrash)
	}
	return nil
}

type richCountMap struct{ counted }

func (m *richCountMap) Map(v int64) (richOut, error) {
	if err := m.call(v); err != nil {
		return richOut{}, err
	}
	return richOut{In: v, Mapped: richMapped(v), Seen: m.calls}, nil
}

type richCountFilter struct{ counted }

func (f *richCountFilter) Filter(r richOut) (bool, error) {
	if err := f.call(r.In); err != nil {
		return false, err
	}
	return richKeep(r), nil
}

type richCountFlatMap struct{ counted }

// FlatMap emits the copies, then maybe crashes: the copies of the failed
// call must not be committed.
func (f *richCountFlatMap) FlatMap(r richOut, out sluice.Collector[richOut]) error {
	for j := range richCopies(r) {
		o := r
		o.Copy = j
		out.Collect(o)
	}
	return f.call(r.In)
}

type richCountProcess struct{ counted }

func (p *richCountProcess) ProcessElement(ctx *sluice.ProcessContext, r richOut, out sluice.Collector[richOut]) error {
	if err := p.call(r.In); err != nil {
		return err
	}
	rt := ctx.Runtime()
	r.Sub, r.Par, r.PSeen = rt.Subtask, rt.Parallelism, p.calls
	out.Collect(r)
	return nil
}

// richProbes are what the four functions of one run report to and crash
// by: the open/close log, the crashes of each function by name, and the
// count of map calls (progress; may be nil).
type richProbes struct {
	log      *fnLog
	crash    map[string]*crashes
	progress *atomic.Int64
}

// richJob is the chain over records records at rate (0: as fast as it
// can) from a source at parallelism 2 (datagen does not rescale), the
// functions and the sink at the job's parallelism par, checkpoints every
// 12 ms into cpDir, output into outDir; the functions report to p.
func richJob(cpDir, outDir string, records int64, rate float64, par int, p *richProbes) *job[richOut] {
	// The life-cycle checks count the job's attempts: a failure restarts
	// the whole job (this forward-only job's region failover is
	// TestRegionFailover's).
	opts := crashOptions(cpDir, 12*time.Millisecond, sluice.WithParallelism(par), sluice.WithFailoverStrategy(sluice.FailoverFull))
	return &job[richOut]{opts: opts, records: records, rate: rate, outDir: outDir,
		build: func(j *job[richOut], env *sluice.Environment) *sluice.Stream[richOut] {
			s := datagen(j, env, "gen", index, nil, sluice.NoWatermarks[int64](), sluice.Parallelism(2))
			fn := func(name string) counted {
				c := counted{name: name, log: p.log, crash: p.crash[name]}
				if name == "map" {
					c.progress = p.progress
				}
				return c
			}
			mapped := sluice.RichMap(s, sluice.MapFunction[int64, richOut](&richCountMap{fn("map")}), sluice.UID("map"))
			kept := sluice.RichFilter(mapped, sluice.FilterFunction[richOut](&richCountFilter{fn("filter")}), sluice.UID("filter"))
			copies := sluice.RichFlatMap(kept, sluice.FlatMapFunction[richOut, richOut](&richCountFlatMap{fn("flatmap")}), sluice.UID("flatmap"))
			return sluice.ProcessStream(copies, sluice.ProcessFunction[richOut, richOut](&richCountProcess{fn("process")}), sluice.UID("process"))
		}}
}

var richFns = []string{"map", "filter", "flatmap", "process"}

func richKey(r richOut) string { return fmt.Sprintf("%+v", r) }

// richIdentity is the part of a record that does not depend on where and
// when it was processed.
func richIdentity(r richOut) string { return fmt.Sprintf("%d/%d/%d", r.In, r.Mapped, r.Copy) }

func richKeys(rs []richOut, key func(richOut) string) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = key(r)
	}
	return out
}

// checkLifecycle checks the Open and Close events of a run that ended
// with attempt last at parallelism par: every instance opened once and
// closed once, after it was opened; no instance of an earlier attempt
// still open when a later attempt opens; attempts 0..last all ran, in
// that order; the first attempt restored (or not) as the run did; the
// last attempt opened every function on every subtask.
// It returns the Close events of the last attempt by function and
// subtask, and its Open events the same way.
func checkLifecycle(t *testing.T, l *fnLog, last, par int, restoredRun bool) (closes, opens map[string][]fnEvent) {
	t.Helper()
	events, errs := l.snapshot()
	for _, e := range errs {
		t.Error(e)
	}
	open := map[*counted]fnEvent{}
	closed := map[*counted]bool{}
	attempts := map[int]bool{}
	closes, opens = map[string][]fnEvent{}, map[string][]fnEvent{}
	maxAttempt := 0
	for i, e := range events {
		if e.open {
			if e.attempt < maxAttempt {
				t.Errorf("event %d: %s subtask %d opened in attempt %d after attempt %d had started", i, e.fn, e.subtask, e.attempt, maxAttempt)
			}
			maxAttempt = max(maxAttempt, e.attempt)
			attempts[e.attempt] = true
			for _, o := range open {
				if o.attempt < e.attempt {
					t.Errorf("event %d: %s subtask %d of attempt %d opened while %s subtask %d of attempt %d was still open",
						i, e.fn, e.subtask, e.attempt, o.fn, o.subtask, o.attempt)
				}
			}
			if e.par != par || e.subtask < 0 || e.subtask >= par {
				t.Errorf("event %d: %s opened as subtask %d of %d, want one of %d", i, e.fn, e.subtask, e.par, par)
			}
			if e.attempt == 0 && e.restored != restoredRun {
				t.Errorf("event %d: %s subtask %d: restored %v in the first attempt, want %v", i, e.fn, e.subtask, e.restored, restoredRun)
			}
			open[e.inst] = e
			if e.attempt == last {
				opens[e.fn] = append(opens[e.fn], e)
			}
			continue
		}
		o, ok := open[e.inst]
		if !ok || closed[e.inst] {
			t.Errorf("event %d: %s subtask %d of attempt %d closed without an open (or twice)", i, e.fn, e.subtask, e.attempt)
			continue
		}
		if o.attempt != e.attempt || o.subtask != e.subtask {
			t.Errorf("event %d: %s closed as subtask %d of attempt %d, opened as %d of %d", i, e.fn, e.subtask, e.attempt, o.subtask, o.attempt)
		}
		delete(open, e.inst)
		closed[e.inst] = true
		if e.attempt == last {
			closes[e.fn] = append(closes[e.fn], e)
		}
	}
	for _, o := range open {
		t.Errorf("%s subtask %d of attempt %d was opened and never closed", o.fn, o.subtask, o.attempt)
	}
	for a := 0; a <= last; a++ {
		if !attempts[a] {
			t.Errorf("no function opened in attempt %d (attempts seen %v, last %d)", a, attempts, last)
		}
	}
	if maxAttempt != last {
		t.Errorf("functions opened up to attempt %d, the job's last attempt is %d", maxAttempt, last)
	}
	for _, fn := range richFns {
		for _, evs := range []map[string][]fnEvent{opens, closes} {
			subs := make([]int, 0, par)
			for _, e := range evs[fn] {
				subs = append(subs, e.subtask)
			}
			slices.Sort(subs)
			if want := ints(0, int64(par)); len(subs) != par || !slices.Equal(toInt64(subs), want) {
				t.Errorf("%s: the last attempt had subtasks %v, want %v", fn, subs, want)
			}
		}
		slices.SortFunc(opens[fn], func(a, b fnEvent) int { return a.subtask - b.subtask })
		slices.SortFunc(closes[fn], func(a, b fnEvent) int { return a.subtask - b.subtask })
	}
	return closes, opens
}

func toInt64(xs []int) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

func TestRichFunctionsExactlyOnceUnderCrashes(t *testing.T) {
	const records, par = 4000, 2
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 16))
	want, calls := richPlain(records, par, nil)
	// One crash in each function, somewhere in its first pass over the
	// input (a threshold counts calls, replays included, so it fires).
	crash := map[string]*crashes{}
	for _, fn := range richFns {
		crash[fn] = newCrashes(rng, 1, calls[fn])
	}
	probes := &richProbes{log: &fnLog{}, crash: crash}
	r := richJob(t.TempDir(), t.TempDir(), records, 10000, par, probes)
	job := r.run(t)
	fired := int64(0)
	for _, fn := range richFns {
		if f := crash[fn].fired.Load(); f != 1 {
			t.Errorf("%s: %d crashes, want 1", fn, f)
		}
		fired += crash[fn].fired.Load()
	}
	restarts := job.Restarts()
	if restarts < 1 || restarts > fired {
		t.Fatalf("%d restarts for %d crashes", restarts, fired)
	}

	// The output: per subtask, in order, the plain evaluation's.
	got, err := filesink.ReadCommittedBySubtask(r.outDir, codec.JSON[richOut]{})
	if err != nil {
		t.Fatal(err)
	}
	var all, wantAll []richOut
	for s := range par {
		all, wantAll = append(all, got[s]...), append(wantAll, want[s]...)
	}
	if len(got) > par {
		t.Errorf("output from %d sink subtasks, want %d", len(got), par)
	}
	if d := sameMultiset(richKeys(all, richKey), richKeys(wantAll, richKey)); d != "" {
		t.Fatalf("committed output is not the plain evaluation's: %s", d)
	}
	once := map[string]int{}
	for _, g := range all {
		once[richIdentity(g)]++
	}
	for k, n := range once {
		if n != 1 {
			t.Errorf("record %s committed %d times", k, n)
		}
	}
	for s := range par {
		if i := firstDiff(got[s], want[s]); i >= 0 {
			t.Errorf("subtask %d: committed record %d differs from the plain evaluation (%d records, want %d)", s, i, len(got[s]), len(want[s]))
		}
	}

	// The life cycle and the counts in operator state: the last attempt
	// closed every function with exactly the calls of a run without a
	// crash, on every subtask.
	closes, opens := checkLifecycle(t, probes.log, int(restarts), par, false)
	_, perSub := richPlainBySubtask(records, par)
	for _, fn := range richFns {
		total := int64(0)
		for _, e := range closes[fn] {
			total += e.count
			if e.count != perSub[e.subtask][fn] {
				t.Errorf("%s subtask %d: %d calls in operator state at the end, want %d", fn, e.subtask, e.count, perSub[e.subtask][fn])
			}
		}
		if total != calls[fn] {
			t.Errorf("%s: the subtasks counted %d calls, want %d", fn, total, calls[fn])
		}
		for _, e := range opens[fn] {
			if e.attempt != int(restarts) {
				t.Errorf("%s subtask %d: last attempt %d, want %d", fn, e.subtask, e.attempt, restarts)
			}
		}
	}
	events, _ := probes.log.snapshot()
	restored := 0
	for _, e := range events {
		if e.open && e.restored {
			restored++
		}
	}
	t.Logf("%d records, %d crashes, %d restarts, %d opens, %d of them restored", records, fired, restarts, len(events)/2, restored)
}

// richPlainBySubtask is the number of calls of each function on each
// subtask in a run without a crash.
func richPlainBySubtask(n int64, par int) (map[int][]richOut, []map[string]int64) {
	out := map[int][]richOut{}
	calls := make([]map[string]int64, par)
	for s := range par {
		limit := make([]int64, par)
		limit[s] = n
		o, c := richPlain(n, par, limit)
		out[s], calls[s] = o[s], c
	}
	return out, calls
}

// firstDiff returns the index of the first difference between two lists,
// or -1.
func firstDiff(got, want []richOut) int {
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			return i
		}
	}
	return -1
}

func TestRichFunctionsRescale(t *testing.T) {
	const records = 3000
	progress := &atomic.Int64{}
	out, cp := t.TempDir(), t.TempDir()
	first := &richProbes{log: &fnLog{}, progress: progress}
	job := richJob(cp, out, records, 2000, 2, first).start(t)
	await(t, "a third of the input mapped", func() bool { return progress.Load() > records/3 })
	sp := stopWithSavepoint(t, job)
	if job.Restarts() != 0 {
		t.Fatalf("the first run restarted %d times", job.Restarts())
	}
	// What the first run counted in the savepoint, by function and
	// subtask: the count of its last snapshot, which is also the count at
	// Close, since nothing is processed after the barrier of a
	// stop-with-savepoint.
	closes1, _ := checkLifecycle(t, first.log, 0, 2, false)
	before := map[string]int64{}
	mapLimit := make([]int64, 2)
	for _, fn := range richFns {
		for _, e := range closes1[fn] {
			if e.snap != e.count {
				t.Errorf("%s subtask %d: counted %d at Close, %d in its last snapshot", fn, e.subtask, e.count, e.snap)
			}
			before[fn] += e.snap
			if fn == "map" {
				mapLimit[e.subtask] = e.snap
			}
		}
	}
	if n := before["map"]; n <= records/3 || n >= records {
		t.Fatalf("the first run mapped %d of %d records; the test needs a stop midway", n, records)
	}

	second := &richProbes{log: &fnLog{}}
	r2 := richJob(cp, out, records, 0, 3, second)
	r2.extra = []sluice.Option{sluice.WithRestoreFrom(sp)}
	r2.run(t)
	closes2, opens2 := checkLifecycle(t, second.log, 0, 3, true)
	_, calls := richPlain(records, 2, nil)
	restoredP := map[int]int64{}
	restoredM := map[int]int64{}
	for _, fn := range richFns {
		restored, entries, total := int64(0), 0, int64(0)
		for _, e := range opens2[fn] {
			if !e.restored {
				t.Errorf("%s subtask %d of 3 not restored", fn, e.subtask)
			}
			restored += e.count
			entries += e.entries
			switch fn {
			case "process":
				restoredP[e.subtask] = e.count
			case "map":
				restoredM[e.subtask] = e.count
			}
		}
		for _, e := range closes2[fn] {
			total += e.count
		}
		if restored != before[fn] {
			t.Errorf("%s: the 3 subtasks restored %d calls, the 2 counted %d before the savepoint", fn, restored, before[fn])
		}
		if entries != 2 {
			t.Errorf("%s: the 3 subtasks restored %d list entries, the 2 wrote 2", fn, entries)
		}
		if total != calls[fn] {
			t.Errorf("%s: %d calls counted at the end, want %d", fn, total, calls[fn])
		}
	}

	all := r2.output(t)
	want, _ := richPlain(records, 2, nil)
	var wantAll []richOut
	for s := range 2 {
		wantAll = append(wantAll, want[s]...)
	}
	if d := sameMultiset(richKeys(all, richIdentity), richKeys(wantAll, richIdentity)); d != "" {
		t.Fatalf("committed output is not the plain evaluation's: %s", d)
	}
	// The first run committed, per subtask and in order, the plain
	// evaluation of the records it counted; the second run's subtasks
	// carry on from the counts they restored.
	groups := map[[2]int][]richOut{}
	for _, g := range all {
		groups[[2]int{g.Par, g.Sub}] = append(groups[[2]int{g.Par, g.Sub}], g)
	}
	prefix, _ := richPlain(records, 2, mapLimit)
	for s := range 2 {
		if i := firstDiff(groups[[2]int{2, s}], prefix[s]); i >= 0 {
			t.Errorf("first run, subtask %d: committed record %d differs from the plain evaluation of its first %d records", s, i, mapLimit[s])
		}
	}
	for k, g := range groups {
		if k[0] != 2 && (k[0] != 3 || k[1] < 0 || k[1] > 2) {
			t.Errorf("%d records from subtask %d of %d", len(g), k[1], k[0])
			continue
		}
		if k[0] != 3 {
			continue
		}
		// The copies of one record share its map count; the next record
		// has a higher one.
		prev := richOut{In: -1, Seen: restoredM[k[1]]}
		for i, r := range g {
			if r.PSeen != restoredP[k[1]]+int64(i)+1 {
				t.Fatalf("second run, subtask %d: record %d has process count %d, want %d", k[1], i, r.PSeen, restoredP[k[1]]+int64(i)+1)
			}
			if r.In != prev.In && r.Seen <= prev.Seen || r.In == prev.In && r.Seen != prev.Seen {
				t.Fatalf("second run, subtask %d: record %d (input %d) has map count %d after %d (input %d)", k[1], i, r.In, r.Seen, prev.Seen, prev.In)
			}
			prev = r
		}
	}
	t.Logf("savepoint after %d of %d records; restored map counts %v, process counts %v", before["map"], records, restoredM, restoredP)
}
