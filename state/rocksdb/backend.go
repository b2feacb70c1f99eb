package rocksdb

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/state"
)

// ErrLocked: the database directory is locked, i.e. another backend (in
// this process or another) has it open.
var ErrLocked = errors.New("RocksDB database locked: another backend has it open")

// metaKey is the key, in the default column family, of the database's
// metadata: its states and the list sequence counter.
var metaKey = []byte("sluice.meta")

const (
	dbDirName  = "db"
	chkDirName = "checkpoints"
	// spillDirName holds the SST files of write buffers until RocksDB
	// ingests them.
	spillDirName = "spill"
	tmpPrefix    = "restore-"
	cfPrefix     = "state:"
	metaFormat   = 1
)

// dbMeta is what a database records about itself, so that a database
// restored from an incremental checkpoint knows its states.
type dbMeta struct {
	Format         int               `json:"format"`
	MaxParallelism int               `json:"max_parallelism"`
	ListSeq        uint64            `json:"list_seq"`
	States         []state.StateMeta `json:"states"`
}

// cfState is a state's column family. A state restored but not registered
// yet has registered false; it is carried into snapshots as it is.
type cfState struct {
	meta       state.StateMeta
	cf         *grocksdb.ColumnFamilyHandle
	filter     *ttlFilter // TTL states only
	buf        *cfBuffer  // value-like states, unless Options.NativeMemtable
	registered bool
}

// newCFState returns the state of a column family, with write buffers for
// a value-like state.
func (b *Backend) newCFState(m state.StateMeta, cf *grocksdb.ColumnFamilyHandle, filter *ttlFilter) *cfState {
	s := &cfState{meta: m, cf: cf, filter: filter}
	if b.goBuffers() && m.Kind != state.KindList && m.Kind != state.KindMap {
		s.buf = newCFBuffer(filter == nil, b.opts.Changelog)
	}
	return s
}

// goBuffers reports whether value-like states write into Go write buffers
// rather than RocksDB's memtables.
func (b *Backend) goBuffers() bool { return !b.opts.NativeMemtable }

// Backend is the RocksDB keyed state backend of one subtask. It implements
// state.KeyedBackend and adds incremental checkpoints.
//
// What the runtime calls, and when:
//
//   - New at task start, then either nothing (fresh start), Restore with
//     full snapshots (savepoints, or checkpoints taken with incremental off),
//     or RestoreIncremental with the handles of the restored checkpoint that
//     overlap the subtask's key groups — before any state is created.
//   - For each checkpoint, on the task goroutine: SnapshotIncremental(id)
//     (the synchronous part: freeze the write buffers; a background job
//     then drains them, flushes and takes a local RocksDB checkpoint);
//     then, on any goroutine, Upload (which waits for that job) on the
//     returned IncrementalSnapshot, and
//     Release when done with it (always, also after a failed Upload). The
//     handle goes, Encode'd, into the checkpoint's metadata; its shared
//     files are registered with the shared state registry.
//   - For savepoints (and checkpoints when Incremental() is false):
//     Snapshot(id), then WriteTo on any goroutine.
//   - NotifyCheckpointComplete(id) and NotifyCheckpointAborted(id) on the
//     task goroutine as the coordinator decides: they maintain which
//     uploaded files later checkpoints may reference, and the local copies.
//   - Close at the end. A running asynchronous part makes Close wait for it;
//     one not started yet fails with state.ErrClosed.
//
// Everything but the asynchronous parts and the background write jobs
// (spill.go's enqueue) runs on the task goroutine.
type Backend struct {
	opts   Options
	log    *slog.Logger
	dbDir  string
	chkDir string
	// instance names this backend's local checkpoints.
	instance string

	nopts *nativeOptions
	// lock is the working directory's lock (lockDir), held until Close.
	lock *os.File
	// deferred is set while the empty database New leaves for its first
	// use is not open: ready opens it, a restore opens the checkpoint's
	// instead (one open, not an empty one first).
	deferred bool
	opens    int // databases opened (for tests)
	db       *grocksdb.DB
	metaCF   *grocksdb.ColumnFamilyHandle
	// cfOpts are the options of TTL states' column families (each with
	// its compaction filter), destroyed after the database closes.
	cfOpts []*grocksdb.Options

	maxPar int
	kgr    state.KeyGroupRange
	clock  state.Clock

	key       []byte
	kg        int
	inRange   bool
	keyPrefix []byte // key group | key of the current key
	kbuf      []byte // scratch: the key of an entry
	vbuf      []byte // scratch: a value read
	lbuf      []byte // scratch: a list entry written
	// points writes the single puts and deletions of the raw stores.
	points pointWriter

	states  map[string]*cfState
	order   []*cfState
	listSeq uint64
	// metaWritten is the metadata last written into the open database:
	// writeMeta skips an unchanged one, so that a checkpoint of value
	// writes alone has no metadata memtable to flush.
	metaWritten []byte
	metaWrites  int  // metadata writes (for tests)
	used        bool // a state was created: restore is refused
	restored    map[int]bool

	mu     sync.Mutex // guards the fields below, shared with async parts
	closed bool
	// dbGen counts the databases closed (closeDB): a checkpoint that
	// disabled a database's file deletions enables them again only on
	// the database it disabled them on. Guarded by mu.
	dbGen   uint64
	closing atomic.Bool
	writers sync.WaitGroup
	// spills counts the background write jobs (spills of full write
	// buffers, checkpoints' drains and RocksDB checkpoints).
	spills   sync.WaitGroup
	spillSeq atomic.Int64
	// lastJob is the done channel of the write job enqueued last, which
	// the next one waits for; lastCheckpoint that of the last checkpoint's
	// job until settle saw it done. Both are the task goroutine's.
	lastJob, lastCheckpoint chan struct{}
	// Test hooks: run before each background spill, and before waiting
	// for one.
	testHookBeforeSpill, testHookWaitSealed func()
	// testHookCheckpoint runs on a checkpoint's background job before
	// its drain (drained false) and before its RocksDB checkpoint;
	// testHookSettle before settle waits for a checkpoint's job.
	testHookCheckpoint func(id int64, drained bool)
	testHookSettle     func()
	snaps              map[*fullSnapshot]struct{}
	inc                incState
	cl                 changelogState
	// writeFailed: a background write of buffered entries failed; no
	// RocksDB checkpoint taken after it holds the state.
	writeFailed    atomic.Bool
	restoreFigures RestoreFigures
}

