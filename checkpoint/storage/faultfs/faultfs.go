// Package faultfs wraps a storage.FS to inject failures into checkpoint
// storage in tests (the POSIX backend works through it, so every Backend
// operation meets the faults of the file operations it makes): errors on chosen operations and paths (disk full,
// permission denied...), torn writes that leave part of a buffer on disk,
// and a byte budget after which every write fails with ENOSPC. In the
// spirit of pebble's vfs/errorfs.
package faultfs

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// Op is a kind of file-system operation.
type Op uint8

const (
	OpAny Op = iota
	OpCreate
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpClose
	OpRename // rename(2), and link(2) (see FS.Link)
	OpRemove
	OpRemoveAll
	OpMkdirAll
	OpReadDir
	OpStat
	OpSyncDir
)

var opNames = [...]string{"any", "create", "open", "read", "write", "sync", "close", "rename", "remove", "remove-all", "mkdir-all", "read-dir", "stat", "sync-dir"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Errors that look like the real ones: errors.Is(ErrDiskFull,
// syscall.ENOSPC) and errors.Is(ErrPermission, fs.ErrPermission) hold.
var (
	ErrDiskFull   error = &fs.PathError{Op: "write", Path: "(injected)", Err: syscall.ENOSPC}
	ErrPermission error = &fs.PathError{Op: "open", Path: "(injected)", Err: syscall.EACCES}
	ErrInjected         = errors.New("injected failure")
)

// Rule makes matching operations fail.
type Rule struct {
	Op Op
	// PathContains restricts the rule to paths containing it ("" = any).
	PathContains string
	// Err is returned (ErrInjected when nil).
	Err error
	// Torn, for OpWrite: the failing write first writes this many bytes of
	// its buffer, leaving a torn file behind.
	Torn int
	// Skip lets this many matching operations succeed first.
	Skip int
	// Times is how many operations fail; 0 means every one after Skip.
	Times int
}

// FS is a storage.FS with injected faults. Safe for concurrent use.
type FS struct {
	inner storage.FS

	mu      sync.Mutex
	rules   []*rule
	budget  int64 // bytes that may still be written; <0: unlimited
	written int64
	log     []string
}

type rule struct {
	Rule
	seen, failed int
}

// New wraps inner.
func New(inner storage.FS) *FS { return &FS{inner: inner, budget: -1} }

// Inject adds a rule.
func (f *FS) Inject(r Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{Rule: r})
}

// DiskFull lets only limit more bytes be written in total; the write that
// crosses the limit writes what fits and fails with ENOSPC, as a full disk
// does. A negative limit removes the limit.
func (f *FS) DiskFull(limit int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.budget = limit
}

// Reset removes every rule and the disk limit.
func (f *FS) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules, f.budget = nil, -1
}

// Injected returns a line per injected failure so far.
func (f *FS) Injected() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// check returns the rule that fails this operation, if any.
func (f *FS) check(op Op, path string) *rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.Op != OpAny && r.Op != op || !strings.Contains(path, r.PathContains) {
			continue
		}
		r.seen++
		if r.seen <= r.Skip || r.Times > 0 && r.failed >= r.Times {
			continue
		}
		r.failed++
		f.log = append(f.log, fmt.Sprintf("%s %s", op, path))
		return r
	}
	return nil
}

func (r *rule) err(op Op, path string) error {
	err := r.Err
	if err == nil {
		err = ErrInjected
	}
	return fmt.Errorf("faultfs: %s %s: %w", op, path, err)
}

func (f *FS) fail(op Op, path string) error {
	if r := f.check(op, path); r != nil {
		return r.err(op, path)
	}
	return nil
}

func (f *FS) Create(name string) (storage.File, error) {
	if err := f.fail(OpCreate, name); err != nil {
		return nil, err
	}
	file, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, inner: file, path: name}, nil
}

func (f *FS) Open(name string) (storage.File, error) {
	if err := f.fail(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, inner: file, path: name}, nil
}

