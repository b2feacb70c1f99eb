package rocksdb

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/statetest"
)

// newTestBackend opens a backend in a temporary directory.
func newTestBackend(t testing.TB, opts Options) *Backend {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// suiteFactory makes the backends of the shared suite: default options but
// small write buffers (the hash memtables of value states have a bucket
// per 64 bytes of write buffer, which every snapshot scans).
func suiteFactory(t testing.TB, cfg statetest.Config) state.KeyedBackend {
	return newTestBackend(t, Options{MaxParallelism: cfg.MaxParallelism, KeyGroups: cfg.KeyGroups, Clock: cfg.Clock, WriteBufferSize: 4 << 20})
}

func TestSuite(t *testing.T) {
	statetest.Run(t, suiteFactory)
}

// TestSuiteSmallWriteBuffer runs the suite with the smallest write
// buffers, which fill after a few hundred entries: value states then also
// read from sealed buffers and from RocksDB, spilled in the background.
func TestSuiteSmallWriteBuffer(t *testing.T) {
	statetest.Run(t, func(t testing.TB, cfg statetest.Config) state.KeyedBackend {
		return newTestBackend(t, Options{MaxParallelism: cfg.MaxParallelism, KeyGroups: cfg.KeyGroups, Clock: cfg.Clock,
			WriteBufferSize: minWriteBufferSize})
	})
}

// TestSuiteNativeMemtable runs the suite with value states written into
// RocksDB's hash memtables, updated in place.
func TestSuiteNativeMemtable(t *testing.T) {
	statetest.Run(t, func(t testing.TB, cfg statetest.Config) state.KeyedBackend {
		return newTestBackend(t, Options{MaxParallelism: cfg.MaxParallelism, KeyGroups: cfg.KeyGroups, Clock: cfg.Clock,
			WriteBufferSize: 4 << 20, NativeMemtable: true})
	})
}

// TestSuiteSkipListMemtable runs the suite with RocksDB's default memtable
// for value states too.
func TestSuiteSkipListMemtable(t *testing.T) {
	statetest.Run(t, func(t testing.TB, cfg statetest.Config) state.KeyedBackend {
		return newTestBackend(t, Options{MaxParallelism: cfg.MaxParallelism, KeyGroups: cfg.KeyGroups, Clock: cfg.Clock,
			WriteBufferSize: 4 << 20, NativeMemtable: true, SkipListMemtable: true, CompactionStyle: LevelCompaction})
	})
}

// TestSuiteNoInplaceUpdate runs the suite with native memtables without
// in-place updates, where full snapshots are RocksDB snapshots rather than
// local checkpoints.
func TestSuiteNoInplaceUpdate(t *testing.T) {
	statetest.Run(t, func(t testing.TB, cfg statetest.Config) state.KeyedBackend {
		return newTestBackend(t, Options{MaxParallelism: cfg.MaxParallelism, KeyGroups: cfg.KeyGroups, Clock: cfg.Clock,
			NativeMemtable: true, NoInplaceUpdate: true})
	})
}

// TestInplaceUpdateKeepsMemtableSize: rewriting the same keys again and
// again adds no entries to the active memtable (values are overwritten in
// place), and a full snapshot taken in between still holds the values of
// its time.
func TestInplaceUpdateKeepsMemtableSize(t *testing.T) {
	for _, noInplace := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoInplaceUpdate=%v", noInplace), func(t *testing.T) {
			b := newTestBackend(t, Options{NativeMemtable: true, NoInplaceUpdate: noInplace})
			v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"})
			if err != nil {
				t.Fatal(err)
			}
			const keys = 1000
			write := func(val int64) {
				for k := range keys {
					setKey(b, fmt.Sprint("k", k))
					if err := v.Update(val); err != nil {
						t.Fatal(err)
					}
				}
			}
			cf := b.states["v"].cf
			entries := func() uint64 {
				n, ok := b.db.GetIntPropertyCF("rocksdb.num-entries-active-mem-table", cf)
				if !ok {
					t.Fatal("no rocksdb.num-entries-active-mem-table")
				}
				return n
			}
			write(1)
			snap, err := b.Snapshot(1)
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Release()
			base := entries()
			for i := int64(2); i <= 11; i++ {
				write(i)
			}
			added := entries() - base
			if noInplace && added != 10*keys {
				t.Errorf("without in-place updates 10 rewrites of %d keys added %d memtable entries, want %d", keys, added, 10*keys)
			}
			if !noInplace && added > keys {
				t.Errorf("with in-place updates 10 rewrites of %d keys added %d memtable entries, want at most %d", keys, added, keys)
			}
			var buf bytes.Buffer
			if _, err := snap.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			r := newTestBackend(t, Options{NativeMemtable: true, NoInplaceUpdate: noInplace})
			if err := r.Restore(&buf); err != nil {
				t.Fatal(err)
			}
			rv, err := state.GetValueState(r, state.ValueStateDescriptor[int64]{Name: "v"})
			if err != nil {
				t.Fatal(err)
			}
			for k := range keys {
				setKey(r, fmt.Sprint("k", k))
				if got, ok, err := rv.Value(); err != nil || !ok || got != 1 {
					t.Fatalf("k%d in the snapshot = %d %v %v, want 1 (the value at the snapshot)", k, got, ok, err)
				}
				setKey(b, fmt.Sprint("k", k))
				if got, ok, err := v.Value(); err != nil || !ok || got != 11 {
					t.Fatalf("k%d in the backend = %d %v %v, want 11", k, got, ok, err)
				}
			}
		})
	}
}

