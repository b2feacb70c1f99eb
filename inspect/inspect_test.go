package inspect_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/snapshot"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/inspect"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const keys = 16

type counter struct{ n state.ValueState[int64] }

func (c *counter) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.n, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *counter) ProcessElement(_ *sluice.KeyedContext[int64], _ source.Record, out sluice.Collector[int64]) error {
	n, _, err := c.n.Value()
	if err != nil {
		return err
	}
	n++
	out.Collect(n)
	return c.n.Update(n)
}

// runJob runs datagen → keyed count → file sink until 2000 records were
// counted, takes a savepoint and cancels the job, whose checkpoints are
// retained.
func runJob(t *testing.T) (savepoint, checkpoints string) {
	cpDir, spDir, out := t.TempDir(), t.TempDir(), t.TempDir()
	env := sluice.NewEnvironment(
		sluice.WithJobName("inspected"), sluice.WithParallelism(2),
		sluice.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		sluice.WithCheckpointing(20*time.Millisecond, cpDir), sluice.WithSavepointDir(spDir),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Retention = checkpoint.RetainOnCancellation }),
	)
	gen := source.NewDatagen(source.RandomRecords(7, 32, keys), source.DatagenRate(20000))
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "gen",
		sluice.WithCodec[source.Record](source.RecordCodec{}), sluice.UID("gen"))
	counts := sluice.Process[int64, source.Record, int64](sluice.KeyBy(recs, func(r source.Record) int64 { return r.Key }),
		&counter{}, sluice.Name("count"), sluice.UID("count"))
	sluice.SinkTo(counts, filesink.New[int64](out, codec.JSON[int64]{}), sluice.Name("files"), sluice.UID("files"))
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); <-job.Done() }()
	testjob.Await(t, "2000 records counted", func() bool {
		var n int64
		for _, m := range job.Metrics() {
			n += m.RecordsIn
		}
		return n >= 2000
	})
	testjob.Await(t, "a retained checkpoint", func() bool {
		s, ok := job.CheckpointStats()
		return ok && s.LatestCompleted != nil
	})
	sp, err := job.TriggerSavepoint(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return sp, filepath.Join(cpDir, "inspected")
}

