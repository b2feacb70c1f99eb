package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/checkpoint/snapshot"
)

// DefaultInlineThreshold is Flink's execution.checkpointing.data-inline-threshold
// (20 KiB): state streams at most this long are kept in _metadata.
const DefaultInlineThreshold = 20 << 10

// CommitProtocol numbers what a checkpoint's commit makes durable that
// the tasks' writers left to it. 2: the shared files written for the
// checkpoint (StateHandle.DurableAt) besides its private files. A
// coordinator that commits by an older protocol must not run with
// workers that write by this one (it would publish _metadata over shared
// files never fsynced), so the cluster's fingerprint includes it.
const CommitProtocol = 2

const (
	checkpointPrefix = "chk-"
	sharedDirName    = "shared"
	sharedPrefix     = sharedDirName + "/"
	savepointPrefix  = "savepoint-"
	tempSuffix       = ".inprogress-"
)

// Options tune a Storage.
type Options struct {
	// InlineThreshold: a state stream of at most this many bytes is kept
	// inline in _metadata rather than in a file of its own. 0 writes every
	// stream to a file; pass DefaultInlineThreshold for Flink's behaviour.
	InlineThreshold int
	// Logger receives the fallback and cleanup lines; nil uses
	// slog.Default().
	Logger *slog.Logger
	// Schemes open URL locations of their scheme before the registered
	// ones (RegisterScheme): a job's own S3 configuration.
	Schemes map[string]OpenFunc
}

// Opener opens the backend rooted at a location: a directory, or (with an
// object store) a URL such as s3://bucket/prefix. Storage uses it for
// savepoint directories, which live outside the job's root.
type Opener func(location string) (Backend, error)

// Storage is the checkpoint storage of one job: the objects under the
// job's root (<dir>/<job>/), on a Backend.
type Storage struct {
	b      Backend
	open   Opener
	job    string
	inline int
	log    *slog.Logger
}

// New opens (creating it if needed) the storage of job under the checkpoint
// directory dir: for a file path (or file:// URL), the POSIX backend of
// fsys rooted at <dir>/<job>; for another URL (s3://bucket/prefix), the
// backend its scheme is registered with (opts.Schemes first) rooted at
// <dir>/<job>. Savepoint directories are opened the same way.
func New(fsys FS, dir, job string, opts Options) (*Storage, error) {
	if dir == "" {
		return nil, errors.New("checkpoint storage: empty checkpoint directory (execution.checkpointing.dir)")
	}
	if !snapshot.IsPlainName(job) {
		return nil, fmt.Errorf("checkpoint storage: job name %q must be a plain file name", job)
	}
	open := func(location string) (Backend, error) {
		return Open(context.Background(), fsys, location, opts.Schemes)
	}
	root, err := open(JoinLocation(dir, job))
	if err != nil {
		return nil, err
	}
	return NewOnBackend(root, open, job, opts)
}