// TestCloseWithSnapshots: Close waits for a snapshot being written; a
// snapshot not started fails with ErrClosed after Close, and releasing it
// is harmless.
func TestCloseWithSnapshots(t *testing.T) {
	b := newTestBackend(t, Options{})
	v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"})
	check(t, err)
	for i := range 2000 {
		setKey(b, keyName(i))
		check(t, v.Update(int64(i)))
	}
	running, err := b.Snapshot(1)
	check(t, err)
	idle, err := b.Snapshot(2)
	check(t, err)
	w := &gateWriter{entered: make(chan struct{}), open: make(chan struct{})}
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	writeDone := make(chan error)
	go func() {
		_, err := running.WriteTo(w)
		note("write")
		writeDone <- err
	}()
	<-w.entered // the asynchronous part is running
	closeDone := make(chan error)
	go func() {
		err := b.Close()
		note("close")
		closeDone <- err
	}()
	close(w.open)
	werr := <-writeDone
	check(t, <-closeDone)
	if werr != nil && !strings.Contains(werr.Error(), "closing") {
		t.Fatalf("snapshot written while closing: %v", werr)
	}
	if fmt.Sprint(order) != "[write close]" {
		t.Fatalf("order %v: Close returned before the running snapshot", order)
	}
	if _, err := idle.WriteTo(io.Discard); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("snapshot written after Close: %v, want ErrClosed", err)
	}
	idle.Release()
	running.Release()
	if _, err := b.Snapshot(3); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Snapshot after Close: %v", err)
	}
	setKey(b, "k")
	if err := v.Update(1); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Update after Close: %v", err)
	}
}

// gateWriter blocks its first Write until open is closed.
type gateWriter struct {
	entered, open chan struct{}
	once          sync.Once
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.once.Do(func() { close(g.entered); <-g.open })
	return len(p), nil
}

