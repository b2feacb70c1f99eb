package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot is a completed checkpoint or savepoint read back from storage.
type Snapshot struct {
	Metadata *Metadata
	// Dir holds the _metadata, as the backend names it; private files are
	// resolved against it, shared files against Dir/../shared.
	Dir    string
	b      Backend
	prefix string // key prefix of Dir, ending in "/"
	shared string // key prefix of the shared files
}

// key is the object key of a file handle.
func (s *Snapshot) key(h StateHandle) string {
	if h.Shared {
		return s.shared + h.Path
	}
	return s.prefix + h.Path
}

// Path returns the file a handle points to ("" for inline state).
func (s *Snapshot) Path(h StateHandle) string {
	if h.IsInline() {
		return ""
	}
	return s.b.Path(s.key(h))
}

// Open returns the bytes of a handle. The reader checks the length and the
// CRC32C as it reaches the end, and fails there (with the file's path) if
// they differ from the handle's.
func (s *Snapshot) Open(h StateHandle) (io.ReadCloser, error) {
	if h.IsInline() {
		return io.NopCloser(bytes.NewReader(h.Inline)), nil
	}
	p := s.Path(h)
	f, err := s.b.Get(context.Background(), s.key(h))
	if err != nil {
		return nil, fileError(p, err)
	}
	return &verifyingReader{f: f, path: p, want: h, crc: crc32.New(castagnoli)}, nil
}

// ReadAll reads and verifies the whole stream of a handle.
func (s *Snapshot) ReadAll(h StateHandle) ([]byte, error) {
	r, err := s.Open(h)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if h.IsInline() {
		if err := checkSum(data, h); err != nil {
			return nil, fmt.Errorf("inline state: %w", err)
		}
	}
	return data, nil
}

// Verify reads every file the snapshot references and checks its length
// and checksum. It returns the first failure, naming the file.
func (s *Snapshot) Verify() error { return s.verify(map[string]bool{}) }

func (s *Snapshot) verify(verified map[string]bool) error {
	for _, r := range s.Metadata.Handles() {
		h := r.Handle
		if h.IsInline() {
			if err := checkSum(h.Inline, h); err != nil {
				return fmt.Errorf("%s: inline state: %w", r.Where, err)
			}
			continue
		}
		key := fmt.Sprintf("%s|%d|%08x", s.Path(h), h.Size, h.CRC32C)
		if verified[key] {
			continue
		}
		rc, err := s.Open(h)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return err
		}
		verified[key] = true
	}
	return nil
}

func checkSum(data []byte, h StateHandle) error {
	if int64(len(data)) != h.Size {
		return fmt.Errorf("%w: %d bytes, recorded %d", ErrTruncated, len(data), h.Size)
	}
	if sum := crc32.Checksum(data, castagnoli); sum != h.CRC32C {
		return fmt.Errorf("%w: crc32c %08x, recorded %08x", ErrChecksumMismatch, sum, h.CRC32C)
	}
	return nil
}

type verifyingReader struct {
	f    io.ReadCloser
	path string
	want StateHandle
	crc  interface {
		io.Writer
		Sum32() uint32
	}
	n int64
}

func (r *verifyingReader) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	r.crc.Write(p[:n])
	r.n += int64(n)
	if r.n > r.want.Size {
		return n, fileError(r.path, fmt.Errorf("%w: longer than the recorded %d bytes", ErrTruncated, r.want.Size))
	}
	if err == io.EOF {
		if r.n != r.want.Size {
			return n, fileError(r.path, fmt.Errorf("%w: %d bytes, recorded %d", ErrTruncated, r.n, r.want.Size))
		}
		if sum := r.crc.Sum32(); sum != r.want.CRC32C {
			return n, fileError(r.path, fmt.Errorf("%w: crc32c %08x, recorded %08x", ErrChecksumMismatch, sum, r.want.CRC32C))
		}
		return n, io.EOF
	}
	if err != nil {
		return n, fileError(r.path, err)
	}
	return n, nil
}

