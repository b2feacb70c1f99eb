package filesink

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/sluicehq/sluice/sink"
)

// committer publishes handed-over files by renaming them from
// <dir>/.inprogress into <dir>. Any committer can commit any committable of
// the sink, whichever subtask wrote it.
type committer struct {
	dir     string
	inDir   string
	subtask int
	hook    func(checkpointID int64) error
	logger  *slog.Logger
	closed  atomic.Bool
}

var _ sink.Committer = (*committer)(nil)

// NewCommitter makes the committer of subtask ctx.Subtask, making the
// directories if missing.
func (s *Sink[T]) NewCommitter(ctx sink.WriterContext) (sink.Committer, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	inDir := filepath.Join(s.dir, inProgressDirName)
	if err := os.MkdirAll(inDir, 0o755); err != nil {
		return nil, fmt.Errorf("file sink committer %d: %w", ctx.Subtask, err)
	}
	return &committer{
		dir:     s.dir,
		inDir:   inDir,
		subtask: ctx.Subtask,
		hook:    s.opts.commitHook,
		logger:  s.opts.logger,
	}, nil
}

// Commit renames the in-progress file of every committable to its final
// name, in order, then fsyncs both directories. It is idempotent: a
// committable whose final file exists with the expected size and checksum
// is already committed. It fails with ErrDataLoss when neither file
// exists, ErrCorrupt when the in-progress file is not what the committable
// describes, ErrConflict when the final file exists with other contents and
// ErrInvalidCommittable for bytes it cannot decode; the error names the
// file and the checkpoint. The commit hook, if set, runs first.
func (c *committer) Commit(ctx context.Context, checkpointID int64, committables [][]byte) (err error) {
	if c.closed.Load() {
		return fmt.Errorf("file sink committer %d: commit of checkpoint %d: %w", c.subtask, checkpointID, sink.ErrClosed)
	}
	if c.hook != nil {
		if err := c.hook(checkpointID); err != nil {
			return fmt.Errorf("file sink: commit hook for checkpoint %d: %w", checkpointID, err)
		}
	}
	parsed := make([]Committable, len(committables))
	for i, b := range committables {
		p, err := ParseCommittable(b)
		if err != nil {
			return fmt.Errorf("file sink: commit of checkpoint %d: committable %d of %d: %w", checkpointID, i+1, len(committables), err)
		}
		parsed[i] = p
	}
	renamed := 0
	defer func() {
		if renamed == 0 {
			return
		}
		if serr := errors.Join(syncDir(c.dir), syncDir(c.inDir)); serr != nil {
			err = errors.Join(err, fmt.Errorf("file sink: commit of checkpoint %d: %w", checkpointID, serr))
		}
	}()
	for _, p := range parsed {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("file sink: commit of checkpoint %d, before %s: %w", checkpointID, p, err)
		}
		did, err := c.commitOne(p)
		if err != nil {
			return fmt.Errorf("file sink: commit of checkpoint %d: %s: %w", checkpointID, p, err)
		}
		if did {
			renamed++
		}
	}
	c.logger.Debug("file sink committed", "dir", c.dir, "checkpoint", checkpointID,
		"committables", len(parsed), "renamed", renamed)
	return nil
}

// commitOne publishes one file; renamed is false when it was already
// committed.
func (c *committer) commitOne(p Committable) (renamed bool, err error) {
	final := filepath.Join(c.dir, p.Final)
	inProgress := filepath.Join(c.inDir, p.InProgress)
	if done, err := c.alreadyCommitted(p, final, inProgress); done || err != nil {
		return false, err
	}
	if err := verifyFile(inProgress, p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, c.vanished(p, final, inProgress)
		}
		return false, err
	}
	if err := os.Rename(inProgress, final); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, c.vanished(p, final, inProgress)
		}
		return false, fmt.Errorf("publish: %w", err)
	}
	return true, nil
}

// vanished handles an in-progress file that is not there: another
// committer may just have committed it; otherwise the data is lost.
func (c *committer) vanished(p Committable, final, inProgress string) error {
	done, err := c.alreadyCommitted(p, final, inProgress)
	if err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("neither %s nor %s exists: %w", inProgress, final, ErrDataLoss)
	}
	return nil
}

// alreadyCommitted reports whether the final file exists with the contents
// p describes; it deletes a leftover in-progress copy if there is one.
func (c *committer) alreadyCommitted(p Committable, final, inProgress string) (bool, error) {
	err := verifyFile(final, p)
	switch {
	case err == nil:
		if rerr := os.Remove(inProgress); rerr == nil {
			c.logger.Info("file sink deleted in-progress copy of a committed file", "file", final, "in_progress", inProgress)
		} else if !errors.Is(rerr, fs.ErrNotExist) {
			c.logger.Warn("file sink cannot delete in-progress copy of a committed file", "file", final, "in_progress", inProgress, "err", rerr)
		}
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case errors.Is(err, ErrCorrupt):
		return false, fmt.Errorf("%w: %w", err, ErrConflict)
	default:
		return false, err
	}
}

// verifyFile checks that the file at path has the size and checksum that
// p records.
func verifyFile(path string, p Committable) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("verify %s: %w", path, err)
	}
	if n != p.Size {
		return fmt.Errorf("%s has %d bytes, want %d: %w", path, n, p.Size, ErrCorrupt)
	}
	if sum := h.Sum32(); sum != p.CRC32C {
		return fmt.Errorf("%s has CRC-32C %08x, want %08x: %w", path, sum, p.CRC32C, ErrCorrupt)
	}
	return nil
}

// Close marks the committer closed; it holds no resources.
func (c *committer) Close() error {
	c.closed.Store(true)
	return nil
}