// NewOnBackend opens the storage of job on root, the backend rooted at the
// job's own prefix (<checkpoint dir>/<job>/); open opens the backends of
// savepoint directories.
func NewOnBackend(root Backend, open Opener, job string, opts Options) (*Storage, error) {
	if !snapshot.IsPlainName(job) {
		return nil, fmt.Errorf("checkpoint storage: job name %q must be a plain file name", job)
	}
	if opts.InlineThreshold < 0 {
		return nil, fmt.Errorf("checkpoint storage: negative inline threshold %d", opts.InlineThreshold)
	}
	s := &Storage{b: root, open: open, job: job, inline: opts.InlineThreshold, log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	if d, ok := root.(DirMaker); ok {
		if err := d.MakeDir(s.ctx(), sharedPrefix); err != nil {
			return nil, fmt.Errorf("checkpoint storage: create %s: %w", root.Path(sharedDirName), err)
		}
	}
	return s, nil
}

// ctx is the context of backend calls. Storage's own methods take none
// yet; an object store's calls will be bounded by the caller's context
// once they do.
func (s *Storage) ctx() context.Context { return context.Background() }

// Backend is the backend rooted at the job's prefix.
func (s *Storage) Backend() Backend { return s.b }

// JobDir is <dir>/<job>, as the backend names it.
func (s *Storage) JobDir() string { return s.b.Path("") }

// CheckpointDir is the directory (key prefix) of checkpoint id, as the
// backend names it.
func (s *Storage) CheckpointDir(id int64) string { return s.b.Path(checkpointKey(id)) }

func checkpointKey(id int64) string { return checkpointPrefix + strconv.FormatInt(id, 10) }

// Checkpoint returns the location of checkpoint id, making its directory
// on a backend that has directories. Tasks and the coordinator may call it
// concurrently for the same id.
func (s *Storage) Checkpoint(id int64) (*Location, error) {
	prefix := checkpointKey(id) + "/"
	if d, ok := s.b.(DirMaker); ok {
		if err := d.MakeDir(s.ctx(), prefix); err != nil {
			return nil, fmt.Errorf("checkpoint storage: create %s: %w", s.b.Path(prefix), err)
		}
	}
	return &Location{st: s, b: s.b, id: id, prefix: prefix}, nil
}

// NewSavepointDir picks a fresh savepoint directory under parent
// (execution.checkpointing.savepoint-dir): savepoint-<job>-<random>. It
// does not create it; SavepointAt does.
func (s *Storage) NewSavepointDir(parent string) (string, error) {
	if parent == "" {
		return "", errors.New("checkpoint storage: no savepoint directory given, and neither execution.checkpointing.savepoint-dir " +
			"nor execution.checkpointing.dir (savepoints then go to <dir>/savepoints) is set")
	}
	job := s.job
	if len(job) > 12 {
		job = job[:12]
	}
	return JoinLocation(parent, savepointPrefix+job+"-"+randomSuffix()), nil
}

// JoinLocation appends name to a location: a directory or a URL.
func JoinLocation(parent, name string) string {
	if IsURL(parent) {
		return strings.TrimRight(parent, "/") + "/" + name
	}
	return filepath.Join(parent, name)
}

// splitLocation cuts a location into its parent and its last element.
func splitLocation(location string) (parent, name string) {
	if IsURL(location) {
		l := strings.TrimRight(location, "/")
		i := strings.LastIndexByte(l, '/')
		return l[:i], l[i+1:]
	}
	// Kept relative when it is: callers compare these paths with the
	// ones they configured.
	l := filepath.Clean(FilePath(location))
	if !snapshot.IsPlainName(filepath.Base(l)) {
		if abs, err := filepath.Abs(l); err == nil {
			l = abs
		}
	}
	return filepath.Dir(l), filepath.Base(l)
}

// savepointBackend opens the backend of the parent of a savepoint
// directory and returns the directory's key prefix in it.
func (s *Storage) savepointBackend(dir string) (Backend, string, error) {
	parent, name := splitLocation(dir)
	if !snapshot.IsPlainName(name) {
		return nil, "", fmt.Errorf("checkpoint storage: savepoint directory %q", dir)
	}
	b, err := s.open(parent)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint storage: open %s: %w", parent, err)
	}
	return b, name + "/", nil
}

// SavepointAt returns the location of savepoint id in dir (from
// NewSavepointDir), making the directory. A savepoint location refuses
// shared streams: savepoints are self-contained.
func (s *Storage) SavepointAt(dir string, id int64) (*Location, error) {
	b, prefix, err := s.savepointBackend(dir)
	if err != nil {
		return nil, err
	}
	if d, ok := b.(DirMaker); ok {
		if err := d.MakeDir(s.ctx(), prefix); err != nil {
			return nil, fmt.Errorf("checkpoint storage: create savepoint directory %s: %w", dir, err)
		}
	}
	return &Location{st: s, b: b, id: id, prefix: prefix, savepoint: true}, nil
}