func closeLater(t testing.TB, b state.KeyedBackend) {
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func setKey(b state.KeyedBackend, k string) {
	kb := []byte(k)
	b.SetCurrentKey(kb, state.KeyGroupFor(kb, b.MaxParallelism()))
}

func snapshotBytes(t testing.TB, b state.KeyedBackend, id int64) []byte {
	t.Helper()
	snap, err := b.Snapshot(id)
	check(t, err)
	var buf bytes.Buffer
	_, err = snap.WriteTo(&buf)
	check(t, err)
	snap.Release()
	return buf.Bytes()
}

// TestSavepointAcrossBackends: a heap savepoint restores into RocksDB, and
// a RocksDB savepoint of that into the heap backend, with every kind of
// state and namespaces.
func TestSavepointAcrossBackends(t *testing.T) {
	heap, err := state.NewHeapKeyedBackend(state.HeapOptions{})
	check(t, err)
	closeLater(t, heap)
	type descs struct {
		v state.ValueStateDescriptor[int64]
		l state.ListStateDescriptor[string]
		m state.MapStateDescriptor[string, int64]
		r state.ReducingStateDescriptor[int64]
	}
	d := descs{
		v: state.ValueStateDescriptor[int64]{Name: "v"},
		l: state.ListStateDescriptor[string]{Name: "l"},
		m: state.MapStateDescriptor[string, int64]{Name: "m"},
		r: state.ReducingStateDescriptor[int64]{Name: "r", Reduce: func(a, b int64) int64 { return a + b }},
	}
	const n = 500
	write := func(b state.KeyedBackend) {
		v, _ := state.GetValueState(b, d.v)
		l, _ := state.GetListState(b, d.l)
		m, _ := state.GetMapState(b, d.m)
		r, _ := state.GetReducingState(b, d.r)
		for i := range n {
			setKey(b, fmt.Sprint("key", i))
			for _, ns := range [][]byte{nil, []byte("window")} {
				v.SetNamespace(ns)
				l.SetNamespace(ns)
				m.SetNamespace(ns)
				r.SetNamespace(ns)
				check(t, v.Update(int64(i)))
				check(t, l.AddAll([]string{"a", fmt.Sprint(i)}))
				check(t, m.Put("x", int64(i)))
				check(t, m.Put("y", int64(-i)))
				check(t, r.Add(int64(i)))
				check(t, r.Add(1))
			}
		}
	}
	verify := func(b state.KeyedBackend, what string) {
		t.Helper()
		v, err := state.GetValueState(b, d.v)
		check(t, err)
		l, err := state.GetListState(b, d.l)
		check(t, err)
		m, err := state.GetMapState(b, d.m)
		check(t, err)
		r, err := state.GetReducingState(b, d.r)
		check(t, err)
		for i := range n {
			setKey(b, fmt.Sprint("key", i))
			for _, ns := range [][]byte{nil, []byte("window")} {
				v.SetNamespace(ns)
				l.SetNamespace(ns)
				m.SetNamespace(ns)
				r.SetNamespace(ns)
				if got, ok, err := v.Value(); err != nil || !ok || got != int64(i) {
					t.Fatalf("%s: key%d value = %d %v %v", what, i, got, ok, err)
				}
				if got, err := l.Get(); err != nil || fmt.Sprint(got) != fmt.Sprintf("[a %d]", i) {
					t.Fatalf("%s: key%d list = %v %v", what, i, got, err)
				}
				got := map[string]int64{}
				check(t, m.Iterate(func(k string, v int64) bool { got[k] = v; return true }))
				if len(got) != 2 || got["x"] != int64(i) || got["y"] != int64(-i) {
					t.Fatalf("%s: key%d map = %v", what, i, got)
				}
				if got, ok, err := r.Get(); err != nil || !ok || got != int64(i+1) {
					t.Fatalf("%s: key%d reducing = %d %v %v", what, i, got, ok, err)
				}
			}
		}
	}
	write(heap)
	rdb := newTestBackend(t, Options{})
	closeLater(t, rdb)
	check(t, rdb.Restore(bytes.NewReader(snapshotBytes(t, heap, 1))))
	verify(rdb, "heap -> rocksdb")

	heap2, err := state.NewHeapKeyedBackend(state.HeapOptions{})
	check(t, err)
	closeLater(t, heap2)
	check(t, heap2.Restore(bytes.NewReader(snapshotBytes(t, rdb, 2))))
	verify(heap2, "heap -> rocksdb -> heap")

	// And a RocksDB backend written directly restores into the heap.
	rdb2 := newTestBackend(t, Options{})
	closeLater(t, rdb2)
	write(rdb2)
	heap3, err := state.NewHeapKeyedBackend(state.HeapOptions{})
	check(t, err)
	closeLater(t, heap3)
	check(t, heap3.Restore(bytes.NewReader(snapshotBytes(t, rdb2, 3))))
	verify(heap3, "rocksdb -> heap")
}

// TestLockHeld: a second backend on the working directory of an open one
// fails with ErrLocked, naming the directory.
func TestLockHeld(t *testing.T) {
	dir := t.TempDir()
	b := newTestBackend(t, Options{Dir: dir})
	closeLater(t, b)
	_, err := New(Options{Dir: dir})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, "db")) {
		t.Fatalf("error %q does not name the directory %s", err, dir)
	}
	// The first backend is unharmed.
	v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"})
	check(t, err)
	setKey(b, "k")
	check(t, v.Update(7))
	if got, ok, _ := v.Value(); !ok || got != 7 {
		t.Fatalf("value after the failed second open = %d %v", got, ok)
	}
}

