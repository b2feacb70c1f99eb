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
// scheme), as Flink's savepoint disposal: its _metadata first, then the
// files the _metadata references under the directory, and nothing else:
// another file in the directory (a user's, another savepoint's) stays, as
// does a file the metadata names outside it. Only a directory whose
// _metadata reads as a savepoint is disposed of.
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
	prefix := name + "/"
	var files []string
	seen := map[string]bool{}
	for _, r := range snap.Metadata.Handles() {
		h := r.Handle
		if h.IsInline() || h.Shared {
			continue
		}
		key := snap.key(h)
		if !strings.HasPrefix(key, prefix) || ValidKey(key) != nil || seen[key] {
			continue // not the savepoint's own file
		}
		seen[key] = true
		files = append(files, key)
	}
	if err := b.DeleteBatch(ctx, []string{prefix + metadataName}); err != nil {
		return fmt.Errorf("dispose savepoint %s: delete its _metadata: %w", path, err)
	}
	if len(files) > 0 {
		if err := b.DeleteBatch(ctx, files); err != nil {
			return fmt.Errorf("dispose savepoint %s: %w", path, err)
		}
	}
	return nil
}
