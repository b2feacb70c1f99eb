package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// POSIX is the Backend on a directory of a POSIX file system, through an
// FS (OSFS, or a wrapper that injects faults). An object is a file, a key
// prefix ending in "/" a directory.
//
// Durability is today's: a Put or PutIfAbsent writes a temporary file
// beside its key, fsyncs it, publishes it under the key (rename(2); link(2)
// for PutIfAbsent, which never replaces an existing file) and fsyncs every
// directory from the key's up to the root. A streamed object (Create) is
// fsynced and renamed on Commit, but its directory is fsynced only by Sync
// (the checkpoint's commit does it), which keeps one directory fsync per
// checkpoint rather than per state file. A checkpoint's state streams,
// private and shared, are written with CreateDeferred: not even fsynced
// on Commit, they are made durable by the checkpoint's commit
// (PutIfAbsentAfterSync), in parallel with the _metadata's own fsyncs;
// so are the local files published by LinkDeferred (a hard link instead
// of a copy: StateUploader.UploadFile).
//
// Directories are made as files need them, and DeleteBatch removes the
// directories it leaves empty (never the root), as an object store has
// none. A temporary file left by a crash is listed under its own key
// (<key>.inprogress-<random>), never under the key it was for, so
// discarding a checkpoint removes it too.
type POSIX struct {
	fs   FS
	root string
}

var (
	_ Backend        = (*POSIX)(nil)
	_ Syncer         = (*POSIX)(nil)
	_ DirMaker       = (*POSIX)(nil)
	_ DeferredSyncer = (*POSIX)(nil)
	_ FileLinker     = (*POSIX)(nil)
	_ LockingBackend = (*POSIX)(nil)
)

// Linker is implemented by file systems that can make a second name for a
// file, failing when the new name exists (link(2)). OSFS does. The POSIX
// backend publishes PutIfAbsent with it; on an FS without it, it checks
// that the key is free and renames, which is atomic only against writers
// of the same process.
type Linker interface {
	Link(oldname, newname string) error
}

// NewPOSIX returns the backend rooted at the directory root of fsys. It
// does not create root: the first write does.
func NewPOSIX(fsys FS, root string) *POSIX { return &POSIX{fs: fsys, root: filepath.Clean(root)} }

// Root is the directory the keys are relative to.
func (p *POSIX) Root() string { return p.root }

// Path is the file (or directory, for a marker) of key.
func (p *POSIX) Path(key string) string {
	return filepath.Join(p.root, filepath.FromSlash(strings.TrimSuffix(key, "/")))
}

func (p *POSIX) check(ctx context.Context, key string) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", err
	}
	if strings.HasSuffix(key, "/") {
		return "", fmt.Errorf("%w: %q names a directory, not an object", ErrInvalidKey, key)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", p.Path(key), err)
	}
	return p.Path(key), nil
}

// create makes a new file, making its directory when it is missing (a
// concurrent DeleteBatch may remove an empty directory at any time).
func (p *POSIX) create(name string) (File, error) {
	for try := 0; ; try++ {
		f, err := p.fs.Create(name)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || try == 3 {
			return f, err
		}
		if err := p.fs.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return nil, err
		}
	}
}

