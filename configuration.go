package sluice

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/state"
)

// Configuration is a job's options by their Flink keys, from a file in
// Flink's config.yaml shape, the environment and -D key=value arguments:
// package config's layered map, each value with where it came from.
// WithConfiguration applies it to an Environment; every package reads
// its own keys from it (docs/configuration.md lists them).
//
//	conf := sluice.ConfigFlags(flag.CommandLine) // -config, -D; $SLUICE_CONFIG_FILE, $SLUICE_CONF_*, $SLUICE_PROPERTIES
//	flag.Parse()
//	env := sluice.NewEnvironment(sluice.WithConfiguration(conf))
//
// or, without flags: LoadConfiguration(path), then FromEnv and
// ParseDynamicProperties(os.Args[1:]). See package config for the file,
// the precedence of the sources, the syntax of values and the errors.
type Configuration = config.Configuration

// ConfigError is a refused configuration key: an unknown one, or one
// whose value does not parse or cannot work, with its value and where it
// came from. It matches ErrInvalidOption and Err.
type ConfigError = config.Error

// ErrUnknownConfigKey is matched by the error of a key no linked package
// declares.
var ErrUnknownConfigKey = config.ErrUnknownKey

// The environment variables of a configuration (see package config).
const (
	// EnvPrefix is the prefix of the variables that set one key each.
	EnvPrefix = config.EnvPrefix
	// EnvProperties holds configuration in the file's shape.
	EnvProperties = config.EnvProperties
	// EnvConfigFile is the path of the configuration file ConfigFlags
	// reads (overridden by -config).
	EnvConfigFile = config.EnvConfigFile
)

// NewConfiguration returns an empty configuration.
func NewConfiguration() *Configuration { return config.New() }

// LoadConfiguration reads a file in Flink's config.yaml shape. Every
// unknown key and bad value is refused, together, each error naming the
// file and line.
func LoadConfiguration(path string) (*Configuration, error) { return config.Load(path) }

// ConfigFlags registers on fs -config (a file in config.yaml's shape,
// default $SLUICE_CONFIG_FILE) and -D key=value (repeatable, any key),
// and reads the environment (FromEnv) at once; what it cannot read is
// reported by WithConfiguration. Use the result after fs.Parse.
//
// A -D that fs already has (the cluster's Flags registers one; call it
// first) is shared: every -D goes into the configuration, and a cluster
// key also to the earlier flag.
func ConfigFlags(fs *flag.FlagSet) *Configuration { return config.Flags(fs) }

// WithConfiguration applies the keys of c to the environment through the
// options with Flink's names (WithParallelism, WithCheckpointConfig,
// WithRestartStrategy, WithStateBackend, WithMemoryConfig, the storage
// schemes and the cluster role of the packages the program imports, ...;
// see docs/configuration.md for the keys). A refused key or value is a
// *ConfigError that Execute returns. Options after it override it.
func WithConfiguration(c *Configuration) Option {
	return func(e *Environment) {
		if c != nil {
			e.conf = c
			applyConfiguration(e, c)
		}
	}
}

// Configuration returns the configuration WithConfiguration applied (the
// last one), nil without one: the job runner reads its own keys from it.
func (e *Environment) Configuration() *Configuration { return e.conf }

// ErrBackendNotLinked: the configuration names a state backend type
// whose package the program does not import (RocksDB needs cgo, so the
// root package does not import it).
var ErrBackendNotLinked = errors.New("state backend type not linked into the program")

// applyConfiguration is WithConfiguration: the root's keys through
// their options, then what other packages read from c.
func applyConfiguration(e *Environment, c *Configuration) {
	use(e, c, keyRestorePath, WithRestoreFrom)
	use(e, c, keyClaimMode, WithClaimMode)
	use(e, c, keyParallelism, WithParallelism)
	use(e, c, keyMaxParallelism, WithMaxParallelism)
	use(e, c, keyJobName, WithJobName)
	use(e, c, keyChaining, WithChaining)
	use(e, c, keyDefaultCodec, WithDefaultCodec)
	use(e, c, keyWatermarkInterval, WithAutoWatermarkInterval)
	use(e, c, keyBufferTimeout, WithBufferTimeout)
	use(e, c, keyWindowBuffer, WithWindowBufferLimit)
	use(e, c, keyCancellationTimeout, WithTaskCancellationTimeout)
	use(e, c, keyFailoverStrategy, WithFailoverStrategy)
	use(e, c, keySegmentSize, func(n int64) Option { return WithBufferSize(int(n)) })
	use(e, c, keyBuffersPerChannel, WithExclusiveBuffers)
	use(e, c, keyFloatingBuffers, WithFloatingBuffers)
	use(e, c, keyInlineThreshold, func(n int64) Option { return WithStateMemoryThreshold(int(n)) })

	var err error
	WithCheckpointConfig(func(cc *checkpoint.Config) { err = cc.Configure(c) })(e)
	e.addErr(err)
	WithMemoryConfig(func(m *memory.Config) { err = m.Configure(c) })(e)
	e.addErr(err)
	WithScheduler(func(sc *SchedulerConfig) { err = sc.Configure(c) })(e)
	e.addErr(err)
	rc, ok, err := checkpoint.ConfigureRestart(c, e.cfg.Restart, e.cfg.RestartSet, e.cfg.Checkpoint.Enabled())
	e.addErr(err)
	if ok {
		WithRestartStrategy(rc)(e)
	}
	configureBackend(e, c)
	configureAutoscaler(e, c)
	schemes, err := storage.ConfiguredSchemes(c)
	e.addErr(err)
	if len(schemes) > 0 {
		WithCheckpointSchemes(schemes)(e)
	}
	e.configureLauncher(c)
	e.addErr(c.Validate())
}

// use applies a key's option when c sets it; the option's errors are
// the key's.
func use[T any](e *Environment, c *Configuration, k *config.Key[T], opt func(T) Option) {
	v, ok, err := k.Get(c)
	switch {
	case !ok:
		return
	case err != nil:
		e.addErr(err)
		return
	}
	n := len(e.errs)
	opt(v)(e)
	if len(e.errs) > n {
		err := c.KeyError(k.Name(), errors.Join(e.errs[n:]...))
		e.errs = append(e.errs[:n], err)
	}
}

// configureBackend applies state.backend.type: the heap backend, or a
// backend type a linked package registered, made from its own keys.
func configureBackend(e *Environment, c *Configuration) {
	t, ok, err := keyBackendType.Get(c)
	switch {
	case err != nil:
		e.addErr(err)
	case !ok:
	case t == "hashmap":
		WithStateBackend(runtime.HeapStateBackend)(e)
	default:
		f, linked, err := state.ConfiguredBackend(t, c, defaultRocksDBDir())
		switch {
		case !linked:
			e.addErr(c.KeyError(keyBackendType.Name(), fmt.Errorf("%w: %s needs the program to import github.com/sluicehq/sluice/state/%s (registered: %v)",
				ErrBackendNotLinked, t, t, state.BackendTypes())))
		case err != nil:
			e.addErr(err)
		default:
			WithStateBackend(f)(e)
		}
	}
}

// defaultRocksDBDir is state.backend.rocksdb.localdir's default: Flink's
// io.tmp.dirs, the system's temporary directory.
func defaultRocksDBDir() string { return filepath.Join(os.TempDir(), "sluice-rocksdb") }
