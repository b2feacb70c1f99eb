package storage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultInlineThreshold is Flink's execution.checkpointing.data-inline-threshold
// (20 KiB): state streams at most this long are kept in _metadata.
const DefaultInlineThreshold = 20 << 10

const (
	checkpointPrefix = "chk-"
	sharedDirName    = "shared"
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
}

// Storage is the checkpoint storage of one job under a checkpoint
// directory: <dir>/<job>/.
type Storage struct {
	fs     FS
	root   string
	job    string
	inline int
	log    *slog.Logger
}

// New opens (creating it if needed) the storage of job under dir.
func New(fsys FS, dir, job string, opts Options) (*Storage, error) {
	if dir == "" {
		return nil, errors.New("checkpoint storage: empty checkpoint directory (execution.checkpointing.dir)")
	}
	if !localName(job) {
		return nil, fmt.Errorf("checkpoint storage: job name %q must be a plain file name", job)
	}
	if opts.InlineThreshold < 0 {
		return nil, fmt.Errorf("checkpoint storage: negative inline threshold %d", opts.InlineThreshold)
	}
	s := &Storage{fs: fsys, root: filepath.Join(dir, job), job: job, inline: opts.InlineThreshold, log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	if err := fsys.MkdirAll(s.sharedDir(), 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint storage: create %s: %w", s.sharedDir(), err)
	}
	return s, nil
}

// JobDir is <dir>/<job>.
func (s *Storage) JobDir() string { return s.root }

// CheckpointDir is the directory of checkpoint id.
func (s *Storage) CheckpointDir(id int64) string {
	return filepath.Join(s.root, checkpointPrefix+strconv.FormatInt(id, 10))
}

func (s *Storage) sharedDir() string { return filepath.Join(s.root, sharedDirName) }

// Checkpoint returns the location of checkpoint id, creating its directory.
// Tasks and the coordinator may call it concurrently for the same id.
func (s *Storage) Checkpoint(id int64) (*Location, error) {
	dir := s.CheckpointDir(id)
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint storage: create %s: %w", dir, err)
	}
	return &Location{st: s, id: id, dir: dir}, nil
}

// NewSavepointDir picks a fresh savepoint directory under parent
// (execution.checkpointing.savepoint-dir): savepoint-<job>-<random>. It
// does not create it; SavepointAt does.
func (s *Storage) NewSavepointDir(parent string) (string, error) {
	if parent == "" {
		return "", errors.New("checkpoint storage: no savepoint directory given and execution.checkpointing.savepoint-dir is not set")
	}
	job := s.job
	if len(job) > 12 {
		job = job[:12]
	}
	return filepath.Join(parent, savepointPrefix+job+"-"+randomSuffix()), nil
}

// SavepointAt returns the location of savepoint id in dir (from
// NewSavepointDir), creating the directory. A savepoint location refuses
// shared streams: savepoints are self-contained.
func (s *Storage) SavepointAt(dir string, id int64) (*Location, error) {
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint storage: create savepoint directory %s: %w", dir, err)
	}
	return &Location{st: s, id: id, dir: dir, savepoint: true}, nil
}