var _ state.KeyedBackend = (*Backend)(nil)

// New opens an empty backend in opts.Dir. A database left in Dir by an
// earlier run is discarded (state comes back through Restore and
// RestoreIncremental); a working directory another backend has (in this
// process or another) fails with ErrLocked, and a database whose CURRENT
// file names no manifest fails naming the directory. The empty database
// itself is opened at its first use, unless a restore opens the
// checkpoint's first.
func New(opts Options) (*Backend, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("rocksdb backend: working directory %q: %w", o.Dir, err)
	}
	o.Dir = dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("rocksdb backend: create working directory: %w", err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	b := &Backend{
		opts:     o,
		log:      o.Logger,
		dbDir:    filepath.Join(dir, dbDirName),
		chkDir:   filepath.Join(dir, chkDirName),
		instance: hex.EncodeToString(id[:]),
		maxPar:   o.MaxParallelism,
		kgr:      *o.KeyGroups,
		clock:    o.Clock,
		kg:       -1,
		states:   make(map[string]*cfState),
		restored: make(map[int]bool),
		snaps:    make(map[*fullSnapshot]struct{}),
	}
	b.inc.init()
	if b.lock, err = lockDir(dir, b.dbDir); err != nil {
		return nil, err
	}
	if b.nopts, err = newNativeOptions(o); err != nil {
		b.unlockDir()
		return nil, err
	}
	if err := b.discardStale(); err != nil {
		b.nopts.destroy()
		b.unlockDir()
		return nil, err
	}
	b.deferred = true
	return b, nil
}

