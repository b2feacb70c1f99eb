package storage

import (
	"errors"
)

var (
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
