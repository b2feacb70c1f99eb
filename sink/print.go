package sink

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
)

// PrintOption configures a Print sink.
type PrintOption func(*printConfig)

type printConfig struct {
	w      io.Writer
	prefix string
}

// PrintTo makes the sink write to w instead of os.Stdout (a nil w means
// os.Stdout).
func PrintTo(w io.Writer) PrintOption {
	return func(c *printConfig) { c.w = w }
}

// PrintPrefix sets the sink identifier printed at the start of every line,
// like the sinkIdentifier of Flink's print().
func PrintPrefix(prefix string) PrintOption {
	return func(c *printConfig) { c.prefix = prefix }
}

// Print is a sink that writes every record as one line, formatted with
// fmt's %v, like Flink's print sink: with parallelism > 1 each line starts
// with the 1-based subtask number and "> " ("2> value"), after the prefix
// if one is set ("id:2> value"); with parallelism 1 only the prefix is
// printed ("id> value"), or nothing. Lines of concurrent writers are never
// interleaved. If the io.Writer has a Flush() error method (a
// *bufio.Writer), Flush calls it. The zero value prints to os.Stdout with
// no prefix; a Print must not be copied after first use.
type Print[T any] struct {
	mu  sync.Mutex // serialises lines on cfg.w
	cfg printConfig
}

var _ Sink[int] = (*Print[int])(nil)

// NewPrint returns a Print sink writing to os.Stdout unless PrintTo says
// otherwise.
func NewPrint[T any](opts ...PrintOption) *Print[T] {
	p := &Print[T]{cfg: printConfig{w: os.Stdout}}
	for _, o := range opts {
		o(&p.cfg)
	}
	return p
}

// out is the io.Writer lines go to.
func (p *Print[T]) out() io.Writer {
	if p.cfg.w == nil {
		return os.Stdout
	}
	return p.cfg.w
}

// NewWriter makes the writer of subtask ctx.Subtask.
func (p *Print[T]) NewWriter(ctx WriterContext) (Writer[T], error) {
	if err := checkWriterContext(ctx); err != nil {
		return nil, fmt.Errorf("print sink: %w", err)
	}
	prefix := p.cfg.prefix
	if ctx.Parallelism > 1 {
		if prefix != "" {
			prefix += ":"
		}
		prefix += strconv.Itoa(ctx.Subtask + 1)
	}
	if prefix != "" {
		prefix += "> "
	}
	return &printWriter[T]{sink: p, subtask: ctx.Subtask, prefix: prefix}, nil
}

type printWriter[T any] struct {
	sink    *Print[T]
	subtask int
	prefix  string
	line    []byte // reused line buffer
	closed  bool
}

func (w *printWriter[T]) Write(v T, ts int64) error {
	if w.closed {
		return fmt.Errorf("print sink subtask %d: write: %w", w.subtask, ErrClosed)
	}
	w.line = append(w.line[:0], w.prefix...)
	w.line = fmt.Appendln(w.line, v)
	p := w.sink
	p.mu.Lock()
	_, err := p.out().Write(w.line)
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("print sink subtask %d: write: %w", w.subtask, err)
	}
	return nil
}

func (w *printWriter[T]) Flush(endOfInput bool) error {
	if w.closed {
		return fmt.Errorf("print sink subtask %d: flush: %w", w.subtask, ErrClosed)
	}
	f, ok := w.sink.out().(interface{ Flush() error })
	if !ok {
		return nil
	}
	p := w.sink
	p.mu.Lock()
	err := f.Flush()
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("print sink subtask %d: flush: %w", w.subtask, err)
	}
	return nil
}

func (w *printWriter[T]) Close() error {
	w.closed = true
	return nil
}
