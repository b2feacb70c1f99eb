package sluicetest

import (
	"log/slog"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/state"
)

// Option configures a harness.
type Option func(*settings)

type settings struct {
	parallelism    int
	maxParallelism int
	backend        state.BackendFactory
	restoreFrom    string
	processingTime int64
	envOptions     []sluice.Option
	opOptions      []sluice.OpOption
	logger         *slog.Logger
}

// WithParallelism runs the operator as n subtasks (default 1, or the
// parallelism the operator sets for itself): records are routed to them
// as the job routes them, and a restore redistributes the state over them
// as a rescale does.
func WithParallelism(n int) Option { return func(s *settings) { s.parallelism = n } }

// WithMaxParallelism sets the number of key groups (default 128, as the
// job's pipeline.max-parallelism).
func WithMaxParallelism(n int) Option { return func(s *settings) { s.maxParallelism = n } }

// WithStateBackend makes the operator's keyed state backend with f
// instead of the heap backend (for example the RocksDB backend's
// factory), as sluice.WithStateBackend does for a job.
func WithStateBackend(f state.BackendFactory) Option { return func(s *settings) { s.backend = f } }

// RestoreFrom starts the operator from the state it has in a snapshot: a
// harness's Snapshot().Path, or the directory of a real job's checkpoint
// or savepoint (the one holding _metadata). The operator's uid
// (sluice.UID) must be the one it has there.
func RestoreFrom(path string) Option { return func(s *settings) { s.restoreFrom = path } }

// WithProcessingTime sets the processing time the harness starts at, in
// Unix milliseconds (default 0). Processing time moves only when the test
// moves it (SetProcessingTime).
func WithProcessingTime(ms int64) Option { return func(s *settings) { s.processingTime = ms } }

// WithEnvironment applies options to the environment the operator is
// built in, as the job's NewEnvironment would (sluice.WithDefaultCodec,
// for example).
func WithEnvironment(opts ...sluice.Option) Option {
	return func(s *settings) { s.envOptions = append(s.envOptions, opts...) }
}

// WithOperatorOptions gives the operator built by the shortcut
// constructors (KeyedProcess, KeyedCoProcess, ...) its options, such as
// the uid its state has in a real job's snapshot (sluice.UID).
func WithOperatorOptions(opts ...sluice.OpOption) Option {
	return func(s *settings) { s.opOptions = append(s.opOptions, opts...) }
}

// WithLogger sets the logger the operator's context carries (default: the
// test's log, warnings and errors only).
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.logger = l } }