// TestHelperHoldLock is the other process of TestLockHeldOtherProcess: it
// opens a backend in $SLUICE_ROCKSDB_HOLD, says "ready" and holds it until
// its standard input closes.
func TestHelperHoldLock(t *testing.T) {
	dir := os.Getenv("SLUICE_ROCKSDB_HOLD")
	if dir == "" {
		t.Skip("helper process of TestLockHeldOtherProcess")
	}
	b, err := New(Options{Dir: dir})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	check(t, b.Close())
}

// TestLockHeldOtherProcess: a working directory another process has open
// fails with ErrLocked naming the directory; once that process is gone, it
// opens.
func TestLockHeldOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "SLUICE_ROCKSDB_HOLD="+dir)
	stdin, err := cmd.StdinPipe()
	check(t, err)
	stdout, err := cmd.StdoutPipe()
	check(t, err)
	check(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		stdin.Close()
		_ = cmd.Wait()
		t.Fatalf("helper process: %q %v", line, err)
	}
	_, err = New(Options{Dir: dir})
	stdin.Close()
	check(t, cmd.Wait())
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), filepath.Join(dir, "db")) {
		t.Fatalf("open while another process holds it: %v, want ErrLocked naming %s", err, dir)
	}
	t.Log(err)
	b := newTestBackend(t, Options{Dir: dir})
	check(t, b.Close())
}

// TestWrongFormat: a working directory holding something that is not a
// RocksDB database fails to open, naming the directory and the cause.
func TestWrongFormat(t *testing.T) {
	dir := t.TempDir()
	check(t, os.MkdirAll(filepath.Join(dir, "db"), 0o755))
	check(t, os.WriteFile(filepath.Join(dir, "db", "CURRENT"), []byte("MANIFEST-000042\n"), 0o644))
	_, err := New(Options{Dir: dir})
	if err == nil {
		t.Fatal("opened a directory that is not a database")
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, "db")) || !strings.Contains(err.Error(), "MANIFEST-000042") {
		t.Fatalf("error %q does not name the directory and the cause", err)
	}
	if errors.Is(err, ErrLocked) {
		t.Fatalf("wrong format reported as locked: %v", err)
	}
}