func TestInspectSavepoint(t *testing.T) {
	sp, cpDir := runJob(t)
	r, err := inspect.Load(sp)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != storage.KindSavepoint || r.Job != "inspected" || r.CheckpointID <= 0 || r.Dir != filepath.Dir(sp) ||
		r.StateSize <= 0 || len(r.Problems) != 0 {
		t.Fatalf("report %+v", r)
	}
	ops := map[string]inspect.Operator{}
	for _, op := range r.Operators {
		ops[op.UID] = op
		if len(op.Subtasks) != 2 || op.Parallelism != 2 {
			t.Errorf("operator %s: %d subtasks of parallelism %d", op.UID, len(op.Subtasks), op.Parallelism)
		}
	}
	if len(ops) != 3 {
		t.Fatalf("operators %v, want gen, count and files", r.Operators)
	}
	// Every key is in the count state of exactly one subtask, once.
	var total int64
	for _, s := range ops["count"].Subtasks {
		if s.KeyGroups == nil || s.Backend != "full" || s.Incremental {
			t.Fatalf("count subtask %d: %+v", s.Index, s)
		}
		var st inspect.KeyedState
		for _, x := range s.States {
			if x.Name == "count" {
				st = x
			}
		}
		if st.Name != "count" || st.Kind != "value" || st.Keys != s.Keys || st.Entries != s.Keys || s.KeyedStateSize <= 0 {
			t.Errorf("count subtask %d state %+v, subtask keys %d", s.Index, st, s.Keys)
		}
		total += s.Keys
	}
	if total != keys {
		t.Errorf("%d keys over the count subtasks, want %d", total, keys)
	}
	// The sources' positions: one datagen reader per subtask.
	seen := map[int]bool{}
	for _, p := range r.Sources {
		if p.Operator != "gen" || p.Kind != "datagen" || p.Parallelism != 2 || p.ReaderSubtask != p.Subtask || p.Next < 1000/2 {
			t.Errorf("source position %+v", p)
		}
		seen[p.ReaderSubtask] = true
	}
	if len(seen) != 2 {
		t.Errorf("positions of readers %v, want 0 and 1", seen)
	}
	// The file sink pre-committed its in-progress files.
	if len(r.Pending) == 0 {
		t.Fatal("no committables in the savepoint")
	}
	for _, c := range r.Pending {
		if c.Operator != "files" || c.Kind != "file" || f(c).CheckpointID <= 0 || f(c).CheckpointID > r.CheckpointID || !strings.Contains(c.String(), f(c).Final) {
			t.Errorf("committable %+v: %s", c, c)
		}
	}
	for _, s := range ops["files"].Subtasks {
		if s.Commits == 0 {
			t.Errorf("files subtask %d has no committable", s.Index)
		}
	}

	// The savepoint records the kind of the sink's committables beside
	// them, which decides their decoder.
	mdPath := sp // the savepoint's _metadata
	raw, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	md, err := snapshot.DecodeMetadata(raw)
	if err != nil {
		t.Fatal(err)
	}
	kinds := 0
	for i, st := range md.Subtasks {
		if len(st.Committables) > 0 {
			if st.CommittableKind != filesink.CommittableKind {
				t.Errorf("%s#%d: committables of kind %q, want %q", st.OperatorUID, st.Subtask, st.CommittableKind, filesink.CommittableKind)
			}
			kinds++
		}
		md.Subtasks[i].CommittableKind = ""
	}
	if kinds == 0 {
		t.Fatal("no subtask with committables in the savepoint's metadata")
	}
	// A savepoint of an earlier version, which recorded no kind: its
	// committables still decode, by the decoder that takes them.
	old, err := snapshot.EncodeMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(old), "committable_kind") {
		t.Fatal("the rewritten metadata still records kinds")
	}
	if err := os.WriteFile(mdPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := inspect.Load(sp)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Pending) != len(r.Pending) || len(o.Problems) != 0 {
		t.Fatalf("the savepoint without kinds: %d committables (%v), want %d", len(o.Pending), o.Problems, len(r.Pending))
	}
	for i, c := range o.Pending {
		if c.Kind != "file" || f(c).Final != f(r.Pending[i]).Final {
			t.Errorf("committable of a savepoint without kinds %+v: %s", c, c)
		}
	}

	// The job's checkpoint directory resolves to its newest checkpoint.
	c, err := inspect.Load(cpDir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != storage.KindCheckpoint || filepath.Dir(c.Dir) != cpDir || !strings.HasPrefix(filepath.Base(c.Dir), "chk-") {
		t.Errorf("checkpoint report %+v", c)
	}
}

// A damaged state file is reported with its name; nothing is decoded.
func TestInspectCorruptFile(t *testing.T) {
	sp, _ := runJob(t)
	r, err := inspect.Load(sp)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := storage.LoadSnapshot(storage.OSFS{}, r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, h := range snap.Metadata.Handles() {
		if !h.Handle.IsInline() {
			victim = snap.Path(h.Handle)
			break
		}
	}
	if victim == "" {
		t.Skip("all state is inline")
	}
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(victim, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = inspect.Load(sp)
	if !errors.Is(err, storage.ErrChecksumMismatch) || !strings.Contains(err.Error(), filepath.Base(victim)) {
		t.Fatalf("corrupt %s: %v", victim, err)
	}
}

func TestResolveNothing(t *testing.T) {
	if _, err := inspect.Load(t.TempDir()); !errors.Is(err, inspect.ErrNoSnapshot) {
		t.Fatalf("empty directory: %v", err)
	}
}

// f is c's file-sink committable (nil when it is not one).
func f(c inspect.Committable) *filesink.Committable {
	fc, _ := c.Value.(*filesink.Committable)
	if fc == nil {
		return &filesink.Committable{CheckpointID: -1}
	}
	return fc
}