// discardStale deletes the database and the write-buffer files an earlier
// run left in the working directory, whose lock this backend holds: no
// backend has them open. (Opening the database to find that out cost a
// restore with local recovery an open of the last run's database.)
func (b *Backend) discardStale() error {
	if current, err := os.ReadFile(filepath.Join(b.dbDir, "CURRENT")); err == nil {
		manifest := strings.TrimSpace(string(current))
		if _, err := os.Stat(filepath.Join(b.dbDir, manifest)); manifest == "" || strings.ContainsRune(manifest, os.PathSeparator) || err != nil {
			// The local files are never synced (nosync_env.go): after a
			// crash of the machine, a database of an earlier run may have
			// lost its CURRENT file's contents or its MANIFEST. One that
			// holds RocksDB's IDENTITY file is that; anything else is left
			// alone.
			if !isFile(filepath.Join(b.dbDir, "IDENTITY")) {
				return fmt.Errorf("rocksdb backend: database %s of an earlier run: its CURRENT file names manifest %q, which it does not hold: not a RocksDB database, left as it is",
					b.dbDir, manifest)
			}
			b.log.Warn("rocksdb backend: discarding the torn database of an earlier run", "dir", b.dbDir, "manifest", manifest)
		} else {
			// DestroyDb takes the database's own lock: one that a process
			// without the working directory's lock holds is still refused.
			if err := grocksdb.DestroyDb(b.dbDir, b.nopts.db); err != nil {
				return openErr(b.dbDir, err)
			}
			b.log.Info("rocksdb backend: discarded the database of an earlier run", "dir", b.dbDir)
		}
	}
	if err := os.RemoveAll(b.dbDir); err != nil {
		return fmt.Errorf("rocksdb backend: clear %s: %w", b.dbDir, err)
	}
	if err := os.RemoveAll(filepath.Join(b.opts.Dir, spillDirName)); err != nil {
		return fmt.Errorf("rocksdb backend: clear write buffer files: %w", err)
	}
	return nil
}

// isFile reports whether path is a regular file.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// ready opens the empty database New deferred, at the backend's first
// use; ErrClosed once the backend is closed (or a restore failed).
func (b *Backend) ready() error {
	if b.db != nil {
		return nil
	}
	if !b.deferred {
		return state.ErrClosed
	}
	b.deferred = false
	if err := b.openExisting(b.dbDir); err != nil {
		return err
	}
	return b.writeMeta()
}

// rawDB is an open database with its column families by name.
type rawDB struct {
	dir     string
	db      *grocksdb.DB
	metaCF  *grocksdb.ColumnFamilyHandle
	cfs     map[string]*grocksdb.ColumnFamilyHandle
	filters map[string]*ttlFilter
	opts    []*grocksdb.Options
}

func (r *rawDB) close() {
	for _, h := range r.cfs {
		h.Destroy()
	}
	r.metaCF.Destroy()
	r.db.Close()
	destroyOptions(r.opts, r.filters)
}

func destroyOptions(opts []*grocksdb.Options, filters map[string]*ttlFilter) {
	for _, f := range filters {
		f.cfg.Store(nil)
	}
	for _, o := range opts {
		o.Destroy()
	}
}

// cfOptions returns the options of a column family by its name: shared
// ones, or for a TTL state new ones with a compaction filter, which the
// caller destroys after the database closes.
func (b *Backend) cfOptions(name string) (opts *grocksdb.Options, filter *ttlFilter) {
	kind, _, _ := strings.Cut(strings.TrimPrefix(name, cfPrefix), ":")
	opts = b.nopts.cf
	if strings.HasPrefix(kind, "v") {
		opts = b.nopts.vcf
	}
	if !strings.HasSuffix(kind, "t") {
		return opts, nil
	}
	opts = opts.Clone()
	filter = &ttlFilter{}
	opts.SetCompactionFilter(filter)
	return opts, filter
}

// openRaw opens the database in dir (creating it if missing, unless
// readOnly) with all its column families.
func (b *Backend) openRaw(dir string, readOnly bool) (*rawDB, error) {
	names := []string{"default"}
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err == nil || readOnly {
		var err error
		if names, err = grocksdb.ListColumnFamilies(b.nopts.db, dir); err != nil {
			return nil, openErr(dir, err)
		}
	}
	r := &rawDB{dir: dir, cfs: make(map[string]*grocksdb.ColumnFamilyHandle), filters: make(map[string]*ttlFilter)}
	cfOpts := make([]*grocksdb.Options, len(names))
	for i, n := range names {
		if n == "default" {
			cfOpts[i] = b.nopts.db
			continue
		}
		opts, filter := b.cfOptions(n)
		cfOpts[i] = opts
		if filter != nil {
			r.filters[n] = filter
			r.opts = append(r.opts, opts)
		}
	}
	var handles []*grocksdb.ColumnFamilyHandle
	var err error
	if readOnly {
		r.db, handles, err = grocksdb.OpenDbForReadOnlyColumnFamilies(b.nopts.db, dir, names, cfOpts, false)
	} else {
		r.db, handles, err = grocksdb.OpenDbColumnFamilies(b.nopts.db, dir, names, cfOpts)
	}
	if err != nil {
		destroyOptions(r.opts, r.filters)
		return nil, openErr(dir, err)
	}
	for i, n := range names {
		if n == "default" {
			r.metaCF = handles[i]
		} else {
			r.cfs[n] = handles[i]
		}
	}
	return r, nil
}