// Closing a database does not flush its memtables: every database the
// backend closes is deleted after, and the flush (to SST files, synced)
// was work thrown away when a failover cancels the task.
func TestCloseDoesNotFlush(t *testing.T) {
	b := newTestBackend(t, Options{})
	v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"})
	check(t, err)
	for i := range 100 {
		setKey(b, fmt.Sprint("k", i))
		check(t, v.Update(int64(i)))
	}
	check(t, b.drainAll()) // the writes are in RocksDB's memtables
	dbDir := b.dbDir
	b.closeDB()
	ssts, err := filepath.Glob(filepath.Join(dbDir, "*.sst"))
	check(t, err)
	if len(ssts) != 0 {
		t.Fatalf("closing the database wrote %v", ssts)
	}
	check(t, b.Close())
}

// TestStaleDatabaseDiscarded: the database a crashed run left behind is
// discarded by New: a new backend starts empty.
func TestStaleDatabaseDiscarded(t *testing.T) {
	b := newTestBackend(t, Options{LocalRecovery: true}) // a local copy to link from
	v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"})
	check(t, err)
	setKey(b, "k")
	check(t, v.Update(1))
	// What a crashed run leaves: a database with state in Dir/db.
	snap, err := b.SnapshotIncremental(1)
	check(t, err)
	dir := t.TempDir()
	check(t, os.MkdirAll(filepath.Join(dir, "db"), 0o755))
	check(t, snap.wait())
	var names []HandleFile
	for _, f := range snap.files {
		names = append(names, HandleFile{Name: f.name})
	}
	check(t, linkFiles(snap.dir, filepath.Join(dir, "db"), names))
	snap.Release()
	check(t, b.Close())
	// and a write buffer's SST file it had not ingested yet.
	stale := filepath.Join(dir, spillDirName, "1.sst")
	check(t, os.MkdirAll(filepath.Dir(stale), 0o755))
	check(t, os.WriteFile(stale, []byte("partial"), 0o644))

	b2 := newTestBackend(t, Options{Dir: dir})
	closeLater(t, b2)
	if len(b2.order) != 0 {
		t.Fatalf("new backend has %d states from the stale database", len(b2.order))
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale write buffer file %s still there: %v", stale, err)
	}
	v2, err := state.GetValueState(b2, state.ValueStateDescriptor[int64]{Name: "v"})
	check(t, err)
	setKey(b2, "k")
	if _, ok, _ := v2.Value(); ok {
		t.Fatal("value from the stale database")
	}
}

func TestOptionsSet(t *testing.T) {
	var o Options
	for k, v := range map[string]string{
		"state.backend.rocksdb.block.cache-size":                       "256 mb",
		"state.backend.rocksdb.writebuffer.size":                       "32MB",
		"state.backend.rocksdb.writebuffer.count":                      "3",
		"state.backend.rocksdb.compression.per.level":                  "NO_COMPRESSION;LZ4_COMPRESSION;ZSTD_COMPRESSION",
		"state.backend.rocksdb.block.blocksize":                        "16kb",
		"state.backend.incremental":                                    "false",
		"state.backend.local-recovery":                                 "true",
		"state.backend.rocksdb.use-bloom-filter":                       "true",
		"state.backend.rocksdb.compaction.style":                       "LEVEL",
		"state.backend.rocksdb.compaction.level.target-file-size-base": "8m",
		"state.backend.rocksdb.go-write-buffer.enabled":                "false",
	} {
		check(t, o.Set(k, v))
	}
	if o.BlockCacheSize != 256<<20 || o.WriteBufferSize != 32<<20 || o.WriteBufferCount != 3 || o.BlockSize != 16<<10 ||
		!o.DisableIncremental || !o.LocalRecovery || o.NoBloomFilter || o.CompactionStyle != LevelCompaction || o.TargetFileSize != 8<<20 ||
		!o.NativeMemtable {
		t.Fatalf("options = %+v", o)
	}
	if fmt.Sprint(o.Compression) != "[none lz4 zstd]" {
		t.Fatalf("compression = %v", o.Compression)
	}
	if err := o.Set("state.backend.rocksdb.nope", "1"); !errors.Is(err, ErrUnknownOption) {
		t.Fatalf("unknown option: %v", err)
	}
	if err := o.Set("state.backend.rocksdb.writebuffer.size", "lots"); err == nil {
		t.Fatal("bad memory size accepted")
	}
	if err := o.Set("state.backend.rocksdb.compression.per.level", "BROTLI"); err == nil {
		t.Fatal("unknown compression accepted")
	}
	// A backend opens with them.
	o.Dir = t.TempDir()
	b, err := New(o)
	check(t, err)
	check(t, b.Close())
	if b.Incremental() {
		t.Fatal("Incremental() with state.backend.incremental=false")
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without a directory")
	}
	// Memtable options that only mean something with NativeMemtable.
	for _, o := range []Options{{SkipListMemtable: true}, {NoInplaceUpdate: true}} {
		o.Dir = t.TempDir()
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), "NativeMemtable") {
			t.Fatalf("New(%+v) = %v, want an error naming NativeMemtable", o, err)
		}
	}
}

