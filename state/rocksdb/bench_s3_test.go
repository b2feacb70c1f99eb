package rocksdb

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
	_ "github.com/sluicehq/sluice/checkpoint/storage/s3" // s3:// locations for -rocksdb.storage=s3
	"github.com/sluicehq/sluice/internal/testutil"
)

// BenchmarkIncrementalCheckpoint writes its checkpoints through the
// runtime's checkpoint storage (storage.Storage): the SST files as shared
// streams, the other files as the checkpoint's own, a _metadata per
// checkpoint, a retention of one, small files inline in _metadata
// (storage.DefaultInlineThreshold, the runtime's default). -rocksdb.storage picks the backend under
// it: posix (a temporary directory) or s3 (a fresh prefix in the bucket of
// the local S3 server, testutil.S3Location: AWS_ENDPOINT_URL_S3, S3_BUCKET
// and the keys in the environment).
var benchStorage = flag.String("rocksdb.storage", "posix", "BenchmarkIncrementalCheckpoint: checkpoint storage, posix (a temporary directory) or s3 (a fresh prefix in $S3_BUCKET at $AWS_ENDPOINT_URL_S3)")

// storageCounts are what a countingBackend saw: objects created (Put,
// PutIfAbsent and committed Create) and their bytes, objects opened and
// the bytes read from them, keys deleted.
type storageCounts struct {
	objects, bytes         atomic.Int64
	gets, read             atomic.Int64
	deletes, deleteBatches atomic.Int64
}

// counts is a copy of the counters, to subtract.
type counts struct{ objects, bytes, gets, read, deletes, deleteBatches int64 }

func (c *storageCounts) load() counts {
	return counts{c.objects.Load(), c.bytes.Load(), c.gets.Load(), c.read.Load(), c.deletes.Load(), c.deleteBatches.Load()}
}

func (a counts) sub(b counts) counts {
	return counts{a.objects - b.objects, a.bytes - b.bytes, a.gets - b.gets, a.read - b.read, a.deletes - b.deletes, a.deleteBatches - b.deleteBatches}
}

// countingBackend is a storage.Backend that counts what goes through it.
type countingBackend struct {
	storage.Backend
	c *storageCounts
}

// newCountingBackend wraps b, keeping the optional interfaces storage
// looks for (POSIX: Syncer and DirMaker; S3: DirLister), so that storage
// behaves on the wrapper as on b.
func newCountingBackend(b storage.Backend, c *storageCounts) storage.Backend {
	cb := &countingBackend{Backend: b, c: c}
	sy, isSyncer := b.(storage.Syncer)
	dm, isDirMaker := b.(storage.DirMaker)
	dl, isDirLister := b.(storage.DirLister)
	switch {
	case isSyncer && isDirMaker && !isDirLister:
		return struct {
			*countingBackend
			storage.Syncer
			storage.DirMaker
		}{cb, sy, dm}
	case isDirLister && !isSyncer && !isDirMaker:
		return struct {
			*countingBackend
			storage.DirLister
		}{cb, dl}
	case !isSyncer && !isDirMaker && !isDirLister:
		return cb
	}
	panic(fmt.Sprintf("countingBackend: no wrapper for %T (Syncer %t, DirMaker %t, DirLister %t)", b, isSyncer, isDirMaker, isDirLister))
}

func (b *countingBackend) Put(ctx context.Context, key string, data []byte) error {
	err := b.Backend.Put(ctx, key, data)
	if err == nil {
		b.c.objects.Add(1)
		b.c.bytes.Add(int64(len(data)))
	}
	return err
}

func (b *countingBackend) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := b.Backend.PutIfAbsent(ctx, key, data)
	if err == nil {
		b.c.objects.Add(1)
		b.c.bytes.Add(int64(len(data)))
	}
	return err
}

func (b *countingBackend) Create(ctx context.Context, key string) (storage.ObjectWriter, error) {
	w, err := b.Backend.Create(ctx, key)
	if err != nil {
		return nil, err
	}
	return &countingWriter{ObjectWriter: w, c: b.c}, nil
}

func (b *countingBackend) Get(ctx context.Context, key string) (storage.Object, error) {
	o, err := b.Backend.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	b.c.gets.Add(1)
	return &countingObject{Object: o, c: b.c}, nil
}

func (b *countingBackend) DeleteBatch(ctx context.Context, keys []string) error {
	b.c.deletes.Add(int64(len(keys)))
	b.c.deleteBatches.Add(1)
	return b.Backend.DeleteBatch(ctx, keys)
}

