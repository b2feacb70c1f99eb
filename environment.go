package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
)

// ErrInvalidOption is returned (wrapped) by Execute for an option with a
// value that cannot work; the message names the option.
var ErrInvalidOption = config.ErrInvalidOption

// ErrJobCanceled is returned by Execute and Job.Wait when the job was
// cancelled; it also matches context.Canceled.
var ErrJobCanceled = runtime.ErrJobCanceled

// Job is the handle of a running job (see Environment.ExecuteAsync).
type Job = runtime.Job

// ResourceRequirements are the parallelism bounds of a job's vertices, by
// index in its graph (Job.SetResourceRequirements, Job.Rescale).
type ResourceRequirements = runtime.ResourceRequirements

// ParallelismBounds are one vertex's entry of ResourceRequirements.
type ParallelismBounds = runtime.ParallelismBounds

// Environment holds a job's settings and the dataflow built on it.
type Environment struct {
	cfg  runtime.Config
	plan runtime.Plan
	errs []error
	uids map[string]string // uid -> operator name
	// validators check sources and sinks against the checkpoint settings.
	validators []checkpointValidator
	// jobAware are the sinks told the job's facts before it starts.
	jobAware []jobAwareSink
	// jobObservers are given the job once it started.
	jobObservers []JobObserver
	// launch runs the job other than wholly in this process, when
	// launchSet (WithLauncher, the configuration); else the environment
	// says (Launcher).
	launch    Launcher
	launchSet bool
	// memory is the taskmanager.memory.* configuration.
	memory memory.Config
	// codecFormat is the format of the codecs the environment picks
	// (WithDefaultCodec).
	codecFormat codec.Format
	// workerObservers are given the worker view in a worker process.
	workerObservers []WorkerObserver
	// standbyObservers are told when a coordinator stands by.
	standbyObservers []StandbyObserver
	// conf is the configuration of WithConfiguration.
	conf *Configuration
	// autoscale is the autoscaler's settings (WithAutoscaler, the
	// job.autoscaler.* keys); nil: Flink's defaults, off.
	autoscale *AutoscalerConfig
	// pendingQueryables are the queryable states declared on operators
	// not yet bound to their key codec (bindQueryables); queryNames the
	// bound ones' names, with their operator's name.
	pendingQueryables map[*runtime.Node][]queryableDecl
	queryNames        map[string]string
	// windowBuffer bounds the in-memory buffer of session windows
	// (WithWindowBufferLimit).
	windowBuffer int
}

// Option configures an Environment.
type Option func(*Environment)

