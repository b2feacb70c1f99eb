package sluice

import (
	"errors"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
)

// The keys of the Environment's options, which WithConfiguration applies
// through them (the checkpoint, restart, memory, state backend, storage
// and cluster keys are their packages'; see docs/configuration.md).
var (
	keyDefaults = runtime.DefaultConfig()

	keyRestorePath = config.String("execution.state-recovery.path",
		"Restore the job from this checkpoint or savepoint (WithRestoreFrom).").DeprecatedKeys("execution.savepoint.path")
	keyClaimMode = config.Enum("execution.state-recovery.claim-mode", "Who owns the snapshot restored from: the job (CLAIM) or not.",
		parseClaimMode, "NO_CLAIM", "CLAIM").Default(NoClaim).DeprecatedKeys("execution.savepoint-restore-mode")
	keyParallelism = config.Int("parallelism.default", "The default parallelism of operators.").
			Default(keyDefaults.Parallelism).Check(checkedBy(WithParallelism))
	keyMaxParallelism = config.Int("pipeline.max-parallelism", "Key groups: keyed state rescales up to this parallelism.").
				Default(keyDefaults.MaxParallelism).Check(checkedBy(WithMaxParallelism))
	keyJobName = config.String("pipeline.name", "The job's name, in logs and metrics, and its id by default.").
			Check(func(v string) error {
			if v == "" {
				return errors.New("empty job name")
			}
			return nil
		})
	keyChaining = config.Bool("pipeline.operator-chaining.enabled", "Chain operators of equal parallelism joined by forward edges.").
			Default(keyDefaults.Chaining).DeprecatedKeys("pipeline.operator-chaining")
	keyDefaultCodec = config.Enum("pipeline.default-codec", "The format of the codecs picked for composite types.",
		codec.ParseFormat, "binary", "json").Default(codec.FormatBinary).Check(checkedBy(WithDefaultCodec))
	keyWatermarkInterval = config.Duration("pipeline.auto-watermark-interval", "How often sources emit periodic watermarks.").
				Default(keyDefaults.AutoWatermarkInterval).Check(checkedBy(WithAutoWatermarkInterval))
	keyBufferTimeout = config.Custom("execution.buffer-timeout.interval",
		"How long a partly filled network buffer of a busy task waits before it is sent (a task with nothing to read sends at once the buffers of channels in its own process); 0 sends every record at once.", "duration",
		parseBufferTimeout).Default(keyDefaults.BufferTimeout).DefaultText(config.FormatDuration(keyDefaults.BufferTimeout)).DeprecatedKeys("execution.buffer-timeout")
	keyFailoverStrategy = config.Enum("jobmanager.execution.failover-strategy",
		"What restarts when a task fails: its failover region (the tasks joined to it by forward edges; an all-to-all exchange joins all it connects), or the whole job.",
		runtime.ParseFailoverStrategy, "region", "full").Default(runtime.FailoverRegion)
	keyCancellationTimeout = config.Duration("task.cancellation.timeout",
		"How long a stopping job waits for its tasks to exit; 0: for ever.").Default(keyDefaults.CancellationTimeout)
	keySegmentSize = config.MemorySize("taskmanager.memory.segment-size", "The size of a network buffer.").
			Default(int64(keyDefaults.Network.BufferSize)).Check(func(n int64) error {
		if n > math.MaxInt32 {
			return errors.New("too large")
		}
		return checkedBy(WithBufferSize)(int(n))
	})
	keyBuffersPerChannel = config.Int("taskmanager.network.memory.buffers-per-channel", "Exclusive network buffers per input channel.").
				Default(keyDefaults.Network.ExclusiveBuffersPerChannel).Check(checkedBy(WithExclusiveBuffers))
	keyFloatingBuffers = config.Int("taskmanager.network.memory.floating-buffers-per-gate", "Floating network buffers per input gate.").
				Default(keyDefaults.Network.FloatingBuffersPerGate).Check(checkedBy(WithFloatingBuffers))
	keyWindowBuffer = config.Int("table.exec.window-agg.buffer-size-limit",
		"The sessions an event-time session window with an incremental reduce or aggregate combines in memory before it writes them into keyed state; 0: none, every record reads and writes the state.").
		Default(operators.DefaultWindowBufferLimit).Check(checkedBy(WithWindowBufferLimit))
	keyBackendType = config.Enum("state.backend.type",
		"The keyed state backend: hashmap (on the heap) or rocksdb (which needs the program to import state/rocksdb); unset: the environment's.",
		parseBackendType, "hashmap", "rocksdb").DeprecatedKeys("state.backend")
	keyInlineThreshold = config.MemorySize("state.storage.fs.memory-threshold",
		"State streams up to this size are kept inside the checkpoint's _metadata, not in files of their own.").
		Default(storage.DefaultInlineThreshold).DeprecatedKeys("state.backend.fs.memory-threshold").
		Check(func(n int64) error { return checkedBy(WithStateMemoryThreshold)(int(min(n, math.MaxInt32))) })
)

// checkedBy checks a value as its option does, on an environment of its
// own: the option's error is the key's.
func checkedBy[T any](opt func(T) Option) func(T) error {
	return func(v T) error {
		e := NewEnvironment()
		opt(v)(e)
		return errors.Join(e.errs...)
	}
}

func parseClaimMode(v string) (ClaimMode, error) {
	m, err := runtime.ParseClaimMode(strings.TrimSpace(v))
	if err != nil && strings.EqualFold(strings.TrimSpace(v), "LEGACY") {
		return m, errors.New("LEGACY is not supported: want NO_CLAIM or CLAIM")
	}
	return m, err
}

func parseBufferTimeout(v string) (time.Duration, error) {
	if strings.TrimSpace(v) == "-1" {
		return 0, errors.New("-1 (flush full buffers only) is not supported: give a duration, 0 flushes after every record")
	}
	return config.ParseDuration(v)
}

// parseBackendType reads state.backend.type, and Flink 1's names of the
// heap backend.
func parseBackendType(v string) (string, error) {
	switch t := strings.ToLower(strings.TrimSpace(v)); t {
	case "hashmap", "rocksdb":
		return t, nil
	case "filesystem", "jobmanager", "memory":
		return "hashmap", nil
	}
	return "", errors.New("want hashmap or rocksdb")
}