// countingWriter counts its bytes once committed.
type countingWriter struct {
	storage.ObjectWriter
	c *storageCounts
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ObjectWriter.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *countingWriter) Commit() error {
	err := w.ObjectWriter.Commit()
	if err == nil {
		w.c.objects.Add(1)
		w.c.bytes.Add(w.n)
	}
	return err
}

type countingObject struct {
	storage.Object
	c *storageCounts
}

func (o *countingObject) Read(p []byte) (int, error) {
	n, err := o.Object.Read(p)
	o.c.read.Add(int64(n))
	return n, err
}

// benchStore is the job storage BenchmarkIncrementalCheckpoint writes
// into, with the bookkeeping of the runtime's coordinator: a _metadata per
// checkpoint, the shared files counted by reference, a retention of one
// completed checkpoint.
type benchStore struct {
	kind   string
	st     *storage.Storage
	counts *storageCounts

	refs     map[string]int // shared file name -> retained checkpoints referencing it
	retained int64          // id of the retained checkpoint, 0 for none
	prev     int64          // the one retained before, until discarded
	shared   map[int64][]string
}

const benchJob = "bench"

// newBenchStore opens the job storage of -rocksdb.storage.
func newBenchStore(b *testing.B, kind string) *benchStore {
	b.Helper()
	var dir string
	switch kind {
	case "posix":
		dir = b.TempDir()
	case "s3":
		dir = testutil.S3Location(b)
	default:
		b.Fatalf("-rocksdb.storage=%s: want posix or s3", kind)
	}
	root, err := storage.Open(context.Background(), nil, storage.JoinLocation(dir, benchJob), nil)
	if err != nil {
		b.Fatal(err)
	}
	c := &storageCounts{}
	open := func(location string) (storage.Backend, error) {
		return storage.Open(context.Background(), nil, location, nil)
	}
	// The runtime's default inline threshold: the small private files
	// (CURRENT, OPTIONS) go into _metadata.
	st, err := storage.NewOnBackend(newCountingBackend(root, c), open, benchJob, storage.Options{InlineThreshold: storage.DefaultInlineThreshold})
	if err != nil {
		b.Fatal(err)
	}
	if kind == "s3" {
		// The bucket is shared and the state large: empty the prefix
		// (after the figures, which list it).
		b.Cleanup(func() {
			keys, err := listAll(st)
			if err == nil && len(keys) > 0 {
				err = root.DeleteBatch(context.Background(), slices.Collect(maps.Keys(keys)))
			}
			if err != nil {
				b.Errorf("empty %s: %v", st.JobDir(), err)
			}
		})
	}
	return &benchStore{kind: kind, st: st, counts: c, refs: map[string]int{}, shared: map[int64][]string{}}
}

// checkpoint opens the location of checkpoint id.
func (s *benchStore) checkpoint(b *testing.B, id int64) storage.StateUploader {
	loc, err := s.st.Checkpoint(id)
	if err != nil {
		b.Fatal(err)
	}
	return storage.StateUploader{Loc: loc, Owner: "bench-0"}
}

// handleFiles is what the runtime's uploadIncremental puts in the
// metadata: the encoded handle inline, then every file it references.
func handleFiles(b *testing.B, h *IncrementalHandle) []storage.NamedHandle {
	enc, err := h.Encode()
	if err != nil {
		b.Fatal(err)
	}
	files := []storage.NamedHandle{{Name: "_backend_handle",
		Handle: storage.StateHandle{Size: int64(len(enc)), CRC32C: storage.Checksum(enc), Inline: enc}}}
	for _, f := range h.Files {
		var sh storage.StateHandle
		if err := json.Unmarshal(f.Ref, &sh); err != nil {
			b.Fatalf("reference %q: %v", f.Ref, err)
		}
		files = append(files, storage.NamedHandle{Name: sh.Path, Handle: sh})
	}
	return files
}