func (r *verifyingReader) Close() error { return r.f.Close() }

// LoadSnapshot reads the checkpoint or savepoint at path (its directory, or
// its _metadata file; a file path on fsys or a URL of a registered scheme)
// and verifies every file it references.
func LoadSnapshot(fsys FS, path string) (*Snapshot, error) {
	return LoadSnapshotWith(fsys, path, nil)
}

// LoadSnapshotWith is LoadSnapshot with a job's own scheme openers
// (Options.Schemes).
func LoadSnapshotWith(fsys FS, path string, schemes map[string]OpenFunc) (*Snapshot, error) {
	dir := strings.TrimRight(path, "/")
	if p, name := splitLocation(dir); name == metadataName {
		dir = p
	}
	parent, name := splitLocation(dir)
	b, err := Open(context.Background(), fsys, parent, schemes)
	if err != nil {
		return nil, err
	}
	return LoadSnapshotFrom(b, name+"/")
}

// LoadSnapshotMetadata reads the _metadata of the checkpoint or savepoint
// at path, without reading the files it references (their checksums are
// still checked as they are read): for processes that restore a snapshot
// another process verified, such as the workers of a job on several hosts.
func LoadSnapshotMetadata(fsys FS, path string, schemes map[string]OpenFunc) (*Snapshot, error) {
	dir := strings.TrimRight(path, "/")
	if p, name := splitLocation(dir); name == metadataName {
		dir = p
	}
	parent, name := splitLocation(dir)
	b, err := Open(context.Background(), fsys, parent, schemes)
	if err != nil {
		return nil, err
	}
	return readSnapshot(b, name+"/")
}

// LoadSnapshotFrom reads the checkpoint or savepoint whose directory is
// the key prefix dir (ending in "/") of b, and verifies every file it
// references. Its shared files are under the sibling prefix shared/.
func LoadSnapshotFrom(b Backend, dir string) (*Snapshot, error) {
	snap, err := readSnapshot(b, dir)
	if err != nil {
		return nil, err
	}
	if err := snap.Verify(); err != nil {
		return nil, err
	}
	return snap, nil
}

func readSnapshot(b Backend, prefix string) (*Snapshot, error) {
	key := prefix + metadataName
	p := b.Path(key)
	if err := ValidKey(key); err != nil {
		return nil, fileError(p, err)
	}
	f, err := b.Get(context.Background(), key)
	if err != nil {
		return nil, fileError(p, err)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, fileError(p, err)
	}
	md, err := DecodeMetadata(data)
	if err != nil {
		return nil, fileError(p, err)
	}
	shared := sharedPrefix
	if parent := path.Dir(strings.TrimSuffix(prefix, "/")); parent != "." {
		shared = parent + "/" + sharedPrefix
	}
	return &Snapshot{Metadata: md, Dir: b.Path(strings.TrimSuffix(prefix, "/")), b: b, prefix: prefix, shared: shared}, nil
}

// Recovery is what Recover found in the job's checkpoint directory.
type Recovery struct {
	// Retained are the usable completed checkpoints, newest first: every
	// file they reference is there and matches its checksum.
	Retained []*Snapshot
	// Unusable are the completed checkpoints that cannot be restored
	// (corrupt or missing files, bad metadata), newest first.
	Unusable []Unusable
	// Orphans are checkpoint directories without _metadata: checkpoints
	// that were pending or aborted when the process stopped. Safe to
	// discard (their shared files are not referenced by any _metadata).
	Orphans []int64
	// MaxID is the highest checkpoint id of any directory found; new
	// checkpoints must use higher ids so they never mix with old files.
	MaxID int64
}

// Latest is the checkpoint to restore from: the newest usable one.
func (r *Recovery) Latest() *Snapshot {
	if len(r.Retained) == 0 {
		return nil
	}
	return r.Retained[0]
}

