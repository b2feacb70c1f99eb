package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrJobLocked is returned (wrapped) by Storage.Lock when another process
// (or another job in this one) holds the job's directory; the error names
// the holder.
var ErrJobLocked = errors.New("job checkpoint directory is in use")

const lockName = ".lock"

// Locker is implemented by file systems that can lock a file for one
// holder at a time. OSFS does, with flock(2); the POSIX backend on a file
// system that does not leaves the job directory unlocked.
type Locker interface {
	// Lock takes the lock at path, writing holder into the file, or fails
	// with ErrJobLocked naming the holder found there.
	Lock(path, holder string) (unlock func() error, err error)
}

// Lock takes the job directory's lock for holder (who runs the job: pid,
// host, run id), held until unlock. A second holder is refused with
// ErrJobLocked naming the first. On a backend that cannot lock (not a
// LockingBackend, or a POSIX one on an FS that is not a Locker) it
// returns a no-op unlock.
func (s *Storage) Lock(holder string) (unlock func() error, err error) {
	l, ok := s.b.(LockingBackend)
	if ok {
		unlock, err = l.Lock(lockName, holder)
	}
	if !ok || errors.Is(err, errors.ErrUnsupported) {
		s.log.Debug("checkpoint storage: the backend cannot lock; job directory left unlocked", "dir", s.JobDir())
		return func() error { return nil }, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage %s: %w", s.JobDir(), err)
	}
	return unlock, nil
}

// Lock takes an exclusive flock(2) on path, without waiting. The lock
// goes with the open file, so it is released when the process dies,
// however it dies.
func (OSFS) Lock(path, holder string) (func() error, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		who, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: held by %s (lock file %s)", ErrJobLocked, strings.TrimSpace(string(who)), path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(holder+"\n"), 0)
	}
	return func() error {
		// Leave the file: removing it would let a process that opened it
		// before the removal lock a file no one else can see.
		_ = f.Truncate(0)
		return f.Close()
	}, nil
}

// LockHolder reports whether the job directory dir is locked by a running
// job, and by whom, without taking the lock for longer than the probe
// (for tools that list jobs offline).
func LockHolder(dir string) (holder string, held bool, err error) {
	path := filepath.Join(dir, lockName)
	unlock, err := OSFS{}.Lock(path, "probe by pid "+strconv.Itoa(os.Getpid()))
	if errors.Is(err, ErrJobLocked) {
		who, _ := os.ReadFile(path)
		return strings.TrimSpace(string(who)), true, nil
	}
	if err != nil {
		return "", false, err
	}
	return "", false, unlock()
}