// openExisting opens the database in dir (creating it if missing) as this
// backend's, and loads its states from its metadata.
func (b *Backend) openExisting(dir string) error {
	r, err := b.openRaw(dir, false)
	if err != nil {
		return err
	}
	b.opens++
	m, err := b.readMeta(r)
	if err != nil {
		r.close()
		return err
	}
	states := make(map[string]*cfState)
	var order []*cfState
	if m != nil {
		for _, sm := range m.States {
			cf := r.cfs[cfName(sm)]
			if cf == nil {
				r.close()
				return fmt.Errorf("rocksdb backend: database %s: state %q has no column family: %w", dir, sm.Name, state.ErrCorruptSnapshot)
			}
			s := b.newCFState(sm, cf, r.filters[cfName(sm)])
			if s.filter != nil {
				s.filter.set(sm, b.clock)
			}
			states[sm.Name] = s
			order = append(order, s)
			delete(r.cfs, cfName(sm))
		}
		b.listSeq = m.ListSeq
	}
	if len(r.cfs) > 0 {
		r.close()
		return fmt.Errorf("rocksdb backend: database %s has column families its metadata does not list: %w", dir, state.ErrCorruptSnapshot)
	}
	b.db, b.metaCF, b.states, b.order, b.cfOpts = r.db, r.metaCF, states, order, r.opts
	b.metaWritten = nil
	return nil
}

// openErr names the directory and classifies RocksDB's error: its LOCK
// file held ("While lock file: ..." from another process, "lock hold by
// current process" from this one) is ErrLocked, a "Corruption:" status a
// corrupt snapshot. (Matching "lock" alone took a "block checksum
// mismatch" for a lock.)
func openErr(dir string, err error) error {
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "corruption:"):
		return fmt.Errorf("rocksdb backend: open database %s: %w: %w", dir, state.ErrCorruptSnapshot, err)
	case strings.Contains(msg, "lock file") || strings.Contains(msg, "lock hold"):
		return fmt.Errorf("rocksdb backend: open database %s: %w: %w", dir, ErrLocked, err)
	}
	return fmt.Errorf("rocksdb backend: open database %s: %w", dir, err)
}

// closeDB closes the open database and its column family handles.
func (b *Backend) closeDB() {
	if b.db == nil {
		return
	}
	b.mu.Lock()
	b.dbGen++
	b.mu.Unlock()
	for _, s := range b.order {
		s.cf.Destroy()
	}
	b.metaCF.Destroy()
	b.db.Close()
	filters := make(map[string]*ttlFilter)
	for _, s := range b.order {
		if s.filter != nil {
			filters[s.meta.Name] = s.filter
		}
	}
	destroyOptions(b.cfOpts, filters)
	b.db, b.metaCF, b.cfOpts, b.metaWritten = nil, nil, nil, nil
	b.states, b.order = make(map[string]*cfState), nil
}

// readMeta reads a database's metadata; nil if it has none (new).
func (b *Backend) readMeta(r *rawDB) (*dbMeta, error) {
	sl, err := r.db.GetCF(b.nopts.ro, r.metaCF, metaKey)
	if err != nil {
		return nil, fmt.Errorf("rocksdb backend: database %s: read metadata: %w", r.dir, err)
	}
	defer sl.Free()
	if !sl.Exists() {
		if len(r.cfs) > 0 {
			return nil, fmt.Errorf("rocksdb backend: database %s has column families but no metadata: %w", r.dir, state.ErrCorruptSnapshot)
		}
		return nil, nil
	}
	var m dbMeta
	if err := json.Unmarshal(sl.Data(), &m); err != nil || m.Format != metaFormat {
		return nil, fmt.Errorf("rocksdb backend: database %s: metadata unreadable (format %d): %w", r.dir, m.Format, state.ErrCorruptSnapshot)
	}
	if m.MaxParallelism != b.maxPar {
		return nil, fmt.Errorf("rocksdb backend: database %s has max parallelism %d, backend %d: %w", r.dir, m.MaxParallelism, b.maxPar, state.ErrRestore)
	}
	return &m, nil
}

