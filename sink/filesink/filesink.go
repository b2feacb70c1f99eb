// Package filesink owns the file-based two-phase-commit sink for tests: each
// writer writes the records of a checkpoint interval into an in-progress
// file that no reader sees, hands the file over as a committable at the
// checkpoint barrier, and the committer publishes it by renaming it into the
// sink's directory once the checkpoint completes. ReadCommitted reads back
// what was published, so exactly-once tests can compare committed output.
//
// Layout of the directory:
//
//	<dir>/.inprogress/<subtask>-<token>-<after>-<n>   being written or handed over, invisible
//	<dir>/part-<subtask>-<checkpoint>-<seq>          committed
//
// token is random and unique per writer (one per subtask and attempt),
// after is the id of the last checkpoint the writer had passed when it
// began the file (the restored checkpoint, or 0 on a fresh start), and n
// counts the writer's files. seq is 0 (one file per subtask and checkpoint).
//
// Cleanup rule: when a writer starts it deletes the in-progress files of
// its subtask index (and, after a scale-down, of indexes >= the new
// parallelism that map onto it modulo the parallelism) whose after is >= the
// restored checkpoint id (every such file on a fresh start). Such a file
// was begun after the writer passed the barrier of the restored checkpoint,
// so only a later checkpoint can refer to it: restoring from the earlier one
// discards it. Files begun before the barrier were closed at or before it
// and may be referred to by the restored committables; they are never
// deleted by a writer, whenever the committer gets to commit them. This
// relies on checkpoint ids growing and on one sink of one job per
// directory.
package filesink

import (
	"fmt"
	"log/slog"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
)

// inProgressDirName is the directory, inside the sink's directory, of the
// files not yet committed.
const inProgressDirName = ".inprogress"

// Option configures a Sink.
type Option func(*options)

type options struct {
	commitHook func(checkpointID int64) error
	logger     *slog.Logger
}

// WithCommitHook sets a function that every Commit calls with its
// checkpoint id before it commits anything; when the function returns an
// error, Commit returns it (wrapped) and commits nothing. It is a fault
// injection point for tests ("crash after the checkpoint completed, before
// the commit"). Committers of all subtasks call it, possibly concurrently.
func WithCommitHook(hook func(checkpointID int64) error) Option {
	return func(o *options) { o.commitHook = hook }
}

// WithLogger sets the logger for cleanup and commit messages (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// Sink is a two-phase-commit sink that writes records of type T, encoded
// with a codec, into files in a directory. Records become visible (to
// ReadCommitted) only when the checkpoint that covers them completes and
// the committer has committed them. The event timestamps are not stored.
type Sink[T any] struct {
	dir   string
	codec codec.Codec[T]
	opts  options
}

var _ sink.TwoPhaseCommitSink[int] = (*Sink[int])(nil)

// New returns a sink writing into dir with codec c (codec.Default[T]() if
// c is nil). The directory is made, if missing, when the first writer or
// committer starts.
func New[T any](dir string, c codec.Codec[T], opts ...Option) *Sink[T] {
	if c == nil {
		c = codec.Default[T]()
	}
	s := &Sink[T]{dir: dir, codec: c}
	for _, o := range opts {
		o(&s.opts)
	}
	if s.opts.logger == nil {
		s.opts.logger = slog.Default()
	}
	return s
}

// Dir returns the sink's directory.
func (s *Sink[T]) Dir() string { return s.dir }

func (s *Sink[T]) check(ctx sink.WriterContext) error {
	if s.dir == "" {
		return fmt.Errorf("file sink: no directory given")
	}
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return fmt.Errorf("file sink %s: subtask %d of parallelism %d: %w", s.dir, ctx.Subtask, ctx.Parallelism, sink.ErrInvalidWriterContext)
	}
	return nil
}