func (p *POSIX) writeTemp(final string, data []byte) (string, error) {
	tmp := final + tempSuffix + randomSuffix()
	f, err := p.create(tmp)
	if err != nil {
		return "", err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = p.fs.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// syncUp fsyncs the directory of key and every directory above it up to
// the root.
func (p *POSIX) syncUp(key string) error {
	for dir := path.Dir(key); ; dir = path.Dir(dir) {
		d := p.root
		if dir != "." {
			d = p.Path(dir)
		}
		if err := p.fs.SyncDir(d); err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
		if dir == "." {
			return nil
		}
	}
}

// Put writes data under key: temporary file, fsync, rename, directory
// fsyncs.
func (p *POSIX) Put(ctx context.Context, key string, data []byte) error {
	final, err := p.check(ctx, key)
	if err != nil {
		return err
	}
	tmp, err := p.writeTemp(final, data)
	if err != nil {
		return err
	}
	if err := p.fs.Rename(tmp, final); err != nil {
		_ = p.fs.Remove(tmp)
		return err
	}
	return p.syncUp(key)
}

// PutIfAbsent writes data under key unless a file is there: temporary
// file, fsync, link(2) to the key (which fails when it exists), directory
// fsyncs.
func (p *POSIX) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	final, err := p.check(ctx, key)
	if err != nil {
		return err
	}
	exists := func() error { return fmt.Errorf("put-if-absent %s: %w", final, ErrObjectExists) }
	if _, err := p.fs.Stat(final); err == nil {
		return exists()
	}
	tmp, err := p.writeTemp(final, data)
	if err != nil {
		return err
	}
	err = p.publishNoReplace(tmp, final)
	if errors.Is(err, fs.ErrExist) {
		return exists()
	}
	if err != nil {
		return err
	}
	return p.syncUp(key)
}

// publishNoReplace gives the written temporary file tmp the name final,
// never replacing a file already there (a hard link where the file system
// has one, else a rename after a check); tmp is gone afterwards unless the
// rename succeeded. A file already at final is an error matching
// fs.ErrExist.
func (p *POSIX) publishNoReplace(tmp, final string) error {
	var err error
	if l, ok := p.fs.(Linker); ok {
		err = l.Link(tmp, final)
		_ = p.fs.Remove(tmp)
	} else if _, serr := p.fs.Stat(final); serr == nil {
		err = &fs.PathError{Op: "link", Path: final, Err: fs.ErrExist}
		_ = p.fs.Remove(tmp)
	} else if err = p.fs.Rename(tmp, final); err != nil {
		_ = p.fs.Remove(tmp)
	}
	return err
}

// Create starts a temporary file beside key; Commit fsyncs, closes and
// renames it.
func (p *POSIX) Create(ctx context.Context, key string) (ObjectWriter, error) {
	return p.createWriter(ctx, key, false)
}

// CreateDeferred starts a temporary file beside key; Commit closes and
// renames it without an fsync: PutIfAbsentAfterSync makes it durable.
func (p *POSIX) CreateDeferred(ctx context.Context, key string) (ObjectWriter, error) {
	return p.createWriter(ctx, key, true)
}

// LinkDeferred makes key a second name of the local file src (link(2)),
// making key's directory when it is missing; like CreateDeferred's
// objects it is not fsynced: PutIfAbsentAfterSync makes it durable. It
// fails when the FS has no Linker or src is on another file system.
func (p *POSIX) LinkDeferred(ctx context.Context, key, src string) error {
	final, err := p.check(ctx, key)
	if err != nil {
		return err
	}
	l, ok := p.fs.(Linker)
	if !ok {
		return fmt.Errorf("link %s: the file system has no link(2)", final)
	}
	for try := 0; ; try++ {
		err := l.Link(src, final)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || try == 3 {
			return err
		}
		if err := p.fs.MkdirAll(filepath.Dir(final), 0o755); err != nil {
			return err
		}
	}
}

// maxParallelSyncs bounds the fsyncs a commit runs at once.
const maxParallelSyncs = 16

// PutIfAbsentAfterSync commits a checkpoint in two rounds of fsyncs
// instead of a chain of them. First, at once: the temporary file of data
// is written and fsynced, each of objects is fsynced, each directory of
// dirs is fsynced, and so is every directory above key's own (the root:
// the entry of key's directory). Only when all of them are durable is
// the temporary file linked under key (never replacing a file there);
// then key's directory is fsynced, which also makes durable the names of
// the objects committed into it. On an error nothing is published under
// key, unless the last fsync failed (the caller discards the location
// either way).
func (p *POSIX) PutIfAbsentAfterSync(ctx context.Context, key string, data []byte, objects, dirs []string) error {
	final, err := p.check(ctx, key)
	if err != nil {
		return err
	}
	if _, err := p.fs.Stat(final); err == nil {
		return fmt.Errorf("put-if-absent %s: %w", final, ErrObjectExists)
	}
	for _, k := range objects {
		if err := ValidKey(k); err != nil {
			return err
		}
	}
	// The temporary file is created first: its directory exists (made
	// again if need be) before the directories above it are fsynced.
	tmp := final + tempSuffix + randomSuffix()
	f, err := p.create(tmp)
	if err != nil {
		return err
	}
	jobs := []func() error{func() error {
		_, err := f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}}
	for _, k := range objects {
		jobs = append(jobs, func() error { return p.syncFile(p.Path(k)) })
	}
	syncDir := func(prefix string) func() error {
		return func() error {
			name := p.root
			if prefix != "" && prefix != "." {
				name = p.Path(prefix)
			}
			if err := p.fs.SyncDir(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("sync %s: %w", name, err)
			}
			return nil
		}
	}
	for _, d := range dirs {
		jobs = append(jobs, syncDir(d))
	}
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		jobs = append(jobs, syncDir(path.Dir(dir)))
	}
	if err := runParallel(jobs, maxParallelSyncs); err != nil {
		_ = p.fs.Remove(tmp)
		return err
	}
	err = p.publishNoReplace(tmp, final)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("put-if-absent %s: %w", final, ErrObjectExists)
	}
	if err != nil {
		return err
	}
	return syncDir(path.Dir(key))()
}