// writeMeta writes the database's metadata (its states, the list
// sequence) unless the database already holds the same.
func (b *Backend) writeMeta() error {
	m := dbMeta{Format: metaFormat, MaxParallelism: b.maxPar, ListSeq: b.listSeq}
	for _, s := range b.order {
		m.States = append(m.States, s.meta)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("rocksdb backend: encode metadata: %w", err)
	}
	if bytes.Equal(data, b.metaWritten) {
		return nil
	}
	b.settle()
	if err := b.db.PutCF(b.nopts.wo, b.metaCF, metaKey, data); err != nil {
		return fmt.Errorf("rocksdb backend: write metadata: %w", err)
	}
	b.metaWritten = data
	b.metaWrites++
	return nil
}

// Incremental reports whether checkpoints should be incremental
// (SnapshotIncremental) rather than full (Snapshot).
func (b *Backend) Incremental() bool { return !b.opts.DisableIncremental }

// Dir is the working directory.
func (b *Backend) Dir() string { return b.opts.Dir }

// SetCurrentKey implements state.KeyedBackend.
func (b *Backend) SetCurrentKey(key []byte, keyGroup int) {
	b.key = append(b.key[:0], key...)
	b.kg = keyGroup
	b.inRange = b.kgr.Contains(keyGroup) && (b.db != nil || b.deferred)
	b.keyPrefix = appendKeyPrefix(b.keyPrefix[:0], keyGroup, key)
}

// CurrentKey implements state.KeyedBackend.
func (b *Backend) CurrentKey() ([]byte, int) {
	if b.kg < 0 {
		return nil, -1
	}
	return b.key, b.kg
}

// KeyGroupRange implements state.KeyedBackend.
func (b *Backend) KeyGroupRange() state.KeyGroupRange { return b.kgr }

// MaxParallelism implements state.KeyedBackend.
func (b *Backend) MaxParallelism() int { return b.maxPar }

// CreateState implements state.KeyedBackend.
func (b *Backend) CreateState(d state.Descriptor) (any, error) {
	if err := b.ready(); err != nil {
		return nil, err
	}
	m, err := d.Meta()
	if err != nil {
		return nil, err
	}
	s := b.states[m.Name]
	switch {
	case s != nil:
		if err := s.meta.Compatible(m); err != nil {
			if !s.registered {
				return nil, fmt.Errorf("restored %w", err)
			}
			return nil, err
		}
		// The registration's TTL and codecs are recorded from now on (a
		// codec that reads the restored one's data writes its own).
		if s.meta.TTL != m.TTL || s.meta.ValueCodec != m.ValueCodec || s.meta.UserKeyCodec != m.UserKeyCodec {
			s.meta.TTL, s.meta.ValueCodec, s.meta.UserKeyCodec = m.TTL, m.ValueCodec, m.UserKeyCodec
			if s.filter != nil {
				s.filter.set(s.meta, b.clock)
			}
			if err := b.writeMeta(); err != nil {
				return nil, err
			}
		}
	default:
		if s, err = b.addState(m); err != nil {
			return nil, err
		}
	}
	s.registered = true
	b.used = true
	st := &store{b: b, s: s}
	switch m.Kind {
	case state.KindList:
		return d.Bind(listStore{st}, b.clock)
	case state.KindMap:
		return d.Bind(mapStore{st}, b.clock)
	default:
		return d.Bind(valueStore{st}, b.clock)
	}
}

// cfName is the column family of a state: its name, behind a prefix that
// says which options it is opened with: its kind (v for value, reducing
// and aggregating, l for list, m for map) and t if it has a TTL.
func cfName(m state.StateMeta) string {
	kind := "v"
	switch m.Kind {
	case state.KindList:
		kind = "l"
	case state.KindMap:
		kind = "m"
	}
	if m.TTL.Enabled() {
		kind += "t"
	}
	return cfPrefix + kind + ":" + m.Name
}

// newIterOptions returns read options for an iterator: in total order,
// which the hash-indexed memtables of value states need to iterate across
// keys.
func newIterOptions() *grocksdb.ReadOptions {
	ro := grocksdb.NewDefaultReadOptions()
	ro.SetTotalOrderSeek(true)
	return ro
}