// Unusable is a completed checkpoint that cannot be restored.
type Unusable struct {
	ID  int64
	Err error // names the failed file
	// Metadata is its metadata when that could be read (a referenced file
	// is missing or corrupt), nil when the _metadata itself is corrupt.
	Metadata *Metadata
}

// Recover scans the job's checkpoints: it verifies every completed one
// (metadata and every referenced file), newest first. When the newest is
// unusable it logs, for each one skipped, the file that failed, and falls
// back to the previous one. It always returns the Recovery; the error is
// ErrNoCheckpoint when there is no completed checkpoint at all, and
// ErrNoUsableCheckpoint, listing every failed file, when none is usable.
func (s *Storage) Recover() (*Recovery, error) {
	complete, err := s.listCheckpoints()
	if err != nil {
		return &Recovery{}, err
	}
	rec := &Recovery{}
	ids := slices.Collect(maps.Keys(complete))
	for _, id := range ids {
		rec.MaxID = max(rec.MaxID, id)
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	verified := map[string]bool{}
	for _, id := range ids {
		if !complete[id] {
			rec.Orphans = append(rec.Orphans, id)
			continue
		}
		prefix := checkpointKey(id) + "/"
		snap, err := readSnapshot(s.b, prefix)
		if err == nil && snap.Metadata.CheckpointID != id {
			err = fileError(s.b.Path(prefix+metadataName), fmt.Errorf("%w: metadata of checkpoint %d in the directory of %d", ErrCorrupt, snap.Metadata.CheckpointID, id))
		}
		if err == nil {
			err = snap.verify(verified)
		}
		if err != nil {
			u := Unusable{ID: id, Err: err}
			if snap != nil && snap.Metadata.CheckpointID == id {
				u.Metadata = snap.Metadata
			}
			rec.Unusable = append(rec.Unusable, u)
			if len(rec.Retained) == 0 {
				s.log.Warn("checkpoint unusable, falling back to the previous one",
					"job", s.job, "checkpoint", id, "file", failedFile(err), "error", err)
			} else {
				s.log.Warn("older checkpoint unusable", "job", s.job, "checkpoint", id, "file", failedFile(err), "error", err)
			}
			continue
		}
		rec.Retained = append(rec.Retained, snap)
	}
	switch {
	case len(rec.Retained) > 0:
		if len(rec.Unusable) > 0 && rec.Unusable[0].ID > rec.Retained[0].Metadata.CheckpointID {
			s.log.Warn("restoring from an older checkpoint", "job", s.job, "checkpoint", rec.Retained[0].Metadata.CheckpointID,
				"skipped", len(rec.Unusable))
		}
		return rec, nil
	case len(rec.Unusable) == 0:
		return rec, fmt.Errorf("checkpoint storage %s: %w", s.JobDir(), ErrNoCheckpoint)
	}
	errs := []error{fmt.Errorf("checkpoint storage %s: %w: %d completed checkpoints, all unusable", s.JobDir(), ErrNoUsableCheckpoint, len(rec.Unusable))}
	for _, u := range rec.Unusable {
		errs = append(errs, fmt.Errorf("checkpoint %d: %w", u.ID, u.Err))
	}
	return rec, errors.Join(errs...)
}

func failedFile(err error) string {
	var fe *FileError
	if errors.As(err, &fe) {
		return fe.Path
	}
	return ""
}

// ErrReferencesUnknown: a _metadata on disk cannot be read, so which shared
// files it references is unknown and none is deleted.
var ErrReferencesUnknown = errors.New("shared file references unknown")

// listCheckpoints lists the checkpoints in storage: every id with an
// object (or a directory) under chk-<id>/, and whether its _metadata is
// there (it is complete).
func (s *Storage) listCheckpoints() (map[int64]bool, error) {
	if dl, ok := s.b.(DirLister); ok {
		return s.listCheckpointDirs(dl)
	}
	complete := map[int64]bool{}
	for o, err := range s.b.List(s.ctx(), checkpointPrefix) {
		if err != nil {
			return nil, fmt.Errorf("checkpoint storage: list %s: %w", s.b.Path(checkpointPrefix), err)
		}
		dir, rest, ok := strings.Cut(o.Key, "/")
		if !ok {
			continue // an object chk-<something> beside the checkpoints
		}
		id, ok := checkpointID(dir)
		if !ok {
			continue
		}
		complete[id] = complete[id] || rest == metadataName
	}
	return complete, nil
}

// listCheckpointDirs lists the chk-*/ directories and asks each for its
// _metadata: a request per checkpoint, not per file.
func (s *Storage) listCheckpointDirs(dl DirLister) (map[int64]bool, error) {
	complete := map[int64]bool{}
	for d, err := range dl.ListDirs(s.ctx(), "", checkpointPrefix) {
		if err != nil {
			return nil, fmt.Errorf("checkpoint storage: list %s: %w", s.b.Path(checkpointPrefix), err)
		}
		id, ok := checkpointID(strings.TrimSuffix(d, "/"))
		if !ok {
			continue
		}
		_, err := s.b.Stat(s.ctx(), checkpointKey(id)+"/"+metadataName)
		switch {
		case err == nil:
			complete[id] = true
		case errors.Is(err, fs.ErrNotExist):
			complete[id] = false // pending or aborted: an orphan
		default:
			return nil, fmt.Errorf("checkpoint storage: %w", err)
		}
	}
	return complete, nil
}

// checkpointID parses a checkpoint directory's name, chk-<id>.
func checkpointID(dir string) (int64, bool) {
	id, err := strconv.ParseInt(strings.TrimPrefix(dir, checkpointPrefix), 10, 64)
	if err != nil || id <= 0 || checkpointKey(id) != dir {
		return 0, false
	}
	return id, true
}

// referencedShared returns the shared files that some _metadata in
// storage references (every chk-*/_metadata of the job, usable or not).
// It fails with ErrReferencesUnknown when a _metadata cannot be decoded.
func (s *Storage) referencedShared() (map[string]bool, error) {
	complete, err := s.listCheckpoints()
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for id, ok := range complete {
		if !ok {
			continue
		}
		snap, err := readSnapshot(s.b, checkpointKey(id)+"/")
		if errors.Is(err, fs.ErrNotExist) {
			continue // discarded since it was listed: it references nothing now
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrReferencesUnknown, err)
		}
		for _, name := range snap.Metadata.SharedFiles() {
			used[name] = true
		}
	}
	return used, nil
}

