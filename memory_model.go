package sluice

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/sluicehq/sluice/memory"
)

// WithProcessMemory sets taskmanager.memory.process.size: the memory of
// the whole process, which Execute splits (package memory) into an
// overhead, managed memory for RocksDB, network buffers, the Kafka
// clients' buffers and the task heap, and from which it sets the Go
// runtime's soft limit (debug.SetMemoryLimit) unless $GOMEMLIMIT is set.
// Without it the shares are those of memory.DefaultProcessSize and the Go
// limit is left alone.
func WithProcessMemory(bytes int64) Option {
	return func(e *Environment) {
		if bytes <= 0 {
			e.addErr(fmt.Errorf("%w: taskmanager.memory.process.size must be positive, got %d", ErrInvalidOption, bytes))
			return
		}
		e.memory.ProcessSize = bytes
	}
}

// WithMemoryConfig edits the memory configuration (the
// taskmanager.memory.* keys); see memory.Config.
func WithMemoryConfig(edit func(c *memory.Config)) Option {
	return func(e *Environment) { edit(&e.memory) }
}

// installMemory computes the process's budget, installs it for the
// connectors and backends, and sets the Go limit from an explicit
// process size.
func (e *Environment) installMemory() error {
	b, err := e.memory.Budget()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	memory.Install(b)
	limit := memory.ApplyGoLimit(b, os.Getenv)
	if l := e.cfg.Logger; l != nil {
		l.Debug("memory budget", slog.Int64("process", b.Process), slog.Bool("explicit", b.Explicit),
			slog.Int64("managed", b.Managed), slog.Int64("network", b.Network),
			slog.Int64("kafka.source", b.KafkaSource), slog.Int64("kafka.sink", b.KafkaSink),
			slog.Int64("task.heap", b.TaskHeap), slog.Int64("go.limit", limit))
	}
	return nil
}
