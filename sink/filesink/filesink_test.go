package filesink_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/sink/filesink"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newWriter makes the writer of subtask sub of par, restored from
// checkpoint restoredID when restoredID > 0.
func newWriter[T any](t testing.TB, s *filesink.Sink[T], sub, par int, restoredID int64) sink.PrecommittingWriter[T] {
	t.Helper()
	w, err := s.NewWriter(sink.WriterContext{
		Subtask: sub, Parallelism: par,
		Restored: restoredID > 0, RestoredCheckpointID: restoredID,
	})
	if err != nil {
		t.Fatalf("NewWriter(%d of %d): %v", sub, par, err)
	}
	pw, ok := w.(sink.PrecommittingWriter[T])
	if !ok {
		t.Fatalf("writer %T is not a PrecommittingWriter", w)
	}
	return pw
}

func newCommitter[T any](t testing.TB, s *filesink.Sink[T], sub, par int) sink.Committer {
	t.Helper()
	c, err := s.NewCommitter(sink.WriterContext{Subtask: sub, Parallelism: par})
	if err != nil {
		t.Fatalf("NewCommitter(%d of %d): %v", sub, par, err)
	}
	return c
}

func writeAll[T any](t testing.TB, w sink.Writer[T], vs []T) {
	t.Helper()
	for i, v := range vs {
		if err := w.Write(v, int64(i)); err != nil {
			t.Fatalf("Write(%d): %v", i, err)
		}
	}
}

func prepare[T any](t testing.TB, w sink.PrecommittingWriter[T], id int64) [][]byte {
	t.Helper()
	cs, err := w.PrepareCommit(id)
	if err != nil {
		t.Fatalf("PrepareCommit(%d): %v", id, err)
	}
	return cs
}

func commit(t testing.TB, c sink.Committer, id int64, cs [][]byte) {
	t.Helper()
	if err := c.Commit(context.Background(), id, cs); err != nil {
		t.Fatalf("Commit(%d): %v", id, err)
	}
}

func readBytes(t testing.TB, dir string) [][]byte {
	t.Helper()
	got, err := filesink.ReadCommitted(dir, codec.Bytes{})
	if err != nil {
		t.Fatalf("ReadCommitted: %v", err)
	}
	return got
}

func readInts(t testing.TB, dir string) []int {
	t.Helper()
	got, err := filesink.ReadCommitted[int](dir, nil)
	if err != nil {
		t.Fatalf("ReadCommitted: %v", err)
	}
	return got
}