// DiscardCheckpoint deletes the objects of checkpoint id and the shared
// files listed (those the registry says no retained checkpoint references).
// Its _metadata goes first, so it never outlives a file it references,
// then its other objects, in batches; a listed shared file that some other
// _metadata still references is kept (and logged): whatever the caller's
// bookkeeping, no file a completed checkpoint references is deleted.
// Missing objects are not an error: discarding is idempotent.
func (s *Storage) DiscardCheckpoint(id int64, shared []string) error {
	if err := discardPrefix(s.ctx(), s.b, checkpointKey(id)+"/"); err != nil {
		return fmt.Errorf("discard checkpoint %d: %w", id, err)
	}
	if len(shared) == 0 {
		return nil
	}
	used, err := s.referencedShared()
	if err != nil {
		s.log.Warn("discard checkpoint: shared files kept, the references in storage are unknown", "job", s.job, "checkpoint", id, "files", len(shared), "err", err)
		return nil
	}
	var errs []error
	var keys []string
	for _, name := range shared {
		if !snapshot.IsPlainName(name) {
			errs = append(errs, fmt.Errorf("discard checkpoint %d: shared file name %q", id, name))
			continue
		}
		if used[name] {
			s.log.Warn("discard checkpoint: shared file still referenced by a checkpoint in storage; kept", "job", s.job, "checkpoint", id, "file", name)
			continue
		}
		keys = append(keys, sharedPrefix+name)
	}
	if len(keys) > 0 {
		if err := s.b.DeleteBatch(s.ctx(), keys); err != nil {
			errs = append(errs, fmt.Errorf("discard checkpoint %d: remove shared files: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// discardPrefix deletes every object under prefix: its _metadata first,
// so that a discard cut short never leaves a complete checkpoint missing
// a file, then the rest in one batch.
func discardPrefix(ctx context.Context, b Backend, prefix string) error {
	keys, err := listKeys(ctx, b, prefix, true)
	if err != nil {
		return fmt.Errorf("list %s: %w", b.Path(prefix), err)
	}
	meta := prefix + metadataName
	if i := slices.Index(keys, meta); i >= 0 {
		if err := b.DeleteBatch(ctx, []string{meta}); err != nil {
			return err
		}
		keys = slices.Delete(keys, i, i+1)
	}
	if len(keys) == 0 {
		return nil
	}
	return b.DeleteBatch(ctx, keys)
}

// DiscardSavepoint deletes a savepoint directory (of a failed savepoint).
func (s *Storage) DiscardSavepoint(dir string) error {
	b, prefix, err := s.savepointBackend(dir)
	if err == nil {
		err = discardPrefix(s.ctx(), b, prefix)
	}
	if err != nil {
		return fmt.Errorf("discard savepoint %s: %w", dir, err)
	}
	return nil
}

// Location is where one checkpoint or savepoint is written.
type Location struct {
	st        *Storage
	b         Backend
	id        int64
	prefix    string // the key prefix of its directory, ending in "/"
	savepoint bool
}

// ID is the checkpoint id the location is for.
func (l *Location) ID() int64 { return l.id }

// Dir is the directory that holds the _metadata, as the backend names it.
func (l *Location) Dir() string { return l.b.Path(strings.TrimSuffix(l.prefix, "/")) }

// IsSavepoint reports whether this is a savepoint location.
func (l *Location) IsSavepoint() bool { return l.savepoint }

// CreateStateStream starts a state stream owned by this checkpoint. owner
// names the writer in the file name (for example "<operator uid>-<subtask>").
func (l *Location) CreateStateStream(owner string) *StateStream {
	return newStateStream(l.b, l.prefix, sanitize(owner)+"-"+randomSuffix(), false, l.st.inline, l.id)
}

// CreateSharedStream starts a stream in the shared directory, for state
// that later checkpoints may reference too (incremental snapshots). Shared
// streams are never inlined. Savepoints refuse them.
func (l *Location) CreateSharedStream(owner string) (*StateStream, error) {
	if l.savepoint {
		return nil, fmt.Errorf("create shared stream for savepoint %d: %w", l.id, ErrSharedInSavepoint)
	}
	return newStateStream(l.b, sharedPrefix, sanitize(owner)+"-"+randomSuffix(), true, -1, l.id), nil
}

// LinkSharedFile publishes the local file src, of size bytes, in the
// shared directory as owner's, as CreateSharedStream would, but without
// copying it: a second name of the file, made durable by this
// checkpoint's commit. That needs a backend that both links (FileLinker)
// and defers syncs (DeferredSyncer), and src on its file system; ok is
// false when it cannot (nothing was read or made), and the caller streams
// the file instead. checksum gives the file's CRC-32C once it is linked;
// when it fails the link is deleted. src must never be written again.
func (l *Location) LinkSharedFile(owner, src string, size int64, checksum func() (uint32, error)) (h StateHandle, ok bool, err error) {
	if l.savepoint {
		return StateHandle{}, false, fmt.Errorf("link shared file for savepoint %d: %w", l.id, ErrSharedInSavepoint)
	}
	fl, linker := l.b.(FileLinker)
	if _, deferred := l.b.(DeferredSyncer); !linker || !deferred {
		return StateHandle{}, false, nil
	}
	name := sanitize(owner) + "-" + randomSuffix()
	key := sharedPrefix + name
	if err := fl.LinkDeferred(l.st.ctx(), key, src); err != nil {
		return StateHandle{}, false, nil // another file system: copy it
	}
	crc, err := checksum()
	if err != nil {
		if derr := l.b.DeleteBatch(l.st.ctx(), []string{key}); derr != nil {
			err = errors.Join(err, derr)
		}
		return StateHandle{}, false, fmt.Errorf("link %s: %w", l.b.Path(key), err)
	}
	return StateHandle{Path: name, Shared: true, Size: size, CRC32C: crc, DurableAt: l.id}, true, nil
}

// WriteMetadata commits the location: it makes the shared files durable
// (on a Syncer backend, the private ones are by the commit itself) and
// writes md as <location>/_metadata with PutIfAbsent, which never replaces
// a _metadata already there (ErrObjectExists). It returns the path of
// _metadata. Once it returns nil the checkpoint is complete; when it
// fails, a complete _metadata may have been made visible (a failure after
// the publish), so the caller discards the location either way.
func (l *Location) WriteMetadata(md *Metadata) (string, error) {
	if md.CheckpointID != l.id {
		return "", fmt.Errorf("%w: metadata of checkpoint %d written to the location of %d", ErrInvalidMetadata, md.CheckpointID, l.id)
	}
	if l.savepoint != (md.Kind == KindSavepoint) {
		return "", fmt.Errorf("%w: metadata of kind %s written to a %s location", ErrInvalidMetadata, md.Kind, map[bool]string{true: "savepoint", false: "checkpoint"}[l.savepoint])
	}
	data, err := EncodeMetadata(md)
	if err != nil {
		return "", err
	}
	ctx := l.st.ctx()
	key := l.prefix + metadataName
	if ds, ok := l.b.(DeferredSyncer); ok {
		// One commit: the private files and the new shared files the
		// tasks published without an fsync, the shared directory (when
		// a new shared file was named in it) and _metadata's own file
		// made durable at once, then _metadata published.
		objects, newShared := l.unsyncedKeys(md)
		var dirs []string
		if newShared && !l.savepoint {
			dirs = []string{sharedPrefix}
		}
		if err := ds.PutIfAbsentAfterSync(ctx, key, data, objects, dirs); err != nil {
			return "", fmt.Errorf("write checkpoint %d metadata %s: %w", l.id, l.b.Path(key), err)
		}
		return l.b.Path(key), nil
	}
	if sy, ok := l.b.(Syncer); ok && !l.savepoint {
		if err := sy.Sync(ctx, sharedPrefix); err != nil {
			return "", fmt.Errorf("write checkpoint %d metadata: sync %s: %w", l.id, l.b.Path(sharedDirName), err)
		}
	}
	if err := l.b.PutIfAbsent(ctx, key, data); err != nil {
		return "", fmt.Errorf("write checkpoint %d metadata %s: %w", l.id, l.b.Path(key), err)
	}
	return l.b.Path(key), nil
}

// unsyncedKeys are the keys of the files of md that this checkpoint's
// commit makes durable, without duplicates: those in this location's own
// directory (not inline, not shared), and the shared files written for
// this checkpoint (DurableAt), not those an earlier one wrote. newShared
// reports whether md names a shared file whose name in the shared
// directory this commit must make durable: one written for this
// checkpoint, or one that records no checkpoint (DurableAt 0: written by
// a commit protocol before DurableAt, or durable on its own but for its
// directory entry). A checkpoint that only references shared files of
// completed checkpoints (whose commits fsynced the shared directory after
// naming them) or none at all (the heap backend's) leaves the shared
// directory alone: its fsync would make nothing of it durable.
func (l *Location) unsyncedKeys(md *Metadata) (keys []string, newShared bool) {
	for _, r := range md.Handles() {
		switch h := r.Handle; {
		case h.IsInline():
		case !h.Shared:
			keys = append(keys, l.prefix+h.Path)
		case h.DurableAt == l.id:
			keys = append(keys, sharedPrefix+h.Path)
			newShared = true
		case h.DurableAt == 0:
			newShared = true
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), newShared
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sanitize turns an owner name into a safe file-name prefix.
func sanitize(owner string) string {
	if owner == "" {
		return "state"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, owner)
}