func (f *FS) Rename(oldname, newname string) error {
	if err := f.fail(OpRename, newname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

// Link fails like Rename: OpRename rules match both, the two ways a file
// is published under its final name (the POSIX backend's Put renames, its
// PutIfAbsent links, so a rule on the _metadata commit keeps matching).
// Without a Linker inside, it refuses an existing newname and renames.
func (f *FS) Link(oldname, newname string) error {
	if err := f.fail(OpRename, newname); err != nil {
		return err
	}
	if l, ok := f.inner.(storage.Linker); ok {
		return l.Link(oldname, newname)
	}
	if _, err := f.inner.Stat(newname); err == nil {
		return &fs.PathError{Op: "link", Path: newname, Err: fs.ErrExist}
	}
	return f.inner.Rename(oldname, newname)
}

func (f *FS) Remove(name string) error {
	if err := f.fail(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *FS) RemoveAll(name string) error {
	if err := f.fail(OpRemoveAll, name); err != nil {
		return err
	}
	return f.inner.RemoveAll(name)
}

func (f *FS) MkdirAll(name string, perm fs.FileMode) error {
	if err := f.fail(OpMkdirAll, name); err != nil {
		return err
	}
	return f.inner.MkdirAll(name, perm)
}

func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.fail(OpReadDir, name); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(name)
}

func (f *FS) Stat(name string) (fs.FileInfo, error) {
	if err := f.fail(OpStat, name); err != nil {
		return nil, err
	}
	return f.inner.Stat(name)
}

// Lock passes the lock to the inner file system when it can lock.
func (f *FS) Lock(path, holder string) (func() error, error) {
	if l, ok := f.inner.(storage.Locker); ok {
		return l.Lock(path, holder)
	}
	return func() error { return nil }, nil
}

func (f *FS) SyncDir(name string) error {
	if err := f.fail(OpSyncDir, name); err != nil {
		return err
	}
	return f.inner.SyncDir(name)
}

type faultFile struct {
	fs    *FS
	inner storage.File
	path  string
}

func (ff *faultFile) Read(p []byte) (int, error) {
	if err := ff.fs.fail(OpRead, ff.path); err != nil {
		return 0, err
	}
	return ff.inner.Read(p)
}

func (ff *faultFile) Write(p []byte) (int, error) {
	if r := ff.fs.check(OpWrite, ff.path); r != nil {
		n := 0
		if r.Torn > 0 {
			n, _ = ff.inner.Write(p[:min(r.Torn, len(p))])
		}
		return n, r.err(OpWrite, ff.path)
	}
	f := ff.fs
	f.mu.Lock()
	allowed := len(p)
	if f.budget >= 0 && int64(allowed) > f.budget-f.written {
		allowed = int(max(f.budget-f.written, 0))
	}
	f.written += int64(allowed)
	full := allowed < len(p)
	if full {
		f.log = append(f.log, fmt.Sprintf("disk full writing %s", ff.path))
	}
	f.mu.Unlock()
	n, err := ff.inner.Write(p[:allowed])
	if err == nil && full {
		err = fmt.Errorf("faultfs: write %s: %w", ff.path, ErrDiskFull)
	}
	return n, err
}

// Stat passes to the inner file when it has one (the POSIX backend asks
// for the size of what it opens); OpStat rules apply.
func (ff *faultFile) Stat() (fs.FileInfo, error) {
	if err := ff.fs.fail(OpStat, ff.path); err != nil {
		return nil, err
	}
	if s, ok := ff.inner.(interface{ Stat() (fs.FileInfo, error) }); ok {
		return s.Stat()
	}
	return ff.fs.inner.Stat(ff.path)
}

func (ff *faultFile) Sync() error {
	if err := ff.fs.fail(OpSync, ff.path); err != nil {
		return err
	}
	return ff.inner.Sync()
}

func (ff *faultFile) Close() error {
	if err := ff.fs.fail(OpClose, ff.path); err != nil {
		_ = ff.inner.Close()
		return err
	}
	return ff.inner.Close()
}