// NewEnvironment returns an environment with Flink's defaults: parallelism
// 1, max parallelism 128, 32 KiB network buffers, a 100 ms buffer timeout,
// 2 exclusive buffers per channel and 8 floating buffers per gate.
func NewEnvironment(opts ...Option) *Environment {
	e := &Environment{cfg: runtime.DefaultConfig(), uids: map[string]string{},
		pendingQueryables: map[*runtime.Node][]queryableDecl{}, queryNames: map[string]string{},
		windowBuffer: operators.DefaultWindowBufferLimit}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Configure applies more options to an environment already made, as if
// they came last in NewEnvironment: the job runner adds its logger and
// observers with it. Options given after the job started have no effect
// on it.
func (e *Environment) Configure(opts ...Option) {
	for _, o := range opts {
		o(e)
	}
}

// Err returns what the options given so far refuse, which Execute
// returns: bad values, and keys of WithConfiguration, each naming the
// option or key.
func (e *Environment) Err() error { return errors.Join(e.errs...) }

// addErr records an error Execute returns; nil is none.
func (e *Environment) addErr(err error) {
	if err != nil {
		e.errs = append(e.errs, err)
	}
}

func positive(e *Environment, name string, v int) bool {
	if v < 1 {
		e.addErr(fmt.Errorf("%w: %s must be at least 1, got %d", ErrInvalidOption, name, v))
		return false
	}
	return true
}

// WithJobName names the job in logs and metrics.
func WithJobName(name string) Option { return func(e *Environment) { e.cfg.JobName = name } }

// WithParallelism sets the default parallelism of operators (Flink's
// parallelism.default).
func WithParallelism(n int) Option {
	return func(e *Environment) {
		if positive(e, "parallelism", n) {
			e.cfg.Parallelism = n
		}
	}
}

// WithMaxParallelism sets the number of key groups (Flink's
// pipeline.max-parallelism), default 128. Keyed state can be rescaled up to
// this parallelism.
func WithMaxParallelism(n int) Option {
	return func(e *Environment) {
		if positive(e, "max parallelism", n) {
			if n > 1<<15 {
				e.addErr(fmt.Errorf("%w: max parallelism %d exceeds 32768", ErrInvalidOption, n))
				return
			}
			e.cfg.MaxParallelism = n
		}
	}
}

// WithBufferSize sets the size of a network buffer in bytes (Flink's
// taskmanager.memory.segment-size), default 32 KiB.
func WithBufferSize(bytes int) Option {
	return func(e *Environment) {
		if bytes < 64 {
			e.addErr(fmt.Errorf("%w: buffer size must be at least 64 bytes, got %d", ErrInvalidOption, bytes))
			return
		}
		e.cfg.Network.BufferSize = bytes
	}
}

// WithBufferTimeout sets how long a partly filled buffer of a busy task
// waits before it is sent (Flink's execution.buffer-timeout), default
// 100 ms; 0 sends every record at once. A task with nothing to read sends
// at once its buffers for channels in its own process; those for other
// processes wait for the timeout, as in Flink.
func WithBufferTimeout(d time.Duration) Option {
	return func(e *Environment) {
		if d < 0 {
			e.addErr(fmt.Errorf("%w: buffer timeout must not be negative, got %v", ErrInvalidOption, d))
			return
		}
		e.cfg.BufferTimeout = d
	}
}

// WithExclusiveBuffers sets the exclusive buffers per input channel
// (Flink's taskmanager.network.memory.buffers-per-channel), default 2.
func WithExclusiveBuffers(n int) Option {
	return func(e *Environment) {
		if positive(e, "exclusive buffers per channel", n) {
			e.cfg.Network.ExclusiveBuffersPerChannel = n
		}
	}
}

// WithFloatingBuffers sets the floating buffers per input gate (Flink's
// taskmanager.network.memory.floating-buffers-per-gate), default 8.
func WithFloatingBuffers(n int) Option {
	return func(e *Environment) {
		if n < 0 {
			e.addErr(fmt.Errorf("%w: floating buffers per gate must not be negative, got %d", ErrInvalidOption, n))
			return
		}
		e.cfg.Network.FloatingBuffersPerGate = n
	}
}

// DefaultWindowBufferLimit is the default of WithWindowBufferLimit.
const DefaultWindowBufferLimit = operators.DefaultWindowBufferLimit

// WithWindowBufferLimit bounds the sessions an event-time session window
// combines in memory before it writes them into keyed state, default
// 100 000 (Flink's table.exec.window-agg.buffer-size-limit); 0 turns
// the buffer off, so every record reads and writes keyed state. The
// buffer serves windows with an incremental ReduceWindow or
// AggregateWindow function (with or without a ProcessWindowFunction),
// the default trigger and no evictor; the others take the per-record
// path. It relies, as merging windows do, on the reduce function being
// associative and commutative, and on an AggregateFunction's Merge
// agreeing with Add (merging a new accumulator changes nothing).
func WithWindowBufferLimit(n int) Option {
	return func(e *Environment) {
		if n < 0 {
			e.addErr(fmt.Errorf("%w: window buffer limit must not be negative, got %d", ErrInvalidOption, n))
			return
		}
		e.windowBuffer = n
	}
}

// WithChaining turns operator chaining on (the default) or off
// (pipeline.operator-chaining).
func WithChaining(on bool) Option { return func(e *Environment) { e.cfg.Chaining = on } }

// WithAutoWatermarkInterval sets how often sources emit periodic watermarks
// (Flink's pipeline.auto-watermark-interval), default 200 ms.
func WithAutoWatermarkInterval(d time.Duration) Option {
	return func(e *Environment) {
		if d <= 0 {
			e.addErr(fmt.Errorf("%w: auto watermark interval must be positive, got %v", ErrInvalidOption, d))
			return
		}
		e.cfg.AutoWatermarkInterval = d
	}
}

// WithDefaultCodec sets the format of the codecs the environment picks for
// composite types where none is given (codec.DefaultFor): the records of
// every operator's output (network edges, checkpointed in-flight data),
// side outputs, window contents and accumulators, Reduce's state.
// codec.FormatBinary (codec.Binary, the default) or codec.FormatJSON
// (codec.JSON, the default of earlier versions); Binary reads JSON, so a
// job switched to it restores what JSON wrote, while one switched back to
// JSON refuses state Binary wrote. The config key is
// pipeline.default-codec (binary, json). It does not change keys
// (codec.DefaultKey) nor the state descriptors a function makes without a
// codec (codec.Default, Binary: give Codec: codec.JSON[T]{} for JSON).
func WithDefaultCodec(f codec.Format) Option {
	return func(e *Environment) {
		if f != codec.FormatBinary && f != codec.FormatJSON {
			e.addErr(fmt.Errorf("%w: default codec %v: want codec.FormatBinary or codec.FormatJSON", ErrInvalidOption, f))
			return
		}
		e.codecFormat = f
	}
}

// defaultCodec is the codec of T that env picks where none is given.
func defaultCodec[T any](env *Environment) Codec[T] { return codec.DefaultFor[T](env.codecFormat) }

// WithLogger sets the job's logger; the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(e *Environment) { e.cfg.Logger = l } }

// Config returns the job-wide settings.
func (e *Environment) Config() runtime.Config { return e.cfg }

// Plan returns the dataflow built so far.
func (e *Environment) Plan() *runtime.Plan { return &e.plan }

// ExecuteAsync starts the job and returns its handle: Wait, Cancel, Status
// and Metrics. Cancelling ctx suspends the job (ErrJobSuspended): it
// stops, keeping its latest checkpoint for the next run; Job.Cancel
// cancels it.
func (e *Environment) ExecuteAsync(ctx context.Context) (*Job, error) {
	e.checkQueryables()
	if len(e.errs) > 0 {
		return nil, errors.Join(e.errs...)
	}
	if err := e.cfg.Network.Validate(); err != nil {
		return nil, fmt.Errorf("%w: network: %w", ErrInvalidOption, err)
	}
	if err := e.bindSinks(); err != nil {
		return nil, err
	}
	if err := e.validateCheckpointing(); err != nil {
		return nil, err
	}
	if err := e.validateAutoscaler(); err != nil {
		return nil, err
	}
	l, err := e.Launcher()
	if err != nil {
		return nil, err
	}
	if l != nil && l.Worker() {
		return nil, ErrWorkerRole
	}
	if err := e.installMemory(); err != nil {
		return nil, err
	}
	var j *Job
	if l != nil {
		j, err = l.Start(ctx, &e.plan, e.cfg, e.standby)
	} else {
		j, err = runtime.Execute(ctx, &e.plan, e.cfg)
	}
	if err != nil {
		return nil, err
	}
	if err := e.startAutoscaler(ctx, j); err != nil {
		return nil, err
	}
	for _, o := range e.jobObservers {
		o.ObserveJob(j)
	}
	return j, nil
}

// Execute runs the job until every bounded source has finished, ctx is
// cancelled (ErrJobSuspended: the job is suspended, its latest checkpoint
// kept) or the job fails (the error names the operator, the subtask and
// the cause).
func (e *Environment) Execute(ctx context.Context) error {
	if l, err := e.Launcher(); err == nil && l != nil && l.Worker() {
		e.checkQueryables()
		if len(e.errs) > 0 {
			return errors.Join(e.errs...)
		}
		if err := e.bindSinks(); err != nil {
			return err
		}
		if err := e.installMemory(); err != nil {
			return err
		}
		return l.Run(ctx, &e.plan, e.cfg, e.workerStarted)
	}
	j, err := e.ExecuteAsync(ctx)
	if err != nil {
		return err
	}
	return j.Wait()
}
