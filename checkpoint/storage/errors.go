package storage

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt is wrapped by every error about a file whose content is
	// not what was written.
	ErrCorrupt = errors.New("corrupt checkpoint file")
	// ErrChecksumMismatch: the CRC32C of a file differs from the recorded
	// one. It wraps ErrCorrupt.
	ErrChecksumMismatch = fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	// ErrTruncated: a file is shorter (or longer) than recorded. It wraps
	// ErrCorrupt.
	ErrTruncated = fmt.Errorf("%w: wrong length (truncated?)", ErrCorrupt)
	// ErrUnsupportedVersion: _metadata written by a newer, incompatible
	// version.
	ErrUnsupportedVersion = errors.New("unsupported checkpoint metadata version")
	// ErrInvalidMetadata: metadata that cannot be written or used as it is
	// (a path that leaves its directory, a savepoint with shared files...).
	ErrInvalidMetadata = errors.New("invalid checkpoint metadata")
	// ErrSharedInSavepoint: savepoints are self-contained and may not write
	// or reference shared files. It wraps ErrInvalidMetadata.
	ErrSharedInSavepoint = fmt.Errorf("%w: a savepoint cannot use shared files (savepoints are self-contained)", ErrInvalidMetadata)
	// ErrNoCheckpoint: the job has no completed checkpoint (a fresh start).
	ErrNoCheckpoint = errors.New("no completed checkpoint")
	// ErrNoUsableCheckpoint: completed checkpoints exist but none can be
	// restored; the error lists every failed file.
	ErrNoUsableCheckpoint = errors.New("no usable checkpoint")
)

// FileError is an error about one file of a checkpoint.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

func fileError(path string, err error) error {
	var fe *FileError
	if errors.As(err, &fe) {
		return err
	}
	return &FileError{Path: path, Err: err}
}