// commit completes the checkpoint of h: it writes its _metadata (which
// also makes its shared files durable on POSIX) and counts the references
// to its shared files.
func (s *benchStore) commit(b *testing.B, u storage.StateUploader, h *IncrementalHandle) {
	b.Helper()
	files := handleFiles(b, h)
	md := &storage.Metadata{Version: storage.MetadataVersion, Job: benchJob, CheckpointID: h.CheckpointID, Kind: storage.KindCheckpoint,
		Subtasks: []storage.SubtaskState{{OperatorUID: "bench", Parallelism: 1, MaxParallelism: h.MaxParallelism,
			KeyedState: []storage.KeyedStateHandle{{KeyGroups: storage.KeyGroupRange{Start: h.KeyGroups.Start, End: h.KeyGroups.End},
				Backend: "rocksdb", Files: files}}}}}
	if _, err := u.Loc.WriteMetadata(md); err != nil {
		b.Fatal(err)
	}
	var shared []string
	for i, f := range h.Files {
		if !f.Shared {
			continue
		}
		name := files[i+1].Handle.Path
		if f.Reused && s.refs[name] == 0 {
			b.Fatalf("checkpoint %d references %s (%s), which no retained checkpoint holds", h.CheckpointID, f.Name, name)
		}
		s.refs[name]++
		shared = append(shared, name)
	}
	s.shared[h.CheckpointID] = shared
	s.prev, s.retained = s.retained, h.CheckpointID
}

// discardPrevious discards the checkpoint retained before the last commit:
// its own objects and the shared files no retained checkpoint references
// any more.
func (s *benchStore) discardPrevious(b *testing.B) {
	b.Helper()
	prev := s.prev
	if prev == 0 {
		return
	}
	var gone []string
	for _, name := range s.shared[prev] {
		if s.refs[name]--; s.refs[name] == 0 {
			delete(s.refs, name)
			gone = append(gone, name)
		}
	}
	delete(s.shared, prev)
	s.prev = 0
	if err := s.st.DiscardCheckpoint(prev, gone); err != nil {
		b.Fatal(err)
	}
}

// recover finds the checkpoint to restore as the runtime does
// (Storage.Recover, which verifies every file the retained checkpoints
// reference) and decodes its backend handle from the _metadata.
func (s *benchStore) recover(b *testing.B) (*storage.Snapshot, *IncrementalHandle) {
	b.Helper()
	rec, err := s.st.Recover()
	if err != nil {
		b.Fatal(err)
	}
	snap := rec.Latest()
	if len(rec.Retained) != 1 || snap.Metadata.CheckpointID != s.retained {
		b.Fatalf("recovered %d checkpoints, latest %d; want only %d", len(rec.Retained), snap.Metadata.CheckpointID, s.retained)
	}
	for _, f := range snap.Metadata.Subtasks[0].KeyedState[0].Files {
		if f.Name == "_backend_handle" {
			h, err := DecodeIncrementalHandle(f.Handle.Inline)
			if err != nil {
				b.Fatal(err)
			}
			return snap, h
		}
	}
	b.Fatalf("checkpoint %d: no backend handle in its _metadata", snap.Metadata.CheckpointID)
	return nil, nil
}

// download is the runtime's download function for snap (runtime/state_restore.go).
func (s *benchStore) download(snap *storage.Snapshot) Download {
	return func(ref []byte) (io.ReadCloser, error) {
		var h storage.StateHandle
		if err := json.Unmarshal(ref, &h); err != nil {
			return nil, fmt.Errorf("file reference %q: %w", ref, err)
		}
		return snap.Open(h)
	}
}

// listAll returns the objects (not directory markers) under the job's
// root, by key, with their sizes.
func listAll(st *storage.Storage) (map[string]int64, error) {
	out := map[string]int64{}
	for o, err := range st.Backend().List(context.Background(), "") {
		if err != nil {
			return nil, err
		}
		if !o.IsMarker() {
			out[o.Key] = o.Size
		}
	}
	return out, nil
}

// checkHeld lists the job's storage and compares it with what the
// retained checkpoint references (its files and its _metadata).
func (s *benchStore) checkHeld(b *testing.B, snap *storage.Snapshot) (held, referenced int, heldBytes int64) {
	b.Helper()
	objs, err := listAll(s.st)
	if err != nil {
		b.Fatal(err)
	}
	want := map[string]bool{strings.TrimPrefix(snap.Dir, s.st.JobDir()+"/") + "/_metadata": true}
	for _, r := range snap.Metadata.Handles() {
		if p := snap.Path(r.Handle); p != "" {
			want[strings.TrimPrefix(p, s.st.JobDir()+"/")] = true
		}
	}
	for k, n := range objs {
		heldBytes += n
		if !want[k] {
			b.Errorf("%s holds %s, which the retained checkpoint %d does not reference", s.st.JobDir(), k, snap.Metadata.CheckpointID)
		}
	}
	for k := range want {
		if _, ok := objs[k]; !ok {
			b.Errorf("%s lacks %s, which the retained checkpoint %d references", s.st.JobDir(), k, snap.Metadata.CheckpointID)
		}
	}
	return len(objs), len(want), heldBytes
}
