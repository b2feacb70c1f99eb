package rocksdb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockFileName is the working directory's lock file.
const lockFileName = "LOCK"

// lockDir takes the lock of a backend's working directory dir: an
// exclusive flock(2) on dir/LOCK, which another backend in this process
// (a second open file) or in another is refused (ErrLocked, naming the
// database directory dbDir). It goes with the open file: a process that
// dies, however it dies, releases it. RocksDB's own lock on the database
// is held besides, once it is open; this one also covers the time
// before (New defers the open).
func lockDir(dir, dbDir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("rocksdb backend: lock file of %s: %w", dbDir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("rocksdb backend: open database %s: %w (lock file %s)", dbDir, ErrLocked, path)
		}
		return nil, fmt.Errorf("rocksdb backend: lock %s: %w", path, err)
	}
	return f, nil
}

// unlockDir releases the working directory's lock. The file stays:
// removing it would let a backend that opened it before the removal lock
// a file no other can see.
func (b *Backend) unlockDir() {
	if b.lock != nil {
		_ = b.lock.Close()
		b.lock = nil
	}
}