// syncFile fsyncs the file name.
func (p *POSIX) syncFile(name string) error {
	f, err := p.fs.Open(name)
	if err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	return nil
}

// runParallel runs jobs, at most n at once, and returns their errors
// joined.
func runParallel(jobs []func() error, n int) error {
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, job := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = job()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (p *POSIX) createWriter(ctx context.Context, key string, deferSync bool) (ObjectWriter, error) {
	final, err := p.check(ctx, key)
	if err != nil {
		return nil, err
	}
	tmp := final + tempSuffix + randomSuffix()
	f, err := p.create(tmp)
	if err != nil {
		return nil, err
	}
	return &posixWriter{p: p, f: f, tmp: tmp, final: final, deferSync: deferSync}, nil
}

type posixWriter struct {
	p          *POSIX
	f          File
	tmp, final string
	done       bool
	deferSync  bool // Commit does not fsync (CreateDeferred)
}

func (w *posixWriter) Write(b []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("write %s: object already committed or aborted", w.final)
	}
	return w.f.Write(b)
}

func (w *posixWriter) Commit() error {
	if w.done {
		return fmt.Errorf("commit %s: object already committed or aborted", w.final)
	}
	w.done = true
	var err error
	if !w.deferSync {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.p.fs.Rename(w.tmp, w.final)
	}
	if err != nil {
		_ = w.p.fs.Remove(w.tmp)
	}
	return err
}

func (w *posixWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	_ = w.f.Close()
	_ = w.p.fs.Remove(w.tmp)
}

type posixObject struct {
	File
	size int64
}

func (o *posixObject) Size() int64 { return o.size }

func notAnObject(name string) error {
	return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("a directory, not an object: %w", fs.ErrNotExist)}
}

// Get opens the file of key.
func (p *POSIX) Get(ctx context.Context, key string) (Object, error) {
	name, err := p.check(ctx, key)
	if err != nil {
		return nil, err
	}
	f, err := p.fs.Open(name)
	if err != nil {
		return nil, err
	}
	var fi fs.FileInfo
	if s, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok {
		fi, err = s.Stat()
	} else {
		fi, err = p.fs.Stat(name)
	}
	if err == nil && fi.IsDir() {
		err = notAnObject(name)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &posixObject{File: f, size: fi.Size()}, nil
}

// Stat returns the size of the file of key.
func (p *POSIX) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	name, err := p.check(ctx, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	fi, err := p.fs.Stat(name)
	if err != nil {
		return ObjectInfo{}, err
	}
	if fi.IsDir() {
		return ObjectInfo{}, notAnObject(name)
	}
	return ObjectInfo{Key: key, Size: fi.Size()}, nil
}

// List walks the directories the prefix can match. A directory removed
// while it is walked is skipped; an empty one is yielded as a marker.
func (p *POSIX) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		// A prefix is a key cut anywhere: "chk-", "chk-1/", "shared/op".
		if prefix != "" && ValidKey(prefix+"x") != nil {
			yield(ObjectInfo{}, fmt.Errorf("list %q: %w", prefix, ErrInvalidKey))
			return
		}
		dir, base := "", prefix
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
			dir, base = prefix[:i+1], prefix[i+1:]
		}
		p.walk(ctx, dir, base, dir != "" && base == "", yield)
	}
}

