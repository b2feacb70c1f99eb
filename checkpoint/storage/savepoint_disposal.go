package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrNotASavepoint is returned (wrapped) by DisposeSavepoint for a path
// whose _metadata is a checkpoint's: a job's checkpoints share files and
// are the job's to delete.
var ErrNotASavepoint = errors.New("not a savepoint")

// DisposeSavepoint deletes the savepoint at path (its directory or its
// _metadata; a file path on fsys, nil for the OS, or a URL of a registered
// scheme), as Flink's savepoint disposal: its _metadata first, then every
// other file under the directory. Only a directory whose _metadata reads
// as a savepoint is deleted.
func DisposeSavepoint(ctx context.Context, fsys FS, path string, schemes map[string]OpenFunc) error {
	dir := strings.TrimRight(path, "/")
	if p, name := splitLocation(dir); name == metadataName {
		dir = p
	}
	parent, name := splitLocation(dir)
	b, err := Open(ctx, fsys, parent, schemes)
	if err != nil {
		return fmt.Errorf("dispose savepoint %s: %w", path, err)
	}
	snap, err := readSnapshot(b, name+"/")
	if err != nil {
		return fmt.Errorf("dispose savepoint %s: %w", path, err)
	}
	if snap.Metadata.Kind != KindSavepoint {
		return fmt.Errorf("dispose savepoint %s: its _metadata is a %s: %w", path, snap.Metadata.Kind, ErrNotASavepoint)
	}
	if err := discardPrefix(ctx, b, name+"/"); err != nil {
		return fmt.Errorf("dispose savepoint %s: %w", path, err)
	}
	return nil
}