// DiscardCheckpoint deletes the directory of checkpoint id and the shared
// files listed (those the registry says no retained checkpoint references).
// The directory goes first, so its _metadata never outlives a file it
// references; a listed shared file that some other _metadata on disk still
// references is kept (and logged): whatever the caller's bookkeeping, no
// file a completed checkpoint references is deleted. Missing files are not
// an error: discarding is idempotent.
func (s *Storage) DiscardCheckpoint(id int64, shared []string) error {
	var errs []error
	if err := s.fs.RemoveAll(s.CheckpointDir(id)); err != nil {
		return fmt.Errorf("discard checkpoint %d: %w", id, err)
	}
	if len(shared) == 0 {
		return nil
	}
	used, err := s.referencedShared()
	if err != nil {
		s.log.Warn("discard checkpoint: shared files kept, the references on disk are unknown", "job", s.job, "checkpoint", id, "files", len(shared), "err", err)
		return nil
	}
	for _, name := range shared {
		if !localName(name) {
			errs = append(errs, fmt.Errorf("discard checkpoint %d: shared file name %q", id, name))
			continue
		}
		if used[name] {
			s.log.Warn("discard checkpoint: shared file still referenced by a checkpoint on disk; kept", "job", s.job, "checkpoint", id, "file", name)
			continue
		}
		p := filepath.Join(s.sharedDir(), name)
		if err := s.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("discard checkpoint %d: remove shared file: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// DiscardSavepoint deletes a savepoint directory (of a failed savepoint).
func (s *Storage) DiscardSavepoint(dir string) error {
	if err := s.fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("discard savepoint %s: %w", dir, err)
	}
	return nil
}

// Location is where one checkpoint or savepoint is written.
type Location struct {
	st        *Storage
	id        int64
	dir       string
	savepoint bool
}

// ID is the checkpoint id the location is for.
func (l *Location) ID() int64 { return l.id }

// Dir is the directory that holds the _metadata.
func (l *Location) Dir() string { return l.dir }

// IsSavepoint reports whether this is a savepoint location.
func (l *Location) IsSavepoint() bool { return l.savepoint }

// CreateStateStream starts a state stream owned by this checkpoint. owner
// names the writer in the file name (for example "<operator uid>-<subtask>").
func (l *Location) CreateStateStream(owner string) *StateStream {
	return &StateStream{fs: l.st.fs, dir: l.dir, name: sanitize(owner) + "-" + randomSuffix(), inline: l.st.inline}
}

// CreateSharedStream starts a stream in the shared directory, for state
// that later checkpoints may reference too (incremental snapshots). Shared
// streams are never inlined. Savepoints refuse them.
func (l *Location) CreateSharedStream(owner string) (*StateStream, error) {
	if l.savepoint {
		return nil, fmt.Errorf("create shared stream for savepoint %d: %w", l.id, ErrSharedInSavepoint)
	}
	return &StateStream{fs: l.st.fs, dir: l.st.sharedDir(), name: sanitize(owner) + "-" + randomSuffix(), shared: true, inline: -1}, nil
}

// WriteMetadata writes md as the _metadata of this location, atomically:
// write a temporary file, fsync it, make the shared directory durable,
// rename, fsync the directory and its parent. It returns the path of
// _metadata. Once it returns nil the checkpoint is complete on disk; when
// it fails, no complete _metadata was made visible unless the final
// directory sync failed, so the caller discards the location either way.
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
	fsys := l.st.fs
	final := filepath.Join(l.dir, metadataName)
	tmp := final + tempSuffix + randomSuffix()
	if err := writeFile(fsys, tmp, data); err != nil {
		_ = fsys.Remove(tmp)
		return "", fmt.Errorf("write checkpoint %d metadata: %w", l.id, err)
	}
	if !l.savepoint {
		if err := fsys.SyncDir(l.st.sharedDir()); err != nil {
			_ = fsys.Remove(tmp)
			return "", fmt.Errorf("write checkpoint %d metadata: sync %s: %w", l.id, l.st.sharedDir(), err)
		}
	}
	if err := fsys.Rename(tmp, final); err != nil {
		_ = fsys.Remove(tmp)
		return "", fmt.Errorf("write checkpoint %d metadata: %w", l.id, err)
	}
	if err := fsys.SyncDir(l.dir); err != nil {
		return "", fmt.Errorf("write checkpoint %d metadata: sync %s: %w", l.id, l.dir, err)
	}
	if err := fsys.SyncDir(filepath.Dir(l.dir)); err != nil {
		return "", fmt.Errorf("write checkpoint %d metadata: sync %s: %w", l.id, filepath.Dir(l.dir), err)
	}
	return final, nil
}

func writeFile(fsys FS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
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