func TestKeyLayout(t *testing.T) {
	// Prefixes of different (key, ns) never prefix one another, and
	// parse back.
	pairs := [][2]string{{"", ""}, {"a", ""}, {"", "a"}, {"ab", "c"}, {"a", "bc"}, {strings.Repeat("k", 200), "n"}}
	var prefixes [][]byte
	for _, p := range pairs {
		k := appendNamespace(appendKeyPrefix(nil, 7, []byte(p[0])), []byte(p[1]))
		e, err := parseEntryKey(append(k, "suffix"...))
		check(t, err)
		if e.kg != 7 || string(e.key) != p[0] || string(e.ns) != p[1] || string(e.suffix) != "suffix" || !bytes.Equal(e.prefix, k) {
			t.Fatalf("parse %q: %+v", p, e)
		}
		prefixes = append(prefixes, k)
	}
	for i, a := range prefixes {
		for j, b := range prefixes {
			if i != j && bytes.HasPrefix(b, a) {
				t.Fatalf("prefix of %q is a prefix of %q's", pairs[i], pairs[j])
			}
		}
	}
	if got := prefixEnd([]byte{1, 0xff, 0xff}); !bytes.Equal(got, []byte{2}) {
		t.Fatalf("prefixEnd = %x", got)
	}
	if prefixEnd([]byte{0xff}) != nil {
		t.Fatal("prefixEnd of all 0xff")
	}
	if _, err := parseEntryKey([]byte{0, 1, 5, 'a'}); err == nil {
		t.Fatal("truncated key parsed")
	}
}

// openErr tells a held lock from a corrupt file by RocksDB's statuses; a
// corrupt block ("block checksum mismatch") is not a lock.
func TestOpenErrClassifies(t *testing.T) {
	for _, c := range []struct {
		msg             string
		locked, corrupt bool
	}{
		{"IO error: While lock file: /x/db/LOCK: Resource temporarily unavailable", true, false},
		{"IO error: lock hold by current process, acquire time 1 acquiring thread 2: /x/db/LOCK: No locks available", true, false},
		{"Corruption: block checksum mismatch: stored = 1, computed = 2 in /x/db/000012.sst offset 0 size 100", false, true},
		{"Corruption: CURRENT file does not end with newline", false, true},
		{"IO error: No such file or directory: /x/db/MANIFEST-000042", false, false},
	} {
		err := openErr("/x/db", errors.New(c.msg))
		if errors.Is(err, ErrLocked) != c.locked || errors.Is(err, state.ErrCorruptSnapshot) != c.corrupt {
			t.Errorf("openErr(%q) = %v; want locked %v, corrupt %v", c.msg, err, c.locked, c.corrupt)
		}
		if !strings.Contains(err.Error(), "/x/db") {
			t.Errorf("openErr(%q) = %v, does not name the directory", c.msg, err)
		}
	}
}
