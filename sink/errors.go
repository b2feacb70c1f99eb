package sink

import (
	"errors"
	"fmt"
)

// ErrClosed is returned (wrapped) by a test sink's Writer used after Close.
var ErrClosed = errors.New("sink: writer closed")

// ErrInvalidWriterContext is returned (wrapped) by NewWriter when the
// subtask index is outside [0, Parallelism) or Parallelism < 1.
var ErrInvalidWriterContext = errors.New("sink: invalid writer context")

func checkWriterContext(ctx WriterContext) error {
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return fmt.Errorf("subtask %d of parallelism %d: %w", ctx.Subtask, ctx.Parallelism, ErrInvalidWriterContext)
	}
	return nil
}