// walk yields the entries of directory dir (a key prefix ending in "/", or
// "" for the root) whose names start with base, recursively. It returns
// false when the caller stopped.
func (p *POSIX) walk(ctx context.Context, dir, base string, marker bool, yield func(ObjectInfo, error) bool) bool {
	if err := ctx.Err(); err != nil {
		return yield(ObjectInfo{}, fmt.Errorf("list %s: %w", p.Path(dir), err))
	}
	name := p.root
	if dir != "" {
		name = p.Path(dir)
	}
	entries, err := p.fs.ReadDir(name)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return yield(ObjectInfo{}, err)
	}
	if len(entries) == 0 && marker {
		return yield(ObjectInfo{Key: dir}, nil)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), base) {
			continue
		}
		key := dir + e.Name()
		if e.IsDir() {
			if !p.walk(ctx, key+"/", "", true, yield) {
				return false
			}
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			if !yield(ObjectInfo{}, err) {
				return false
			}
			continue
		}
		if !yield(ObjectInfo{Key: key, Size: fi.Size()}, nil) {
			return false
		}
	}
	return true
}

// DeleteBatch removes the files of keys (a marker key: its directory, when
// empty), then the directories that became empty, up to the root.
func (p *POSIX) DeleteBatch(ctx context.Context, keys []string) error {
	var failed []KeyError
	dirs := map[string]bool{}
	for _, key := range keys {
		if err := ValidKey(key); err != nil {
			failed = append(failed, KeyError{key, err})
			continue
		}
		if err := ctx.Err(); err != nil {
			failed = append(failed, KeyError{key, err})
			continue
		}
		err := p.fs.Remove(p.Path(key))
		if strings.HasSuffix(key, "/") && err != nil && !errors.Is(err, fs.ErrNotExist) {
			if fi, serr := p.fs.Stat(p.Path(key)); serr == nil && fi.IsDir() {
				err = nil // a marker of a directory that is not empty: there is none
			}
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			failed = append(failed, KeyError{key, err})
			continue
		}
		dirs[path.Dir(strings.TrimSuffix(key, "/"))] = true
	}
	p.prune(dirs)
	if len(failed) > 0 {
		return &DeleteError{Failed: failed}
	}
	return nil
}

// prune removes the directories of dirs (keys, "." for the root) and their
// parents while they are empty; the root stays. rmdir(2) never removes a
// directory that is not empty, so a concurrent writer loses nothing (it
// makes the directory again).
func (p *POSIX) prune(dirs map[string]bool) {
	// Deepest first, so a parent is tried after its children.
	order := slices.SortedFunc(func(yield func(string) bool) {
		for d := range dirs {
			if !yield(d) {
				return
			}
		}
	}, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	tried := map[string]bool{}
	for _, d := range order {
		for ; d != "." && d != "/" && !tried[d]; d = path.Dir(d) {
			tried[d] = true
			if p.fs.Remove(p.Path(d)) != nil {
				break
			}
		}
	}
}

// Sync fsyncs the directory of prefix. A directory that does not exist
// holds nothing to make durable.
func (p *POSIX) Sync(ctx context.Context, prefix string) error {
	name := p.root
	if prefix != "" {
		name = p.Path(prefix)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if err := p.fs.SyncDir(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// MakeDir makes the directory of prefix (and its parents).
func (p *POSIX) MakeDir(ctx context.Context, prefix string) error {
	name := p.root
	if prefix != "" {
		if err := ValidKey(prefix); err != nil {
			return err
		}
		name = p.Path(prefix)
	}
	return p.fs.MkdirAll(name, 0o755)
}

// Lock locks the file of key with the FS's Locker (flock(2) for OSFS).
func (p *POSIX) Lock(key, holder string) (func() error, error) {
	l, ok := p.fs.(Locker)
	if !ok {
		return nil, fmt.Errorf("lock %s: the file system cannot lock: %w", p.Path(key), errors.ErrUnsupported)
	}
	if err := ValidKey(key); err != nil {
		return nil, err
	}
	return l.Lock(p.Path(key), holder)
}