// CollectSharedGarbage deletes the files of the shared directory that no
// _metadata in storage references: uploads of checkpoints that never
// completed (a crash mid-upload, a late acknowledgement). It returns the
// names deleted, sorted. Call it only while no checkpoint of the job is
// being written: at start-up, holding the job's lock. When some _metadata
// cannot be read it deletes nothing and returns ErrReferencesUnknown.
func (s *Storage) CollectSharedGarbage() ([]string, error) {
	used, err := s.referencedShared()
	if err != nil {
		return nil, err
	}
	keys, err := listKeys(s.ctx(), s.b, sharedPrefix, false)
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage: list %s: %w", s.b.Path(sharedDirName), err)
	}
	var garbage []string
	for _, k := range keys {
		name := strings.TrimPrefix(k, sharedPrefix)
		if strings.Contains(name, "/") || used[name] {
			continue
		}
		garbage = append(garbage, k)
	}
	if len(garbage) == 0 {
		return nil, nil
	}
	err = s.b.DeleteBatch(s.ctx(), garbage)
	if err != nil {
		err = fmt.Errorf("remove unreferenced shared files: %w", err)
	}
	failed := failedKeys(err, garbage)
	var removed []string
	for _, k := range garbage {
		if !failed[k] {
			removed = append(removed, strings.TrimPrefix(k, sharedPrefix))
		}
	}
	slices.Sort(removed)
	return removed, err
}