func inProgress(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, ".inprogress"))
	if err != nil {
		t.Fatalf("list in-progress: %v", err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func parse(t testing.TB, b []byte) filesink.Committable {
	t.Helper()
	c, err := filesink.ParseCommittable(b)
	if err != nil {
		t.Fatalf("ParseCommittable: %v", err)
	}
	return c
}

func ints(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// awkwardRecords are byte strings that a line-based format would break.
func awkwardRecords() [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 100<<10)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return [][]byte{
		{}, []byte("\n"), []byte("a\nb\r\n"), {0}, {0x01, 0x00, 0xff}, all, big,
		[]byte("SLFS\x01"), []byte("plain"),
	}
}

func equalBytes(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}

func TestWritePrepareCommitCycle(t *testing.T) {
	dir := t.TempDir()
	s := filesink.New(dir, codec.Bytes{})
	w := newWriter(t, s, 0, 1, 0)
	defer w.Close()
	c := newCommitter(t, s, 0, 1)
	defer c.Close()

	first := awkwardRecords()
	writeAll(t, w, first)
	if err := w.Flush(false); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := readBytes(t, dir); len(got) != 0 {
		t.Fatalf("%d records visible before PrepareCommit", len(got))
	}
	cs := prepare(t, w, 1)
	if len(cs) != 1 {
		t.Fatalf("PrepareCommit(1) gave %d committables, want 1", len(cs))
	}
	p := parse(t, cs[0])
	if p.Subtask != 0 || p.CheckpointID != 1 || p.Seq != 0 || p.Final != "part-0-1-0" || p.Records != int64(len(first)) {
		t.Fatalf("committable %+v", p)
	}
	fi, err := os.Stat(filepath.Join(dir, ".inprogress", p.InProgress))
	if err != nil {
		t.Fatalf("in-progress file of the committable: %v", err)
	}
	if fi.Size() != p.Size {
		t.Fatalf("in-progress file has %d bytes, committable says %d", fi.Size(), p.Size)
	}
	if got := readBytes(t, dir); len(got) != 0 {
		t.Fatalf("%d records visible after PrepareCommit, before Commit", len(got))
	}
	commit(t, c, 1, cs)
	if got := readBytes(t, dir); !equalBytes(got, first) {
		t.Fatalf("committed records differ from written ones (%d vs %d records)", len(got), len(first))
	}
	if _, err := os.Stat(filepath.Join(dir, ".inprogress", p.InProgress)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("in-progress file still there after commit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "part-0-1-0")); err != nil {
		t.Fatalf("final file: %v", err)
	}

	// The next interval goes into a new file; an empty interval hands
	// over nothing.
	second := [][]byte{[]byte("x"), []byte("y\n")}
	writeAll(t, w, second)
	cs2 := prepare(t, w, 2)
	if len(cs2) != 1 || parse(t, cs2[0]).InProgress == p.InProgress {
		t.Fatalf("interval 2 committables %q", cs2)
	}
	if cs3 := prepare(t, w, 3); len(cs3) != 0 {
		t.Fatalf("empty interval gave committables %q", cs3)
	}
	commit(t, c, 2, cs2)
	commit(t, c, 3, nil)
	if err := w.Flush(true); err != nil {
		t.Fatalf("Flush(true): %v", err)
	}
	if got := readBytes(t, dir); !equalBytes(got, append(slices.Clone(first), second...)) {
		t.Fatalf("committed records after checkpoint 3: %q", got)
	}
	files, err := filesink.CommittedFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].CheckpointID != 1 || files[1].CheckpointID != 2 {
		t.Fatalf("committed files %+v", files)
	}
}

type event struct {
	Name string            `json:"name"`
	N    int               `json:"n"`
	Tags map[string]string `json:"tags,omitempty"`
}

func TestRoundTripCodecs(t *testing.T) {
	dir := t.TempDir()
	evs := []event{{Name: "a\nb", N: 1}, {Name: "", N: -7, Tags: map[string]string{"k\n": "\x00"}}}
	s := filesink.New[event](dir, nil) // codec.Default: Binary
	w := newWriter(t, s, 0, 1, 0)
	defer w.Close()
	writeAll(t, w, evs)
	commit(t, newCommitter(t, s, 0, 1), 1, prepare(t, w, 1))
	got, err := filesink.ReadCommitted[event](dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "a\nb" || got[1].N != -7 || got[1].Tags["k\n"] != "\x00" {
		t.Fatalf("read back %+v", got)
	}

	sdir := t.TempDir()
	ss := filesink.New(sdir, codec.String{})
	sw := newWriter(t, ss, 0, 1, 0)
	defer sw.Close()
	strs := []string{"", "line\n", "\x00\x01", "ünïcode"}
	writeAll(t, sw, strs)
	commit(t, newCommitter(t, ss, 0, 1), 1, prepare(t, sw, 1))
	gotS, err := filesink.ReadCommitted(sdir, codec.String{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gotS, strs) {
		t.Fatalf("strings read back %q, want %q", gotS, strs)
	}
}

func TestCommitIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	s := filesink.New[int](dir, nil)
	w := newWriter(t, s, 0, 1, 0)
	defer w.Close()
	writeAll(t, w, ints(0, 100))
	cs := prepare(t, w, 1)
	c := newCommitter(t, s, 0, 1)
	commit(t, c, 1, cs)
	commit(t, c, 1, cs)
	// A committer of another run (a restore) commits it again.
	commit(t, newCommitter(t, filesink.New[int](dir, nil), 0, 1), 1, cs)
	// The restored checkpoint 2 carries checkpoint 1's committable along.
	writeAll(t, w, ints(100, 110))
	cs2 := prepare(t, w, 2)
	commit(t, c, 2, append(slices.Clone(cs), cs2...))
	if got := readInts(t, dir); !slices.Equal(got, ints(0, 110)) {
		t.Fatalf("after repeated commits read %d records: %v", len(got), got)
	}
}

func TestConcurrentCommitsOfTheSameCommittable(t *testing.T) {
	dir := t.TempDir()
	s := filesink.New[int](dir, nil)
	var cs [][]byte
	for sub := range 3 {
		w := newWriter(t, s, sub, 3, 0)
		writeAll(t, w, ints(sub*10, sub*10+10))
		cs = append(cs, prepare(t, w, 1)...)
		w.Close()
	}
	const committers = 4
	errs := make([]error, committers)
	var wg sync.WaitGroup
	for i := range committers {
		c := newCommitter(t, s, i%3, 3)
		wg.Go(func() { errs[i] = c.Commit(context.Background(), 1, cs) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("committer %d: %v", i, err)
		}
	}
	if got := readInts(t, dir); !slices.Equal(got, ints(0, 30)) {
		t.Fatalf("read %v", got)
	}
}

// TestCrashBetweenPrepareAndCommit: the process dies after checkpoint 1
// was taken (and possibly completed) but before its commit, with a
// pre-committed checkpoint 2 that never completed and an open interval 3.
// The restored run starts its writer before its committer (the worst
// order for the cleanup rule), commits the restored committable and
// replays the rest: the output equals a run without the crash.
func TestCrashBetweenPrepareAndCommit(t *testing.T) {
	dir := t.TempDir()
	s := filesink.New[int](dir, nil)
	w := newWriter(t, s, 0, 1, 0)
	writeAll(t, w, ints(0, 10))
	cs1 := prepare(t, w, 1) // stored in checkpoint 1
	needed := parse(t, cs1[0]).InProgress
	writeAll(t, w, ints(10, 20))
	prepare(t, w, 2) // checkpoint 2 never completes
	writeAll(t, w, ints(20, 25))
	filesink.Crash[int](w)
	if n := len(inProgress(t, dir)); n != 3 {
		t.Fatalf("%d in-progress files after the crash, want 3", n)
	}
	if got := readInts(t, dir); len(got) != 0 {
		t.Fatalf("records visible before any commit: %v", got)
	}

	// Restore from checkpoint 1 in a new process.
	s2 := filesink.New[int](dir, nil)
	w2 := newWriter(t, s2, 0, 1, 1)
	defer w2.Close()
	if left := inProgress(t, dir); !slices.Equal(left, []string{needed}) {
		t.Fatalf("in-progress files after restore cleanup %v, want only %s", left, needed)
	}
	c2 := newCommitter(t, s2, 0, 1)
	commit(t, c2, 1, cs1)
	if got := readInts(t, dir); !slices.Equal(got, ints(0, 10)) {
		t.Fatalf("after committing the restored committable read %v", got)
	}
	writeAll(t, w2, ints(10, 25)) // the replay
	commit(t, c2, 2, prepare(t, w2, 2))
	if got := readInts(t, dir); !slices.Equal(got, ints(0, 25)) {
		t.Fatalf("after the replay read %v", got)
	}
}

func TestCommitHookFailureCommitsNothing(t *testing.T) {
	dir := t.TempDir()
	crash := errors.New("injected crash")
	var mu sync.Mutex
	var calls []int64
	s := filesink.New[int](dir, nil, filesink.WithCommitHook(func(id int64) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, id)
		if id == 2 {
			return crash
		}
		return nil
	}))
	w := newWriter(t, s, 0, 1, 0)
	defer w.Close()
	c := newCommitter(t, s, 0, 1)
	writeAll(t, w, ints(0, 5))
	commit(t, c, 1, prepare(t, w, 1))
	writeAll(t, w, ints(5, 9))
	cs2 := prepare(t, w, 2)
	err := c.Commit(context.Background(), 2, cs2)
	if !errors.Is(err, crash) || !strings.Contains(err.Error(), "checkpoint 2") {
		t.Fatalf("Commit(2) with failing hook: %v", err)
	}
	if got := readInts(t, dir); !slices.Equal(got, ints(0, 5)) {
		t.Fatalf("after the failed commit read %v", got)
	}
	// A new committer (after restore from checkpoint 2) commits it.
	commit(t, newCommitter(t, filesink.New[int](dir, nil), 0, 1), 2, cs2)
	if got := readInts(t, dir); !slices.Equal(got, ints(0, 9)) {
		t.Fatalf("after the restored commit read %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(calls, []int64{1, 2}) {
		t.Fatalf("hook calls %v, want [1 2]", calls)
	}
}

func TestCommitErrors(t *testing.T) {
	setup := func(t *testing.T) (string, sink.Committer, [][]byte, filesink.Committable) {
		dir := t.TempDir()
		s := filesink.New[int](dir, nil)
		w := newWriter(t, s, 2, 3, 0)
		t.Cleanup(func() { w.Close() })
		writeAll(t, w, ints(0, 50))
		cs := prepare(t, w, 7)
		return dir, newCommitter(t, s, 0, 3), cs, parse(t, cs[0])
	}
	t.Run("missing", func(t *testing.T) {
		dir, c, cs, p := setup(t)
		if err := os.Remove(filepath.Join(dir, ".inprogress", p.InProgress)); err != nil {
			t.Fatal(err)
		}
		err := c.Commit(context.Background(), 7, cs)
		if !errors.Is(err, filesink.ErrDataLoss) {
			t.Fatalf("Commit with the file gone: %v, want ErrDataLoss", err)
		}
		for _, want := range []string{p.InProgress, "part-2-7-0", "checkpoint 7"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		dir, c, cs, p := setup(t)
		path := filepath.Join(dir, ".inprogress", p.InProgress)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0x40
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		err = c.Commit(context.Background(), 7, cs)
		if !errors.Is(err, filesink.ErrCorrupt) || !strings.Contains(err.Error(), p.InProgress) {
			t.Fatalf("Commit of a corrupt file: %v, want ErrCorrupt naming %s", err, p.InProgress)
		}
		if got := readInts(t, dir); len(got) != 0 {
			t.Fatalf("corrupt file was published: %v", got)
		}
		if err := os.Truncate(path, p.Size-3); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(context.Background(), 7, cs); !errors.Is(err, filesink.ErrCorrupt) {
			t.Fatalf("Commit of a truncated file: %v, want ErrCorrupt", err)
		}
	})
	t.Run("conflict", func(t *testing.T) {
		dir, c, cs, _ := setup(t)
		final := filepath.Join(dir, "part-2-7-0")
		if err := os.WriteFile(final, []byte("something else"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := c.Commit(context.Background(), 7, cs)
		if !errors.Is(err, filesink.ErrConflict) || !strings.Contains(err.Error(), final) {
			t.Fatalf("Commit over another file: %v, want ErrConflict naming %s", err, final)
		}
		if b, _ := os.ReadFile(final); string(b) != "something else" {
			t.Fatalf("the other file was overwritten")
		}
	})
	t.Run("invalid", func(t *testing.T) {
		dir, c, cs, p := setup(t)
		badJSON := fmt.Appendf(nil, `{"v":1,"subtask":2,"checkpoint":7,"seq":0,"inprogress":%q,"final":"part-2-7-0","size":%d,"crc32c":%d,"records":%d}`,
			"../../etc/passwd", p.Size, p.CRC32C, p.Records)
		for _, b := range [][]byte{[]byte("not json"), badJSON, []byte(`{"v":9}`),
			[]byte(`{"v":1,"subtask":2,"checkpoint":-7,"seq":0,"inprogress":"x","final":"part-2--7-0","size":100}`)} {
			err := c.Commit(context.Background(), 7, append(slices.Clone(cs), b))
			if !errors.Is(err, filesink.ErrInvalidCommittable) || !strings.Contains(err.Error(), "checkpoint 7") {
				t.Errorf("Commit of %q: %v, want ErrInvalidCommittable", b, err)
			}
		}
		// Nothing of a batch with an invalid committable is committed.
		if got := readInts(t, dir); len(got) != 0 {
			t.Fatalf("read %v", got)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		dir, c, cs, _ := setup(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := c.Commit(ctx, 7, cs); !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit with a cancelled context: %v", err)
		}
		if got := readInts(t, dir); len(got) != 0 {
			t.Fatalf("read %v", got)
		}
		commit(t, c, 7, cs)
		if got := readInts(t, dir); !slices.Equal(got, ints(0, 50)) {
			t.Fatalf("read %v", got)
		}
	})
}

func TestUncommittedDataIsNeverVisible(t *testing.T) {
	dir := t.TempDir()
	s := filesink.New[int](dir, nil)
	c := newCommitter(t, s, 0, 2)
	defer c.Close()
	ws := []sink.PrecommittingWriter[int]{newWriter(t, s, 0, 2, 0), newWriter(t, s, 1, 2, 0)}
	var cs1, cs2 [][]byte
	for sub, w := range ws {
		defer w.Close()
		writeAll(t, w, ints(sub*100, sub*100+10))
		cs1 = append(cs1, prepare(t, w, 1)...)
		writeAll(t, w, ints(sub*100+10, sub*100+20))
		cs2 = append(cs2, prepare(t, w, 2)...)
		writeAll(t, w, ints(sub*100+20, sub*100+30)) // open interval
	}
	if got := readInts(t, dir); len(got) != 0 {
		t.Fatalf("visible before any commit: %v", got)
	}
	commit(t, c, 1, cs1)
	want := append(ints(0, 10), ints(100, 110)...)
	if got := readInts(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after commit 1 read %v, want %v", got, want)
	}
	by, err := filesink.ReadCommittedBySubtask[int](dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(by) != 2 || !slices.Equal(by[0], ints(0, 10)) || !slices.Equal(by[1], ints(100, 110)) {
		t.Fatalf("by subtask %v", by)
	}
	_ = cs2 // checkpoint 2 never completes
}

func TestConcurrentSubtasks(t *testing.T) {
	dir := t.TempDir()
	const par, checkpoints, perInterval = 4, 6, 200
	s := filesink.New[int](dir, nil)
	want := make(map[int][]int)
	errs := make(chan error, par)
	var wg sync.WaitGroup
	for sub := range par {
		w := newWriter(t, s, sub, par, 0)
		c := newCommitter(t, s, sub, par)
		base := sub * 1_000_000
		for cp := 1; cp <= checkpoints; cp++ {
			if cp%3 != 0 { // every third interval is empty
				want[sub] = append(want[sub], ints(base+cp*1000, base+cp*1000+perInterval)...)
			}
		}
		wg.Go(func() {
			defer c.Close()
			defer w.Close()
			for cp := int64(1); cp <= checkpoints; cp++ {
				if cp%3 != 0 {
					for i := range perInterval {
						if err := w.Write(base+int(cp)*1000+i, 0); err != nil {
							errs <- err
							return
						}
					}
				}
				cs, err := w.PrepareCommit(cp)
				if err != nil {
					errs <- err
					return
				}
				if err := c.Commit(context.Background(), cp, cs); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	by, err := filesink.ReadCommittedBySubtask[int](dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var all []int
	for sub := range par {
		if !slices.Equal(by[sub], want[sub]) {
			t.Errorf("subtask %d: read %d records, want %d", sub, len(by[sub]), len(want[sub]))
		}
		all = append(all, want[sub]...)
	}
	if got := readInts(t, dir); !slices.Equal(got, all) {
		t.Fatalf("ReadCommitted is not in subtask, checkpoint order")
	}
	if left := inProgress(t, dir); len(left) != 0 {
		t.Fatalf("in-progress files left: %v", left)
	}
}

// TestCleanupAfterScaleDown: a run with parallelism 4 crashes; the restore
// from checkpoint 1 runs with parallelism 2. Each new writer deletes the
// garbage of its own index and of the vanished indexes that map onto it,
// and keeps every file checkpoint 1 refers to, which a committer then
// publishes.
func TestCleanupAfterScaleDown(t *testing.T) {
	dir := t.TempDir()
	s := filesink.New[int](dir, nil)
	var cs1 [][]byte
	for sub := range 4 {
		w := newWriter(t, s, sub, 4, 0)
		writeAll(t, w, ints(sub*10, sub*10+5))
		cs1 = append(cs1, prepare(t, w, 1)...)
		writeAll(t, w, []int{-1})
		prepare(t, w, 2)
		writeAll(t, w, []int{-2})
		filesink.Crash[int](w)
	}
	if n := len(inProgress(t, dir)); n != 12 {
		t.Fatalf("%d in-progress files, want 12", n)
	}
	needed := make(map[string]bool)
	for _, b := range cs1 {
		needed[parse(t, b).InProgress] = true
	}
	s2 := filesink.New[int](dir, nil)
	w0 := newWriter(t, s2, 0, 2, 1)
	defer w0.Close()
	left := inProgress(t, dir)
	if len(left) != 4+4 { // 4 needed + 2 garbage files each of subtasks 1 and 3
		t.Fatalf("after writer 0 of 2 started: %v", left)
	}
	for _, name := range left {
		if !needed[name] && !strings.HasPrefix(name, "1-") && !strings.HasPrefix(name, "3-") {
			t.Fatalf("garbage %s of subtask 0 or 2 survived", name)
		}
	}
	w1 := newWriter(t, s2, 1, 2, 1)
	defer w1.Close()
	left = inProgress(t, dir)
	if len(left) != 4 {
		t.Fatalf("after both writers started: %v", left)
	}
	for _, name := range left {
		if !needed[name] {
			t.Fatalf("garbage %s survived", name)
		}
	}
	commit(t, newCommitter(t, s2, 1, 2), 1, cs1)
	want := slices.Concat(ints(0, 5), ints(10, 15), ints(20, 25), ints(30, 35))
	if got := readInts(t, dir); !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

func TestFreshStartDeletesOldInProgressFiles(t *testing.T) {
	dir := t.TempDir()
	s := filesink.New[int](dir, nil)
	old := newWriter(t, s, 0, 1, 0)
	writeAll(t, old, ints(0, 3))
	prepare(t, old, 1) // no checkpoint completed: never committed
	writeAll(t, old, ints(3, 6))
	filesink.Crash[int](old)
	w := newWriter(t, filesink.New[int](dir, nil), 0, 1, 0)
	defer w.Close()
	if left := inProgress(t, dir); len(left) != 0 {
		t.Fatalf("in-progress files after a fresh start: %v", left)
	}
}

func TestCloseKeepsHandedOverFiles(t *testing.T) {
	dir := t.TempDir()
	s := filesink.New[int](dir, nil)
	w := newWriter(t, s, 0, 1, 0)
	writeAll(t, w, ints(0, 4))
	cs := prepare(t, w, 1)
	writeAll(t, w, ints(4, 8))
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left := inProgress(t, dir); !slices.Equal(left, []string{parse(t, cs[0]).InProgress}) {
		t.Fatalf("in-progress files after Close: %v", left)
	}
	if err := w.Write(9, 0); !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if _, err := w.PrepareCommit(2); !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("PrepareCommit after Close: %v", err)
	}
	if err := w.Flush(true); !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
	c := newCommitter(t, s, 0, 1)
	commit(t, c, 1, cs)
	if got := readInts(t, dir); !slices.Equal(got, ints(0, 4)) {
		t.Fatalf("read %v", got)
	}
	c.Close()
	if err := c.Commit(context.Background(), 1, cs); !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("Commit after Close: %v", err)
	}
}

func TestInvalidConfiguration(t *testing.T) {
	s := filesink.New[int](t.TempDir(), nil)
	for _, ctx := range []sink.WriterContext{{Subtask: 0, Parallelism: 0}, {Subtask: 2, Parallelism: 2}, {Subtask: -1, Parallelism: 1}} {
		if _, err := s.NewWriter(ctx); !errors.Is(err, sink.ErrInvalidWriterContext) {
			t.Errorf("NewWriter(%+v): %v", ctx, err)
		}
		if _, err := s.NewCommitter(ctx); !errors.Is(err, sink.ErrInvalidWriterContext) {
			t.Errorf("NewCommitter(%+v): %v", ctx, err)
		}
	}
	if _, err := filesink.New[int]("", nil).NewWriter(sink.WriterContext{Parallelism: 1}); err == nil {
		t.Error("NewWriter with no directory succeeded")
	}
	if _, err := newWriter(t, s, 0, 1, 0).PrepareCommit(-1); err == nil {
		t.Error("PrepareCommit(-1) succeeded")
	}
}

func TestReadCommittedDetectsDamage(t *testing.T) {
	dir := t.TempDir()
	s := filesink.New[int](dir, nil)
	w := newWriter(t, s, 0, 1, 0)
	defer w.Close()
	writeAll(t, w, ints(0, 20))
	commit(t, newCommitter(t, s, 0, 1), 1, prepare(t, w, 1))
	path := filepath.Join(dir, "part-0-1-0")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damage := map[string][]byte{
		"truncated":   data[:len(data)-1],
		"no footer":   data[:len(data)-13],
		"flipped bit": func() []byte { d := slices.Clone(data); d[10] ^= 1; return d }(),
		"bad magic":   append([]byte("XLFS"), data[4:]...),
	}
	for name, d := range damage {
		if err := os.WriteFile(path, d, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := filesink.ReadCommitted[int](dir, nil); !errors.Is(err, filesink.ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: ReadCommitted: %v, want ErrCorrupt naming %s", name, err, path)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "part-x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := filesink.CommittedFiles(dir); !errors.Is(err, filesink.ErrCorrupt) {
		t.Errorf("CommittedFiles with a stray part- file: %v", err)
	}
}

// BenchmarkWrite measures writing 1 KiB records. Every 4096 records, off
// the clock, the interval is pre-committed and its file deleted, so that
// the benchmark does not fill the disk.
func BenchmarkWrite(b *testing.B) {
	dir := b.TempDir()
	s := filesink.New(dir, codec.Bytes{})
	w := newWriter(b, s, 0, 1, 0)
	defer w.Close()
	rec := bytes.Repeat([]byte("x"), 1024)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	n, id := 0, int64(0)
	for b.Loop() {
		if err := w.Write(rec, 0); err != nil {
			b.Fatal(err)
		}
		if n++; n%4096 == 0 {
			b.StopTimer()
			id++
			removeHandedOver(b, dir, prepare(b, w, id))
			b.StartTimer()
		}
	}
}

func removeHandedOver(b *testing.B, dir string, cs [][]byte) {
	for _, c := range cs {
		if err := os.Remove(filepath.Join(dir, ".inprogress", parse(b, c).InProgress)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointCycle measures one checkpoint interval of 1000 1 KiB
// records: write, PrepareCommit (fsync of file and directory) and Commit
// (checksum, rename, fsync of both directories). The committed file is
// deleted off the clock.
func BenchmarkCheckpointCycle(b *testing.B) {
	dir := b.TempDir()
	s := filesink.New(dir, codec.Bytes{})
	w := newWriter(b, s, 0, 1, 0)
	defer w.Close()
	c := newCommitter(b, s, 0, 1)
	rec := bytes.Repeat([]byte("x"), 1024)
	b.SetBytes(int64(len(rec)) * 1000)
	b.ReportAllocs()
	id := int64(0)
	for b.Loop() {
		id++
		for range 1000 {
			if err := w.Write(rec, 0); err != nil {
				b.Fatal(err)
			}
		}
		cs, err := w.PrepareCommit(id)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Commit(context.Background(), id, cs); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.Remove(filepath.Join(dir, parse(b, cs[0]).Final)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