// addState creates the column family of a new state and records it.
func (b *Backend) addState(m state.StateMeta) (*cfState, error) {
	b.settle() // a new column family is no part of a checkpoint in progress
	opts, filter := b.cfOptions(cfName(m))
	cf, err := b.db.CreateColumnFamily(opts, cfName(m))
	if err != nil {
		if filter != nil {
			opts.Destroy()
		}
		return nil, fmt.Errorf("state %q: create column family: %w", m.Name, err)
	}
	if filter != nil {
		b.cfOpts = append(b.cfOpts, opts)
		filter.set(m, b.clock)
	}
	s := b.newCFState(m, cf, filter)
	b.states[m.Name] = s
	b.order = append(b.order, s)
	return s, b.writeMeta()
}

// States implements state.KeyedBackend.
func (b *Backend) States() []state.StateMeta {
	var out []state.StateMeta
	for _, s := range b.order {
		if s.registered {
			out = append(out, s.meta)
		}
	}
	return out
}

// RestoredState implements state.RestoredStates.
func (b *Backend) RestoredState(name string) (state.StateMeta, bool) {
	if s := b.states[name]; s != nil && !s.registered {
		return s.meta, true
	}
	return state.StateMeta{}, false
}

// Keys implements state.KeyedBackend.
func (b *Backend) Keys(name string, namespace []byte, fn func(key []byte, keyGroup int) error) error {
	s := b.states[name]
	if s == nil || !s.registered {
		return fmt.Errorf("state %q: %w", name, state.ErrUnknownState)
	}
	if b.db == nil {
		return state.ErrClosed
	}
	if err := b.drain(s); err != nil {
		return err
	}
	now := b.clock.Now().UnixMilli()
	ro := newIterOptions()
	defer ro.Destroy()
	ro.SetIterateUpperBound(kgBound(b.kgr.End + 1))
	it := b.db.NewIteratorCF(ro, s.cf)
	defer it.Close()
	var last []byte // the prefix (key and namespace) reported last
	for it.Seek(kgBound(b.kgr.Start)); it.Valid(); it.Next() {
		k := it.Key().Data()
		e, err := parseEntryKey(k)
		if err != nil {
			return fmt.Errorf("state %q: %w", name, err)
		}
		if !bytes.Equal(e.ns, namespace) || (last != nil && bytes.Equal(e.prefix, last)) {
			continue
		}
		if !entryLive(s.meta, it.Value().Data(), now) {
			continue
		}
		last = append(last[:0], e.prefix...)
		if err := fn(bytes.Clone(e.key), e.kg); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("state %q: iterate keys: %w", name, err)
	}
	return nil
}

// entryLive reports whether an entry's value has anything unexpired: a
// value or map value with a live timestamp, a list entry with a live
// element.
func entryLive(m state.StateMeta, v []byte, now int64) bool {
	if !m.TTL.Enabled() {
		return true
	}
	if m.Kind == state.KindList {
		live := false
		_ = eachListElement(v, func(e []byte) error {
			if valueLive(m, e, now) {
				live = true
				return errStop
			}
			return nil
		})
		return live
	}
	return valueLive(m, v, now)
}

var errStop = errors.New("stop")

// valueLive checks the TTL timestamp of a value; one too short to have a
// timestamp counts as live (and fails where it is decoded).
func valueLive(m state.StateMeta, v []byte, now int64) bool {
	if !m.TTL.Enabled() {
		return true
	}
	ts, _, err := state.SplitTTLValue(v)
	return err != nil || !state.TTLExpired(m.TTL, ts, now)
}

// Close implements state.KeyedBackend: it waits for running asynchronous
// snapshot parts, fails those not started, closes the database and deletes
// it. Local checkpoints kept for local recovery stay.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.closing.Store(true)
	b.mu.Unlock()
	b.writers.Wait()
	b.spills.Wait()
	b.mu.Lock()
	for s := range b.snaps {
		s.releaseLocked()
	}
	b.mu.Unlock()
	b.inRange = false
	b.deferred = false
	b.closeDB()
	b.points.destroy()
	b.nopts.destroy()
	err := os.RemoveAll(b.dbDir)
	b.unlockDir()
	if err != nil {
		return fmt.Errorf("rocksdb backend: delete %s: %w", b.dbDir, err)
	}
	return nil
}
