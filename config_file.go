package sluice

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	yaml "go.yaml.in/yaml/v2"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage/s3"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/state"
)

// Configuration is a job's options by their Flink keys, from a file in
// Flink's config.yaml shape, the environment and -D key=value
// arguments: a flat map of keys to string values, each value with where
// it came from. WithConfiguration applies it to an Environment.
//
//	conf := sluice.ConfigFlags(flag.CommandLine) // -config, -D; $SLUICE_CONFIG_FILE, $SLUICE_CONF_*, $SLUICE_PROPERTIES
//	flag.Parse()
//	env := sluice.NewEnvironment(sluice.WithConfiguration(conf))
//	kopts, err := sluice.KafkaClientOptions(conf) // for the Kafka source's and sink's ClientOptions
//
// or, without flags: LoadConfiguration(path), then FromEnv and
// ParseDynamicProperties(os.Args[1:]).
//
// # The file
//
// Flink's config.yaml (Flink 1.19 and later, the only form of Flink 2):
// standard YAML whose nested mappings are flattened with dots, so that
// these are the same key, and may be mixed in one file:
//
//	execution:
//	  checkpointing:
//	    interval: 10 s
//	execution.checkpointing.interval: 10 s
//
// A key given twice (also once nested and once flat, or under a key and
// its deprecated name) is refused, as Flink refuses duplicate keys. A
// YAML list is a value "[a, b]" (Flink's string form of a list); the
// keys that take a list also accept "a;b" and "a,b". A null value (~ or
// nothing) leaves the key unset. Scalars are taken as written: 010 is
// "010", yes is "yes" (booleans are true or false).
//
// # Precedence
//
// As Flink: the file, then the environment, then -D (and Set) override.
// In the environment, $SLUICE_PROPERTIES holds YAML in the file's shape
// ("key: value" lines, as Flink's FLINK_PROPERTIES), and SLUICE_CONF_<KEY>
// sets one key: the key in upper case with '.' and '-' as '_'
// (SLUICE_CONF_EXECUTION_CHECKPOINTING_INTERVAL=10s,
// SLUICE_CONF_TASKMANAGER_NUMBEROFTASKSLOTS=4), overriding
// $SLUICE_PROPERTIES. A SLUICE_CONF_ variable that is no key's is
// refused. The cluster's own variables (SLUICE_ROLE, SLUICE_COORDINATOR,
// ...; see ClusterConfig.FromEnv) rank between the file and these.
//
// # Values
//
// Durations as Flink writes them: a number and an optional unit, "10 s",
// "1 min", "500 ms", "2h", "1d" (ns, us/µs, ms, s, min/m, h, d and their
// long forms); a number alone is milliseconds; Go's "1m30s" is accepted
// too. Memory sizes as Flink's MemorySize: "64mb", "8 mb", "1gb", "4096"
// (bytes; k/kb, m/mb, g/gb, t/tb, binary multiples). Booleans: true or
// false. Enumerations in Flink's spelling, in any case (EXACTLY_ONCE,
// exactly-once).
//
// # Errors
//
// An unknown key, and a value that does not parse or is out of range, is
// a *ConfigError naming the key, the value and where it came from (the
// file and line, the environment variable, -D), with the nearest known
// key when the key is unknown. The values of keys that hold secrets
// (password, secret, token, jaas.config, ssl.keystore.key, ...) are shown
// as ******, as Flink does.
//
// # Keys
//
// Deprecated Flink names are accepted for the keys that have them (in
// parentheses). Options of a part of Sluice that is not used are still
// checked but have no effect (RocksDB options with the hashmap backend,
// a restart strategy's options when another one is chosen).
//
//	execution.checkpointing.interval            checkpoint interval; 0 or unset: off
//	execution.checkpointing.mode                EXACTLY_ONCE, AT_LEAST_ONCE
//	execution.checkpointing.timeout             checkpoint timeout (10 min)
//	execution.checkpointing.min-pause           least pause between checkpoints (0)
//	execution.checkpointing.max-concurrent-checkpoints   (1)
//	execution.checkpointing.tolerable-failed-checkpoints (0)
//	execution.checkpointing.unaligned.enabled   (execution.checkpointing.unaligned) unaligned checkpoints
//	execution.checkpointing.aligned-checkpoint-timeout   (execution.checkpointing.alignment-timeout)
//	execution.checkpointing.num-retained        (state.checkpoints.num-retained) completed checkpoints kept (1)
//	execution.checkpointing.externalized-checkpoint-retention  NO_EXTERNALIZED_CHECKPOINTS, DELETE_ON_CANCELLATION, RETAIN_ON_CANCELLATION
//	execution.checkpointing.dir                 (state.checkpoints.dir) checkpoint directory, a path or s3://
//	execution.checkpointing.savepoint-dir       (state.savepoints.dir) default savepoint directory
//	execution.checkpointing.incremental         (state.backend.incremental) RocksDB incremental checkpoints (true)
//	execution.state-recovery.path               (execution.savepoint.path) restore from this snapshot (WithRestoreFrom)
//	execution.state-recovery.claim-mode         (execution.savepoint-restore-mode) NO_CLAIM, CLAIM
//	execution.state-recovery.from-local         (state.backend.local-recovery) RocksDB local recovery (false)
//	parallelism.default                         default parallelism (1)
//	pipeline.max-parallelism                    key groups (128)
//	pipeline.name                               job name
//	pipeline.operator-chaining.enabled          (pipeline.operator-chaining) chaining (true)
//	pipeline.auto-watermark-interval            periodic watermarks (200 ms)
//	pipeline.default-codec                      binary, json: format of the codecs picked for composite types (binary)
//	execution.buffer-timeout.interval           (execution.buffer-timeout) network buffer flush timeout (100 ms; 0: every record)
//	task.cancellation.timeout                   wait for cancelled tasks (180 s; 0: for ever)
//	taskmanager.memory.segment-size             network buffer size (32kb)
//	taskmanager.network.memory.buffers-per-channel       exclusive buffers per channel (2)
//	taskmanager.network.memory.floating-buffers-per-gate floating buffers per gate (8)
//	taskmanager.memory.process.size             the process's memory budget (package memory; unset: shares of 256m, no Go limit)
//	taskmanager.memory.managed.fraction         managed memory (RocksDB's) of the memory past the overhead (0.4)
//	taskmanager.memory.managed.size             managed memory as a size, instead of the fraction
//	taskmanager.memory.network.fraction         network memory (0.1), within
//	taskmanager.memory.network.min              (4m) and
//	taskmanager.memory.network.max              (1g)
//	taskmanager.memory.jvm-overhead.fraction    memory the Go runtime does not account (0.1), within
//	taskmanager.memory.jvm-overhead.min         (32m) and
//	taskmanager.memory.jvm-overhead.max         (1g)
//	taskmanager.memory.kafka.source.fraction    Kafka source readers' fetched records (0.1)
//	taskmanager.memory.kafka.sink.fraction      Kafka sink producers' buffers (0.05)
//	restart-strategy.type                       (restart-strategy) none (off, disable), fixed-delay, exponential-delay
//	restart-strategy.fixed-delay.attempts       (1)
//	restart-strategy.fixed-delay.delay          (1 s)
//	restart-strategy.exponential-delay.initial-backoff   (1 s)
//	restart-strategy.exponential-delay.max-backoff       (1 min)
//	restart-strategy.exponential-delay.backoff-multiplier (1.5)
//	restart-strategy.exponential-delay.jitter-factor     (0.1)
//	restart-strategy.exponential-delay.reset-backoff-threshold     (1 h)
//	restart-strategy.exponential-delay.attempts-before-reset-backoff (unbounded)
//	state.backend.type                          (state.backend) hashmap, rocksdb
//	state.backend.rocksdb.localdir              RocksDB working directory (the system's temporary directory)
//	state.backend.rocksdb.*                     the RocksDB options of rocksdb.Options.Set: block.cache-size,
//	    block.blocksize, writebuffer.size, writebuffer.count, compression.per.level (a list),
//	    compaction.style, compaction.level.target-file-size-base, compaction.level.max-size-level-base,
//	    compaction.level.use-dynamic-size, thread.num, use-bloom-filter, bloom-filter.bits-per-key,
//	    checkpoint.transfer.thread.num, memory.managed, memory.write-buffer-ratio
//	state.storage.fs.memory-threshold           (state.backend.fs.memory-threshold) inline state streams up to this (20kb)
//	s3.*                                        checkpoint storage on S3, S3Config.Set: s3.endpoint, s3.path.style.access,
//	    s3.access-key, s3.secret-key, s3.region, s3.upload.part.size, s3.max-attempts, s3.request.timeout,
//	    s3.entropy.key, s3.entropy.length
//	cluster.role                                coordinator, worker, single (ClusterConfig.Set, as the rest of this group)
//	jobmanager.rpc.address, jobmanager.rpc.port the coordinator's address; its listen port
//	taskmanager.host, taskmanager.resource-id, taskmanager.numberOfTaskSlots, taskmanager.data.port
//	heartbeat.interval, heartbeat.timeout, slot.request.timeout
//	high-availability.type                      none, etcd (etcd when endpoints are set)
//	high-availability.etcd.endpoints (a list), high-availability.etcd.path.root, high-availability.etcd.lease-duration
//	high-availability.etcd.username, high-availability.etcd.password, high-availability.etcd.tls.ca,
//	    high-availability.etcd.tls.cert, high-availability.etcd.tls.key: etcd's user and TLS (PEM files)
//	security.ssl.internal.enabled               mutual TLS between the processes of a cluster (false), with
//	    security.ssl.internal.cert, security.ssl.internal.key (this process's PEM certificate and key),
//	    security.ssl.internal.truststore (PEM of the deployment's CA), security.ssl.internal.handshake-timeout (10 s)
//	security.internal.secret, security.internal.secret-file  a shared secret every process proves it holds
//	security.internal.insecure                  listen beyond loopback without either (false: refused)
//	taskmanager.network.max-pending-requests-per-connection (1024), taskmanager.network.max-connections-per-peer (64),
//	    taskmanager.network.connection.idle-timeout (1 min): bounds of the data plane
//	kafka.properties.<property>                 Kafka client properties, for KafkaClientOptions: security.protocol,
//	    sasl.mechanism, sasl.jaas.config, sasl.oauthbearer.token.endpoint.url, sasl.login.callback.handler.class,
//	    ssl.truststore.{type,location,certificates,password}, ssl.keystore.{type,location,certificate.chain,key,password},
//	    ssl.key.password, ssl.endpoint.identification.algorithm, ssl.protocol, ssl.enabled.protocols, client.id
//
// state.backend.type rocksdb makes the keyed state backend
// rocksdb.Factory(localdir, options); hashmap the heap backend; unset
// leaves the environment's. Without WithCluster, the cluster keys make
// the job's ClusterConfig, the SLUICE_* variables (ClusterConfig.FromEnv)
// ranking between the file and the environment's keys; after a
// WithCluster (ClusterFlags' flags, or the program's own), the file's and
// the environment's cluster keys fill what it leaves unset, and -D
// overrides it.
//
// # Kafka
//
// The kafka.properties.* keys are Kafka's client properties under a
// prefix; KafkaClientOptions turns them into franz-go options for the
// Kafka source's and sink's ClientOptions. PLAIN and SCRAM-SHA-256/512
// take username and password from sasl.jaas.config
// (org.apache.kafka.common.security.plain.PlainLoginModule required
// username="u" password="p"; the scram module's ScramLoginModule, with
// tokenauth). OAUTHBEARER takes a token from the JAAS option token="..."
// (Sluice's), from a file re-read at every login
// (sasl.oauthbearer.token.endpoint.url: file:///path, as Kafka), or
// Kafka's unsecured JWT (unsecuredLoginStringClaim_sub) for tests; the
// OAuth client-credentials flow over HTTP is not supported. Trust and key
// stores are PEM only (JKS and PKCS12 are refused, with how to convert
// them); an encrypted key must be PKCS#8 (openssl pkcs8 -topk8), with
// ssl.key.password.
type Configuration struct {
	layers [numLayers]map[string]confEntry // by canonical key
	// fileErr and envErr are what ConfigFlags could not read; they are
	// reported by WithConfiguration, Validate and Err.
	fileErr, envErr error
}

type confLayer uint8

const (
	layerFile confLayer = iota
	layerEnv
	layerDynamic
	numLayers
)

type confEntry struct {
	key    string // as written: the canonical key or a deprecated one
	value  string
	list   bool // the value was a YAML list
	source string
	layer  confLayer
}

// ErrUnknownConfigKey is matched by the error of a key no option has.
var ErrUnknownConfigKey = errors.New("unknown configuration key")

// ConfigError is a refused configuration key: an unknown one, or one
// whose value does not parse or cannot work. It matches
// ErrInvalidOption and Err.
type ConfigError struct {
	// Key as written.
	Key string
	// Value, or ****** for keys that hold secrets.
	Value string
	// Source is where the value came from: "conf/config.yaml:12",
	// "$SLUICE_CONF_PARALLELISM_DEFAULT", "$SLUICE_PROPERTIES line 2",
	// "-D", "Set"; empty for a key that is missing.
	Source string
	Err    error
	set    bool // Value was given
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source + ": ")
	}
	b.WriteString(e.Key)
	if e.set {
		fmt.Fprintf(&b, " = %q", e.Value)
	}
	return b.String() + ": " + e.Err.Error()
}

// Unwrap returns ErrInvalidOption and the cause.
func (e *ConfigError) Unwrap() []error { return []error{ErrInvalidOption, e.Err} }

func (ent confEntry) error(err error) *ConfigError {
	v := ent.value
	if sensitiveKey(ent.key) {
		v = "******"
	}
	return &ConfigError{Key: ent.key, Value: v, Source: ent.source, Err: err, set: true}
}

// sensitiveKey reports whether a key's value is a secret: Flink's
// GlobalConfiguration.SENSITIVE_KEYS, and private keys.
func sensitiveKey(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"password", "secret", "fs.azure.account.key", "apikey", "api-key", "auth-params",
		"service-key", "token", "basic-auth", "jaas.config", "http-headers", "ssl.keystore.key"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// NewConfiguration returns an empty configuration.
func NewConfiguration() *Configuration {
	c := &Configuration{}
	for i := range c.layers {
		c.layers[i] = map[string]confEntry{}
	}
	return c
}

// LoadConfiguration reads a file in Flink's config.yaml shape. Every
// unknown key and bad value is refused, together, each error naming the
// file and line.
func LoadConfiguration(path string) (*Configuration, error) {
	c := NewConfiguration()
	if err := c.LoadFile(path); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadFile reads a file in Flink's config.yaml shape into c, over the
// values of a file read before.
func (c *Configuration) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: configuration file: %w", ErrInvalidOption, err)
	}
	return c.loadYAML(layerFile, data, path, func(line int) string {
		if line == 0 {
			return path
		}
		return fmt.Sprintf("%s:%d", path, line)
	})
}

// EnvPrefix is the prefix of the environment variables that set one
// configuration key each (see Configuration).
const EnvPrefix = "SLUICE_CONF_"

// EnvProperties is the environment variable that holds configuration in
// the file's shape, as Flink's FLINK_PROPERTIES.
const EnvProperties = "SLUICE_PROPERTIES"

// EnvConfigFile is the environment variable ConfigFlags reads the
// configuration file's path from (overridden by -config).
const EnvConfigFile = "SLUICE_CONFIG_FILE"

// FromEnv reads $SLUICE_PROPERTIES and the SLUICE_CONF_* variables
// (see Configuration) into c, over the file's values.
func (c *Configuration) FromEnv() error {
	var errs []error
	if v := os.Getenv(EnvProperties); strings.TrimSpace(v) != "" {
		errs = append(errs, c.loadYAML(layerEnv, []byte(v), "$"+EnvProperties, func(line int) string {
			if line == 0 {
				return "$" + EnvProperties
			}
			return fmt.Sprintf("$%s line %d", EnvProperties, line)
		}))
	}
	vars := os.Environ()
	sort.Strings(vars)
	for _, kv := range vars {
		name, value, _ := strings.Cut(kv, "=")
		suffix, ok := strings.CutPrefix(name, EnvPrefix)
		if !ok {
			continue
		}
		key, known := envKeys()[suffix]
		if !known {
			err := fmt.Errorf("%w: no key's variable (%s and the key in upper case, '.' and '-' as '_')", ErrUnknownConfigKey, EnvPrefix)
			if near := nearestKey(strings.ToLower(strings.ReplaceAll(suffix, "_", "."))); near != "" {
				err = fmt.Errorf("%w; did you mean %s%s?", err, EnvPrefix, envSuffix(near))
			}
			errs = append(errs, &ConfigError{Key: "$" + name, Err: err})
			continue
		}
		errs = append(errs, c.put(confEntry{key: key, value: value, source: "$" + name, layer: layerEnv}))
	}
	return errors.Join(errs...)
}

// ParseDynamicProperties takes Flink's dynamic properties from args,
// -D key=value and -Dkey=value, into c over the file's and the
// environment's values (a later one over an earlier), and returns the
// other arguments. It stops at "--", which it leaves in the rest.
func (c *Configuration) ParseDynamicProperties(args []string) (rest []string, err error) {
	var errs []error
	for i := 0; i < len(args); i++ {
		a := args[i]
		var kv string
		switch {
		case a == "--":
			return append(rest, args[i:]...), errors.Join(errs...)
		case a == "-D":
			if i+1 == len(args) {
				errs = append(errs, fmt.Errorf("%w: -D without key=value", ErrInvalidOption))
				continue
			}
			i++
			kv = args[i]
		case strings.HasPrefix(a, "-D"):
			kv = a[2:]
		default:
			rest = append(rest, a)
			continue
		}
		errs = append(errs, c.setDynamic(kv, "-D"))
	}
	return rest, errors.Join(errs...)
}

func (c *Configuration) setDynamic(kv, source string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return &ConfigError{Key: kv, Source: source, Err: errors.New("want key=value")}
	}
	return c.put(confEntry{key: strings.TrimSpace(k), value: strings.TrimSpace(v), source: source, layer: layerDynamic})
}

// Set sets a key as a -D argument does, over the file's and the
// environment's values; the error says why a key or value is refused.
func (c *Configuration) Set(key, value string) error {
	return c.put(confEntry{key: key, value: value, source: "Set", layer: layerDynamic})
}

// Get returns the value of a key (or of its deprecated name), from the
// layer with the highest precedence that has it.
func (c *Configuration) Get(key string) (string, bool) {
	ent, ok := c.effective(key)
	return ent.value, ok
}

// Source says where the value Get returns came from: "file:line", an
// environment variable, "-D" or "Set"; empty when the key is not set.
func (c *Configuration) Source(key string) string {
	ent, _ := c.effective(key)
	return ent.source
}

// Keys returns the keys that are set, canonical (a deprecated name as
// its option's key), sorted.
func (c *Configuration) Keys() []string {
	seen := map[string]bool{}
	for _, l := range c.layers {
		for k := range l {
			seen[k] = true
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// String lists the effective values, one "key: value (source)" a line,
// secrets as ******: for a log line at startup.
func (c *Configuration) String() string {
	var b strings.Builder
	for _, k := range c.Keys() {
		ent, _ := c.effective(k)
		v := ent.value
		if sensitiveKey(k) {
			v = "******"
		}
		fmt.Fprintf(&b, "%s: %s (%s)\n", k, v, ent.source)
	}
	return b.String()
}

// Err returns what ConfigFlags could not read from $SLUICE_CONFIG_FILE
// and the environment (WithConfiguration reports it too).
func (c *Configuration) Err() error {
	if c == nil {
		return nil
	}
	return errors.Join(c.fileErr, c.envErr)
}

// Validate applies c to a new Environment and returns what it refuses:
// the checks of WithConfiguration, including the Kafka properties (their
// files are read), without building a job.
func (c *Configuration) Validate() error {
	e := NewEnvironment(WithConfiguration(c))
	return errors.Join(e.errs...)
}

func (c *Configuration) effective(key string) (confEntry, bool) {
	if c == nil {
		return confEntry{}, false
	}
	if o, canon := lookupOption(key); o != nil {
		key = canon
	}
	for l := numLayers - 1; ; l-- {
		if ent, ok := c.layers[l][key]; ok {
			return ent, true
		}
		if l == 0 {
			return confEntry{}, false
		}
	}
}

// put checks an entry's key and value and stores it in its layer.
func (c *Configuration) put(ent confEntry) error {
	canon, err := checkEntry(ent)
	if err != nil {
		return err
	}
	if c.layers[ent.layer] == nil {
		c.layers[ent.layer] = map[string]confEntry{}
	}
	c.layers[ent.layer][canon] = ent
	return nil
}

// checkEntry returns the canonical key of an entry whose key is known and
// whose value is good on its own.
func checkEntry(ent confEntry) (string, error) {
	o, canon := lookupOption(ent.key)
	if o == nil {
		err := ErrUnknownConfigKey
		if near := nearestKey(ent.key); near != "" {
			err = fmt.Errorf("%w (did you mean %s?)", ErrUnknownConfigKey, near)
		}
		return "", ent.error(err)
	}
	if ent.list && !o.list {
		return "", ent.error(errors.New("takes one value, not a list"))
	}
	// The value alone, applied to a scratch environment.
	e := NewEnvironment()
	a := newConfApplier(e)
	if err := o.apply(a, ent, ent.value); err != nil {
		return "", ent.error(err)
	}
	if len(e.errs) > 0 {
		return "", ent.error(errors.Join(e.errs...))
	}
	return canon, nil
}

// loadYAML reads YAML in config.yaml's shape into a layer; src gives the
// source of a line (0: the whole input).
func (c *Configuration) loadYAML(layer confLayer, data []byte, name string, src func(line int) string) error {
	var root yamlValue
	if err := yaml.UnmarshalStrict(data, &root); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidOption, name, err)
	}
	if root.kind == yamlNull {
		return nil // empty, or comments only
	}
	if root.kind != yamlMap {
		return fmt.Errorf("%w: %s: want a mapping of keys to values at the top", ErrInvalidOption, name)
	}
	var flat []flatValue
	if err := flatten("", &root, &flat); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidOption, name, err)
	}
	lines := yamlKeyLines(data)
	lineOf := func(key string, nth int) int {
		for k := key; k != ""; {
			if ls := lines[k]; len(ls) > 0 {
				return ls[min(nth, len(ls)-1)]
			}
			i := strings.LastIndexByte(k, '.')
			if i < 0 {
				break
			}
			k = k[:i]
		}
		return 0
	}
	// In the order of the lines, for the errors.
	at := make([]int, len(flat))
	nth := map[string]int{}
	for i, f := range flat {
		at[i] = lineOf(f.key, nth[f.key])
		nth[f.key]++
	}
	order := make([]int, len(flat))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return at[order[i]] < at[order[j]] })
	var errs []error
	seen := map[string]confEntry{} // canonical -> first entry
	for _, i := range order {
		f := flat[i]
		ent := confEntry{key: f.key, value: f.value, list: f.list, layer: layer, source: src(at[i])}
		canon := f.key
		if o, cn := lookupOption(f.key); o != nil {
			canon = cn
		}
		if prev, dup := seen[canon]; dup {
			what := "set twice"
			if prev.key != f.key {
				what = "set under its two names, " + prev.key + " and " + f.key
			}
			errs = append(errs, ent.error(fmt.Errorf("%s (first at %s): a key may be given once", what, prev.source)))
			continue
		}
		seen[canon] = ent
		if f.null {
			// Unset; the key must still be one.
			if o, _ := lookupOption(f.key); o == nil {
				_, err := checkEntry(ent)
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, c.put(ent))
	}
	return errors.Join(errs...)
}

type yamlKind uint8

const (
	yamlNull yamlKind = iota
	yamlScalar
	yamlList
	yamlMap
)

// yamlValue is a YAML node with its scalars as written.
type yamlValue struct {
	kind   yamlKind
	scalar string
	list   []*yamlValue
	m      map[string]*yamlValue
}

func (n *yamlValue) UnmarshalYAML(unmarshal func(any) error) error {
	var probe any
	if err := unmarshal(&probe); err != nil {
		return err
	}
	switch probe.(type) {
	case nil:
		n.kind = yamlNull
	case map[any]any:
		n.kind = yamlMap
		return unmarshal(&n.m)
	case []any:
		n.kind = yamlList
		return unmarshal(&n.list)
	default:
		// A string target takes the scalar as written (010, 1e3, yes).
		n.kind = yamlScalar
		return unmarshal(&n.scalar)
	}
	return nil
}

type flatValue struct {
	key, value string
	list, null bool
}

// flatten appends the leaves of a mapping with their keys joined by
// dots, in key order; a list is its Flink string form "[a, b]".
func flatten(prefix string, n *yamlValue, out *[]flatValue) error {
	keys := make([]string, 0, len(n.m))
	for k := range n.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		full := k
		if prefix != "" {
			full = prefix + "." + k
		}
		v := n.m[k]
		switch {
		case strings.TrimSpace(k) == "":
			return fmt.Errorf("an empty key under %q", prefix)
		case v == nil || v.kind == yamlNull:
			*out = append(*out, flatValue{key: full, null: true})
		case v.kind == yamlMap:
			if err := flatten(full, v, out); err != nil {
				return err
			}
		case v.kind == yamlList:
			items := make([]string, 0, len(v.list))
			for _, it := range v.list {
				if it == nil || it.kind != yamlScalar {
					return fmt.Errorf("%s: a list of scalars is wanted, not of lists, mappings or nulls", full)
				}
				items = append(items, it.scalar)
			}
			*out = append(*out, flatValue{key: full, value: "[" + strings.Join(items, ", ") + "]", list: true})
		default:
			*out = append(*out, flatValue{key: full, value: v.scalar})
		}
	}
	return nil
}

// yamlKeyLines maps the flattened key of every block-style mapping key in
// data to the lines it is on: for error messages only, so it reads
// indentation and "key:" and nothing more.
func yamlKeyLines(data []byte) map[string][]int {
	out := map[string][]int{}
	type frame struct {
		indent int
		key    string
	}
	var stack []frame
	block := -1 // the indentation of the key whose block scalar is being skipped
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		body := strings.TrimLeft(line, " ")
		indent := len(line) - len(body)
		if block >= 0 {
			if body == "" || indent > block {
				continue
			}
			block = -1
		}
		if body == "" || strings.ContainsRune("#-{[&*!|>%@`", rune(body[0])) || strings.HasPrefix(body, "...") {
			continue
		}
		key, rest, ok := yamlLineKey(body)
		if !ok {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, frame{indent, key})
		parts := make([]string, len(stack))
		for i, f := range stack {
			parts[i] = f.key
		}
		full := strings.Join(parts, ".")
		out[full] = append(out[full], n+1)
		if r := strings.TrimSpace(rest); strings.HasPrefix(r, "|") || strings.HasPrefix(r, ">") {
			block = indent
		}
	}
	return out
}

// yamlLineKey splits "key: rest" (the key plain or quoted).
func yamlLineKey(body string) (key, rest string, ok bool) {
	if q := body[0]; q == '"' || q == '\'' {
		var b strings.Builder
		for i := 1; i < len(body); i++ {
			c := body[i]
			switch {
			case q == '\'' && c == '\'' && i+1 < len(body) && body[i+1] == '\'':
				b.WriteByte('\'')
				i++
			case q == '"' && c == '\\' && i+1 < len(body):
				b.WriteByte(body[i+1])
				i++
			case c == q:
				after := body[i+1:]
				if strings.HasPrefix(after, ":") && (len(after) == 1 || after[1] == ' ' || after[1] == '\t') {
					return b.String(), after[1:], true
				}
				return "", "", false
			default:
				b.WriteByte(c)
			}
		}
		return "", "", false
	}
	for i := 0; i < len(body); i++ {
		if body[i] == ':' && (i+1 == len(body) || body[i+1] == ' ' || body[i+1] == '\t') {
			return strings.TrimSpace(body[:i]), body[i+1:], true
		}
		if body[i] == '#' && i > 0 && body[i-1] == ' ' {
			return "", "", false
		}
	}
	return "", "", false
}

// ConfigFlags registers on fs -config (a file in config.yaml's shape,
// default $SLUICE_CONFIG_FILE) and -D key=value (repeatable, any key),
// and reads the environment (FromEnv) at once; what it cannot read is
// reported by WithConfiguration. Use the result after fs.Parse.
//
// A -D that fs already has (ClusterFlags registers one; call it first)
// is shared: every -D goes into the configuration, and a cluster key
// also to the earlier flag.
func ConfigFlags(fs *flag.FlagSet) *Configuration {
	c := NewConfiguration()
	if p := os.Getenv(EnvConfigFile); p != "" {
		c.fileErr = c.LoadFile(p)
	}
	c.envErr = c.FromEnv()
	fs.Func("config", "a configuration file in Flink's config.yaml shape ($"+EnvConfigFile+")", func(p string) error {
		c.layers[layerFile] = map[string]confEntry{}
		c.fileErr = nil
		return c.LoadFile(p)
	})
	d := &dynamicFlag{c: c}
	if f := fs.Lookup("D"); f != nil {
		d.next = f.Value
		f.Value = d
		f.Usage += "; or any configuration key"
	} else {
		fs.Var(d, "D", "key=value: a configuration option by its Flink key (repeatable)")
	}
	return c
}

type dynamicFlag struct {
	c    *Configuration
	next flag.Value // an earlier -D, for the cluster keys
}

func (d *dynamicFlag) String() string { return "" }

func (d *dynamicFlag) Set(s string) error {
	if err := d.c.setDynamic(s, "-D"); err != nil {
		return err
	}
	if d.next == nil {
		return nil
	}
	k, _, _ := strings.Cut(s, "=")
	ent, _ := d.c.effective(strings.TrimSpace(k))
	if o, canon := lookupOption(ent.key); o != nil && o.cluster != "" {
		v, err := o.normalize(ent.value)
		if err != nil {
			return err
		}
		return d.next.Set(canon + "=" + v)
	}
	return nil
}

// WithConfiguration applies every key of c to the environment through
// the options with Flink's names (WithParallelism, WithCheckpointConfig,
// WithRestartStrategy, WithStateBackend, WithS3, WithCluster, ...); see
// Configuration for the keys. A refused key or value is a *ConfigError
// that Execute returns. Options after it override it.
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

// applyConfiguration is WithConfiguration; it returns what it collected.
func applyConfiguration(e *Environment, c *Configuration) *confApplier {
	if err := c.Err(); err != nil {
		e.addErr(err)
	}
	a := newConfApplier(e)
	for _, k := range c.Keys() {
		ent, _ := c.effective(k)
		o, _ := lookupOption(k)
		if o == nil { // not through put
			_, err := checkEntry(ent)
			e.addErr(err)
			continue
		}
		n := len(e.errs)
		if err := o.apply(a, ent, ent.value); err != nil {
			e.addErr(ent.error(err))
		} else if len(e.errs) > n {
			// An option refused the value: name the key and source.
			err := ent.error(errors.Join(e.errs[n:]...))
			e.errs = append(e.errs[:n], err)
		}
	}
	a.finish(c)
	return a
}

// KafkaClientOptions returns the franz-go options of the configuration's
// kafka.properties.* keys (Kafka's client properties: security.protocol,
// sasl.*, ssl.*, client.id), for the Kafka source's and sink's
// ClientOptions:
//
//	kopts, err := sluice.KafkaClientOptions(conf)
//	src := kafka.NewSource(brokers, topics, kafka.ClientOptions(kopts...))
//
// It reads the trust and key stores. Nil without such keys; an error
// names the key and where it came from.
func KafkaClientOptions(c *Configuration) ([]kgo.Opt, error) {
	props := map[string]string{}
	if c != nil {
		for _, k := range c.Keys() {
			if p, ok := strings.CutPrefix(k, kafkaPrefix); ok {
				props[p], _ = c.Get(k)
			}
		}
	}
	if len(props) == 0 {
		return nil, nil
	}
	opts, err := kafkaclient.SecurityOptions(props)
	if err != nil {
		var pe *kafkaclient.PropertyError
		if errors.As(err, &pe) {
			key := kafkaPrefix + pe.Property
			if ent, ok := c.effective(key); ok {
				return nil, ent.error(errors.New(pe.Problem))
			}
			return nil, &ConfigError{Key: key, Err: errors.New(pe.Problem)}
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return opts, nil
}

// kafkaPrefix is the prefix of the Kafka client properties' keys.
const kafkaPrefix = "kafka.properties."

// ---- The options ----

// confOption is one key: how its value is applied.
type confOption struct {
	key     string
	aliases []string // Flink's deprecated names
	list    bool     // takes a list
	// cluster is the key cluster.Config.Set takes, for a cluster key.
	cluster string
	// normalize turns a value into what a delegate's Set parses (a Flink
	// duration into a Go one); nil: as written.
	normalize func(string) (string, error)
	apply     func(a *confApplier, ent confEntry, v string) error
}

// confApplier collects what takes more than one key before it is
// applied.
type confApplier struct {
	e        *Environment
	restart  restartSettings
	backend  string              // "", "hashmap", "rocksdb"
	rocks    state.BackendConfig // of state.backend.type rocksdb, once a key needs it
	s3       S3Config
	s3Set    bool
	cluster  []clusterSetting
	haType   *confEntry
	haTypeOn bool
}

type clusterSetting struct {
	ent        confEntry
	key, value string // for cluster.Config.Set
}

type restartSettings struct {
	kind                *checkpoint.RestartKind
	attempts            *int
	delay               *time.Duration
	initial, max, reset *time.Duration
	mult, jitter        *float64
	attemptsBeforeReset *int
	exponential         bool // an exponential-delay key is set
}

func newConfApplier(e *Environment) *confApplier { return &confApplier{e: e} }

var (
	optionsOnce sync.Once
	optionTable []*confOption
	optionByKey map[string]*confOption // key and aliases
	knownKeys   []string               // the keys of optionByKey, sorted
	envKeyTable map[string]string      // SLUICE_CONF_ suffix -> canonical key
)

func options() []*confOption {
	optionsOnce.Do(func() {
		optionTable = buildOptions()
		optionByKey = map[string]*confOption{}
		envKeyTable = map[string]string{}
		for _, o := range optionTable {
			for _, k := range append([]string{o.key}, o.aliases...) {
				optionByKey[k] = o
				knownKeys = append(knownKeys, k)
				envKeyTable[envSuffix(k)] = o.key
			}
		}
		sort.Strings(knownKeys)
	})
	return optionTable
}

func envKeys() map[string]string {
	options()
	names := registeredNames()
	if len(names) == 0 {
		return envKeyTable
	}
	m := make(map[string]string, len(envKeyTable)+len(names))
	for k, v := range envKeyTable {
		m[k] = v
	}
	for _, k := range names {
		_, canon := registeredOption(k)
		m[envSuffix(k)] = canon
	}
	return m
}

// envSuffix is a key's SLUICE_CONF_ variable without the prefix.
func envSuffix(key string) string {
	return strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// lookupOption returns the option of a key (or of a deprecated name) and
// its canonical key; nil for an unknown key.
func lookupOption(key string) (*confOption, string) {
	if o, canon := lookupBuiltin(key); o != nil {
		return o, canon
	}
	return registeredOption(key)
}

// lookupBuiltin is lookupOption without the registered keys.
func lookupBuiltin(key string) (*confOption, string) {
	options()
	if o := optionByKey[key]; o != nil {
		return o, o.key
	}
	// Keys of the RocksDB and S3 options this table does not list yet
	// are theirs to know.
	switch {
	case strings.HasPrefix(key, rocksdbPrefix):
		if o, ok := state.NewBackendConfig("rocksdb"); ok {
			if err := o.Set(key, ""); !errors.Is(err, state.ErrUnknownBackendOption) {
				return rocksdbOption(key), key
			}
		}
	case strings.HasPrefix(key, "s3."):
		var c s3.Config
		if err := c.Set(key, ""); err == nil || !strings.Contains(err.Error(), "unknown option") {
			return s3Option(key, nil), key
		}
	}
	return nil, ""
}

const rocksdbPrefix = "state.backend.rocksdb."

// nearestKey is the known key closest to an unknown one, when it is close.
func nearestKey(key string) string {
	options()
	best, bestD := "", len(key)/3+2
	for _, k := range append(registeredNames(), knownKeys...) {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func buildOptions() []*confOption {
	var opts []*confOption
	add := func(key string, apply func(a *confApplier, v string) error, aliases ...string) *confOption {
		o := &confOption{key: key, aliases: aliases, apply: func(a *confApplier, _ confEntry, v string) error { return apply(a, v) }}
		opts = append(opts, o)
		return o
	}
	ckpt := func(key string, set func(c *checkpoint.Config, v string) error, aliases ...string) {
		add(key, func(a *confApplier, v string) error {
			var err error
			WithCheckpointConfig(func(c *checkpoint.Config) { err = set(c, v) })(a.e)
			return err
		}, aliases...)
	}
	ckptDur := func(key string, field func(c *checkpoint.Config) *time.Duration, aliases ...string) {
		ckpt(key, func(c *checkpoint.Config, v string) error {
			d, err := parseDuration(v)
			*field(c) = d
			return err
		}, aliases...)
	}
	ckptInt := func(key string, field func(c *checkpoint.Config) *int, least int, aliases ...string) {
		ckpt(key, func(c *checkpoint.Config, v string) error {
			n, err := parseInt(v, least)
			*field(c) = n
			return err
		}, aliases...)
	}

	// Checkpointing (checkpoint.Config).
	ckptDur("execution.checkpointing.interval", func(c *checkpoint.Config) *time.Duration { return &c.Interval })
	ckpt("execution.checkpointing.mode", func(c *checkpoint.Config, v string) (err error) {
		c.Mode, err = checkpoint.ParseMode(strings.TrimSpace(v))
		return err
	})
	ckptDur("execution.checkpointing.timeout", func(c *checkpoint.Config) *time.Duration { return &c.Timeout })
	ckptDur("execution.checkpointing.min-pause", func(c *checkpoint.Config) *time.Duration { return &c.MinPause })
	ckptInt("execution.checkpointing.max-concurrent-checkpoints", func(c *checkpoint.Config) *int { return &c.MaxConcurrent }, 1)
	ckptInt("execution.checkpointing.tolerable-failed-checkpoints", func(c *checkpoint.Config) *int { return &c.TolerableFailed }, 0)
	ckpt("execution.checkpointing.unaligned.enabled", func(c *checkpoint.Config, v string) (err error) {
		c.Unaligned, err = parseBool(v)
		return err
	}, "execution.checkpointing.unaligned")
	ckptDur("execution.checkpointing.aligned-checkpoint-timeout", func(c *checkpoint.Config) *time.Duration { return &c.AlignedCheckpointTimeout },
		"execution.checkpointing.alignment-timeout")
	ckptInt("execution.checkpointing.num-retained", func(c *checkpoint.Config) *int { return &c.RetainedCheckpoints }, 1, "state.checkpoints.num-retained")
	ckpt("execution.checkpointing.externalized-checkpoint-retention", func(c *checkpoint.Config, v string) (err error) {
		c.Retention, err = checkpoint.ParseRetention(strings.TrimSpace(v))
		return err
	})
	ckpt("execution.checkpointing.dir", func(c *checkpoint.Config, v string) error {
		c.Directory = strings.TrimSpace(v)
		return nil
	}, "state.checkpoints.dir")
	ckpt("execution.checkpointing.savepoint-dir", func(c *checkpoint.Config, v string) error {
		c.SavepointDirectory = strings.TrimSpace(v)
		return nil
	}, "state.savepoints.dir")
	// Restore.
	add("execution.state-recovery.path", func(a *confApplier, v string) error {
		WithRestoreFrom(strings.TrimSpace(v))(a.e)
		return nil
	}, "execution.savepoint.path")
	add("execution.state-recovery.claim-mode", func(a *confApplier, v string) error {
		m, err := runtime.ParseClaimMode(strings.TrimSpace(v))
		if err != nil {
			if strings.EqualFold(strings.TrimSpace(v), "LEGACY") {
				return errors.New("LEGACY is not supported: want NO_CLAIM or CLAIM")
			}
			return err
		}
		WithClaimMode(m)(a.e)
		return nil
	}, "execution.savepoint-restore-mode")

	// The job.
	add("parallelism.default", func(a *confApplier, v string) error {
		n, err := parseInt(v, math.MinInt)
		if err == nil {
			WithParallelism(n)(a.e)
		}
		return err
	})
	add("pipeline.max-parallelism", func(a *confApplier, v string) error {
		n, err := parseInt(v, math.MinInt)
		if err == nil {
			WithMaxParallelism(n)(a.e)
		}
		return err
	})
	add("pipeline.name", func(a *confApplier, v string) error {
		if strings.TrimSpace(v) == "" {
			return errors.New("empty job name")
		}
		WithJobName(v)(a.e)
		return nil
	})
	add("pipeline.operator-chaining.enabled", func(a *confApplier, v string) error {
		on, err := parseBool(v)
		if err == nil {
			WithChaining(on)(a.e)
		}
		return err
	}, "pipeline.operator-chaining")
	add("pipeline.default-codec", func(a *confApplier, v string) error {
		f, err := codec.ParseFormat(v)
		if err == nil {
			WithDefaultCodec(f)(a.e)
		}
		return err
	})
	add("pipeline.auto-watermark-interval", func(a *confApplier, v string) error {
		d, err := parseDuration(v)
		if err == nil {
			WithAutoWatermarkInterval(d)(a.e)
		}
		return err
	})
	add("execution.buffer-timeout.interval", func(a *confApplier, v string) error {
		if strings.TrimSpace(v) == "-1" {
			return errors.New("-1 (flush full buffers only) is not supported: give a duration, 0 flushes after every record")
		}
		d, err := parseDuration(v)
		if err == nil {
			WithBufferTimeout(d)(a.e)
		}
		return err
	}, "execution.buffer-timeout")
	// The memory model (package memory).
	memSize := func(key string, field func(c *memory.Config) *int64, least int64) {
		add(key, func(a *confApplier, v string) error {
			n, err := state.ParseMemorySize(v)
			if err != nil {
				return err
			}
			if n < least {
				return fmt.Errorf("%d bytes, want at least %d", n, least)
			}
			if n == 0 {
				WithMemoryConfig(func(c *memory.Config) { *field(c) = memory.ZeroSize })(a.e)
			} else {
				WithMemoryConfig(func(c *memory.Config) { *field(c) = n })(a.e)
			}
			return nil
		})
	}
	memFrac := func(key string, field func(c *memory.Config) *float64) {
		add(key, func(a *confApplier, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || f < 0 || f >= 1 {
				return fmt.Errorf("%q: want a fraction in [0, 1)", v)
			}
			if f == 0 {
				f = math.SmallestNonzeroFloat64 // 0 in memory.Config is the default
			}
			WithMemoryConfig(func(c *memory.Config) { *field(c) = f })(a.e)
			return nil
		})
	}
	memSize("taskmanager.memory.process.size", func(c *memory.Config) *int64 { return &c.ProcessSize }, 1)
	memSize("taskmanager.memory.managed.size", func(c *memory.Config) *int64 { return &c.ManagedSize }, 0)
	memFrac("taskmanager.memory.managed.fraction", func(c *memory.Config) *float64 { return &c.ManagedFraction })
	memFrac("taskmanager.memory.network.fraction", func(c *memory.Config) *float64 { return &c.NetworkFraction })
	memSize("taskmanager.memory.network.min", func(c *memory.Config) *int64 { return &c.NetworkMin }, 0)
	memSize("taskmanager.memory.network.max", func(c *memory.Config) *int64 { return &c.NetworkMax }, 0)
	memFrac("taskmanager.memory.jvm-overhead.fraction", func(c *memory.Config) *float64 { return &c.OverheadFraction })
	memSize("taskmanager.memory.jvm-overhead.min", func(c *memory.Config) *int64 { return &c.OverheadMin }, 0)
	memSize("taskmanager.memory.jvm-overhead.max", func(c *memory.Config) *int64 { return &c.OverheadMax }, 0)
	memFrac("taskmanager.memory.kafka.source.fraction", func(c *memory.Config) *float64 { return &c.KafkaSourceFraction })
	memFrac("taskmanager.memory.kafka.sink.fraction", func(c *memory.Config) *float64 { return &c.KafkaSinkFraction })
	add("task.cancellation.timeout", func(a *confApplier, v string) error {
		d, err := parseDuration(v)
		if err == nil {
			WithTaskCancellationTimeout(d)(a.e)
		}
		return err
	})
	// The network.
	add("taskmanager.memory.segment-size", func(a *confApplier, v string) error {
		n, err := parseSize(v)
		if err == nil {
			WithBufferSize(n)(a.e)
		}
		return err
	})
	add("taskmanager.network.memory.buffers-per-channel", func(a *confApplier, v string) error {
		n, err := parseInt(v, math.MinInt)
		if err == nil {
			WithExclusiveBuffers(n)(a.e)
		}
		return err
	})
	add("taskmanager.network.memory.floating-buffers-per-gate", func(a *confApplier, v string) error {
		n, err := parseInt(v, math.MinInt)
		if err == nil {
			WithFloatingBuffers(n)(a.e)
		}
		return err
	})

	// The restart strategy: collected, applied by finish.
	add("restart-strategy.type", func(a *confApplier, v string) error {
		k, err := parseRestartKind(v)
		a.restart.kind = &k
		return err
	}, "restart-strategy")
	restartDur := func(key string, field func(r *restartSettings) **time.Duration, positive bool) {
		add(key, func(a *confApplier, v string) error {
			d, err := parseDuration(v)
			if err == nil && positive && d == 0 {
				err = errors.New("must be positive")
			}
			*field(&a.restart) = &d
			a.restart.exponential = a.restart.exponential || strings.HasPrefix(key, "restart-strategy.exponential-delay.")
			return err
		})
	}
	restartInt := func(key string, field func(r *restartSettings) **int, least int) {
		add(key, func(a *confApplier, v string) error {
			n, err := parseInt(v, least)
			*field(&a.restart) = &n
			a.restart.exponential = a.restart.exponential || strings.HasPrefix(key, "restart-strategy.exponential-delay.")
			return err
		})
	}
	restartFloat := func(key string, field func(r *restartSettings) **float64, lo, hi float64) {
		add(key, func(a *confApplier, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsNaN(f) || f < lo || f > hi {
				return fmt.Errorf("want a number in [%v, %v]", lo, hi)
			}
			*field(&a.restart) = &f
			a.restart.exponential = true
			return nil
		})
	}
	restartInt("restart-strategy.fixed-delay.attempts", func(r *restartSettings) **int { return &r.attempts }, 0)
	restartDur("restart-strategy.fixed-delay.delay", func(r *restartSettings) **time.Duration { return &r.delay }, false)
	restartDur("restart-strategy.exponential-delay.initial-backoff", func(r *restartSettings) **time.Duration { return &r.initial }, true)
	restartDur("restart-strategy.exponential-delay.max-backoff", func(r *restartSettings) **time.Duration { return &r.max }, true)
	restartFloat("restart-strategy.exponential-delay.backoff-multiplier", func(r *restartSettings) **float64 { return &r.mult }, 1, math.MaxFloat64)
	restartFloat("restart-strategy.exponential-delay.jitter-factor", func(r *restartSettings) **float64 { return &r.jitter }, 0, 1)
	restartDur("restart-strategy.exponential-delay.reset-backoff-threshold", func(r *restartSettings) **time.Duration { return &r.reset }, true)
	restartInt("restart-strategy.exponential-delay.attempts-before-reset-backoff", func(r *restartSettings) **int { return &r.attemptsBeforeReset }, 1)

	// State.
	add("state.backend.type", func(a *confApplier, v string) error {
		switch t := strings.ToLower(strings.TrimSpace(v)); t {
		case "hashmap", "rocksdb":
			a.backend = t
			return nil
		case "filesystem", "jobmanager", "memory":
			a.backend = "hashmap" // Flink 1's names of the heap backend
			return nil
		}
		return errors.New("want hashmap or rocksdb")
	}, "state.backend")
	for _, k := range []string{"localdir", "block.cache-size", "block.blocksize", "writebuffer.size", "writebuffer.count",
		"compression.per.level", "compaction.style", "compaction.level.target-file-size-base",
		"compaction.level.max-size-level-base", "compaction.level.use-dynamic-size", "thread.num",
		"use-bloom-filter", "bloom-filter.bits-per-key", "checkpoint.transfer.thread.num"} {
		o := rocksdbOption(rocksdbPrefix + k)
		opts = append(opts, o)
	}
	rocksAlias := func(key, rocksKey string, aliases ...string) {
		o := rocksdbOption(rocksKey)
		o.key, o.aliases = key, aliases
		opts = append(opts, o)
	}
	rocksAlias("execution.checkpointing.incremental", "state.backend.incremental", "state.backend.incremental")
	rocksAlias("execution.state-recovery.from-local", "state.backend.local-recovery", "state.backend.local-recovery")
	add("state.storage.fs.memory-threshold", func(a *confApplier, v string) error {
		n, err := parseSize(v)
		if err == nil {
			WithStateMemoryThreshold(n)(a.e)
		}
		return err
	}, "state.backend.fs.memory-threshold")

	// S3 checkpoint storage (s3.Config.Set).
	for _, k := range []string{"s3.endpoint", "s3.path.style.access", "s3.region", "s3.max-attempts", "s3.entropy.key", "s3.entropy.length"} {
		opts = append(opts, s3Option(k, nil))
	}
	opts = append(opts, s3Option("s3.access-key", nil, "s3.access.key"), s3Option("s3.secret-key", nil, "s3.secret.key"),
		s3Option("s3.upload.part.size", normalizeSize), s3Option("s3.request.timeout", normalizeDuration))

	// The cluster (cluster.Config.Set), applied by finish.
	for _, k := range []string{"cluster.role", "jobmanager.rpc.address", "taskmanager.host", "taskmanager.resource-id",
		"high-availability.etcd.path.root"} {
		opts = append(opts, clusterOption(k, nil))
	}
	between := func(lo, hi int) func(string) (string, error) {
		return func(v string) (string, error) {
			n, err := parseInt(v, lo)
			if err == nil && n > hi {
				err = fmt.Errorf("must be at most %d", hi)
			}
			return strconv.Itoa(n), err
		}
	}
	opts = append(opts, clusterOption("taskmanager.numberOfTaskSlots", between(1, math.MaxInt32)),
		clusterOption("jobmanager.rpc.port", between(0, 65535)), clusterOption("taskmanager.data.port", between(0, 65535)))
	for _, k := range []string{"heartbeat.interval", "heartbeat.timeout", "slot.request.timeout", "high-availability.etcd.lease-duration"} {
		opts = append(opts, clusterOption(k, normalizeDuration))
	}
	// The processes' authentication, etcd's credentials, the data plane's
	// bounds: the keys package cluster declares (cluster.SecurityKeys).
	for _, k := range cluster.SecurityKeys {
		normalize := func(v string) (string, error) { return strings.TrimSpace(v), nil }
		if strings.HasSuffix(k, "timeout") {
			normalize = normalizeDuration
		}
		opts = append(opts, clusterOption(k, normalize))
	}
	endpoints := clusterOption("high-availability.etcd.endpoints", func(v string) (string, error) {
		items := listItems(v)
		if len(items) == 0 {
			return "", errors.New("no endpoint")
		}
		return strings.Join(items, ","), nil
	})
	endpoints.list = true
	opts = append(opts, endpoints)
	opts = append(opts, &confOption{key: "high-availability.type", aliases: []string{"high-availability"},
		apply: func(a *confApplier, ent confEntry, v string) error {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "none", "":
				a.haTypeOn = false
			case "etcd":
				a.haTypeOn = true
			case "zookeeper", "kubernetes":
				return errors.New("high availability is on etcd in Sluice: want etcd or none")
			default:
				return errors.New("want etcd or none")
			}
			a.haType = &ent
			return nil
		}})

	// Kafka client properties (KafkaClientOptions).
	for _, p := range kafkaclient.SecurityProperties {
		prop := p
		opts = append(opts, &confOption{key: kafkaPrefix + prop, apply: func(_ *confApplier, _ confEntry, v string) error {
			if err := kafkaclient.CheckProperty(prop, v); err != nil {
				var pe *kafkaclient.PropertyError
				if errors.As(err, &pe) {
					return errors.New(pe.Problem)
				}
				return err
			}
			return nil
		}})
	}
	return opts
}

func rocksdbOption(key string) *confOption {
	o := &confOption{key: key, list: key == rocksdbPrefix+"compression.per.level"}
	o.apply = func(a *confApplier, _ confEntry, v string) error {
		if o.list {
			v = strings.Join(listItems(v), ";")
		}
		rocks, err := a.rocksConfig()
		if err != nil {
			return err
		}
		return rocks.Set(rocksKeyOf(o), v)
	}
	return o
}

// rocksKeyOf is the key rocksdb.Options.Set takes for an option (its
// own, or the state.backend.* name of a renamed one).
func rocksKeyOf(o *confOption) string {
	if strings.HasPrefix(o.key, rocksdbPrefix) {
		return o.key
	}
	return o.aliases[0]
}

func s3Option(key string, normalize func(string) (string, error), aliases ...string) *confOption {
	o := &confOption{key: key, aliases: aliases, normalize: normalize}
	o.apply = func(a *confApplier, _ confEntry, v string) error {
		v, err := o.normalize(v)
		if err != nil {
			return err
		}
		if err := a.s3.Set(key, v); err != nil {
			return err
		}
		a.s3Set = true
		return nil
	}
	if o.normalize == nil {
		o.normalize = func(v string) (string, error) { return strings.TrimSpace(v), nil }
	}
	return o
}

func clusterOption(key string, normalize func(string) (string, error)) *confOption {
	o := &confOption{key: key, cluster: key, normalize: normalize}
	if o.normalize == nil {
		o.normalize = func(v string) (string, error) { return strings.TrimSpace(v), nil }
	}
	o.apply = func(a *confApplier, ent confEntry, v string) error {
		v, err := o.normalize(v)
		if err != nil {
			return err
		}
		var scratch cluster.Config // the value alone
		if err := scratch.Set(key, v); err != nil {
			return err
		}
		a.cluster = append(a.cluster, clusterSetting{ent: ent, key: key, value: v})
		return nil
	}
	return o
}

// finish applies what takes several keys: the restart strategy, the
// state backend, S3, the cluster and the Kafka properties.
func (a *confApplier) finish(c *Configuration) {
	a.finishRestart(c)
	switch a.backend {
	case "hashmap":
		WithStateBackend(runtime.HeapStateBackend)(a.e)
	case "rocksdb":
		rocks, err := a.rocksConfig()
		if err != nil {
			a.e.addErr(err)
			break
		}
		WithStateBackend(rocks.Factory(defaultRocksDBDir()))(a.e)
	}
	if a.s3Set {
		WithS3(a.s3)(a.e)
	}
	a.finishCluster()
	if _, err := KafkaClientOptions(c); err != nil {
		a.e.addErr(err)
	}
}

// ErrBackendNotLinked: the configuration names a state backend type
// whose package the program does not import (RocksDB needs cgo, so the
// root package does not import it).
var ErrBackendNotLinked = errors.New("state backend type not linked into the program")

// rocksConfig is the RocksDB backend's configuration, made at the first
// key that needs it.
func (a *confApplier) rocksConfig() (state.BackendConfig, error) {
	if a.rocks == nil {
		c, ok := state.NewBackendConfig("rocksdb")
		if !ok {
			return nil, fmt.Errorf("%w: state.backend.type rocksdb needs the program to import github.com/sluicehq/sluice/state/rocksdb (registered: %v)",
				ErrBackendNotLinked, state.BackendTypes())
		}
		a.rocks = c
	}
	return a.rocks, nil
}

// defaultRocksDBDir is state.backend.rocksdb.localdir's default: Flink's
// io.tmp.dirs, the system's temporary directory.
func defaultRocksDBDir() string { return filepath.Join(os.TempDir(), "sluice-rocksdb") }

func (a *confApplier) finishRestart(c *Configuration) {
	r := a.restart
	if r == (restartSettings{}) {
		return
	}
	var rc checkpoint.RestartConfig
	switch {
	case r.kind != nil:
		switch *r.kind {
		case checkpoint.NoRestart:
			rc = NoRestart()
		case checkpoint.FixedDelay:
			rc = FixedDelayRestart(checkpoint.DefaultFixedDelayAttempts, checkpoint.DefaultFixedDelay)
		default:
			rc = ExponentialDelayRestart()
		}
	case a.e.cfg.RestartSet:
		rc = a.e.cfg.Restart
	case r.exponential && a.e.cfg.Checkpoint.Enabled():
		// Flink's default strategy with checkpointing, with these options.
		rc = ExponentialDelayRestart()
	default:
		return // the options of a strategy not chosen are ignored, as in Flink
	}
	switch rc.Kind {
	case checkpoint.FixedDelay:
		setIf(&rc.Attempts, r.attempts)
		setIf(&rc.Delay, r.delay)
	case checkpoint.ExponentialDelay:
		setIf(&rc.InitialBackoff, r.initial)
		setIf(&rc.MaxBackoff, r.max)
		setIf(&rc.BackoffMultiplier, r.mult)
		setIf(&rc.JitterFactor, r.jitter)
		setIf(&rc.ResetBackoffThreshold, r.reset)
		setIf(&rc.AttemptsBeforeResetBackoff, r.attemptsBeforeReset)
	}
	if err := rc.Validate(); err != nil {
		a.e.addErr(c.blame(err, "restart-strategy.type"))
		return
	}
	WithRestartStrategy(rc)(a.e)
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// blame wraps an error that names keys as the *ConfigError of the first
// set key it names (the longest match), else of fallback.
func (c *Configuration) blame(err error, fallback string) error {
	keys := c.Keys()
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		if strings.Contains(err.Error(), k) {
			ent, _ := c.effective(k)
			return ent.error(err)
		}
	}
	if ent, ok := c.effective(fallback); ok {
		return ent.error(err)
	}
	return fmt.Errorf("%w: %w", ErrInvalidOption, err)
}

// finishCluster applies the cluster keys. Without an earlier WithCluster
// they go over the SLUICE_* variables' configuration: the file's keys
// first, then the variables, then the environment's keys and -D. Over an
// earlier WithCluster's configuration (its flags and variables, or the
// program's), the file's and the environment's keys fill only what it
// leaves unset; -D overrides it.
func (a *confApplier) finishCluster() {
	if len(a.cluster) == 0 && a.haType == nil {
		return
	}
	apply := func(cc *cluster.Config, s clusterSetting) {
		if err := cc.Set(s.key, s.value); err != nil {
			a.e.addErr(s.ent.error(err))
		}
	}
	var cc cluster.Config
	if a.e.cluster == nil {
		for _, s := range a.cluster {
			if s.ent.layer == layerFile {
				apply(&cc, s)
			}
		}
		if err := cc.FromEnv(); err != nil {
			a.e.addErr(fmt.Errorf("%w: %w", ErrInvalidOption, err))
		}
		for _, s := range a.cluster {
			if s.ent.layer != layerFile {
				apply(&cc, s)
			}
		}
	} else {
		cc = *a.e.cluster
		var fill cluster.Config
		for _, l := range []confLayer{layerFile, layerEnv} {
			for _, s := range a.cluster {
				if s.ent.layer == l {
					apply(&fill, s)
				}
			}
		}
		fillUnset(&cc, fill)
		for _, s := range a.cluster {
			if s.ent.layer == layerDynamic {
				apply(&cc, s)
			}
		}
	}
	if a.haType != nil {
		switch {
		case !a.haTypeOn:
			cc.EtcdEndpoints = nil
		case len(cc.EtcdEndpoints) == 0:
			a.e.addErr(a.haType.error(errors.New("etcd needs high-availability.etcd.endpoints")))
		}
	}
	WithCluster(cc)(a.e)
}

// fillUnset copies into dst the exported fields of src that dst leaves
// zero, field by field in the structs it holds (the security settings).
func fillUnset(dst *cluster.Config, src cluster.Config) {
	fillValue(reflect.ValueOf(dst).Elem(), reflect.ValueOf(src))
}

func fillValue(d, s reflect.Value) {
	for i := range d.NumField() {
		switch {
		case !d.Type().Field(i).IsExported():
		case d.Field(i).Kind() == reflect.Struct:
			fillValue(d.Field(i), s.Field(i))
		case d.Field(i).IsZero() && !s.Field(i).IsZero():
			d.Field(i).Set(s.Field(i))
		}
	}
}

// ---- Values ----

// parseDuration parses a duration as Flink's TimeUtils: a number and an
// optional unit (none: milliseconds); Go's syntax is accepted too.
func parseDuration(v string) (time.Duration, error) {
	s := strings.TrimSpace(v)
	bad := errors.New(`want a duration: a number with an optional unit (ms, s, min, h, d; none is milliseconds), e.g. "10 s", "1 min", "500"`)
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	var mult time.Duration
	switch unit {
	case "":
		mult = time.Millisecond
	case "ns", "nano", "nanos", "nanosecond", "nanoseconds":
		mult = time.Nanosecond
	case "us", "µs", "micro", "micros", "microsecond", "microseconds":
		mult = time.Microsecond
	case "ms", "milli", "millis", "millisecond", "milliseconds":
		mult = time.Millisecond
	case "s", "sec", "secs", "second", "seconds":
		mult = time.Second
	case "m", "min", "mins", "minute", "minutes":
		mult = time.Minute
	case "h", "hour", "hours":
		mult = time.Hour
	case "d", "day", "days":
		mult = 24 * time.Hour
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if mult == 0 || err != nil {
		// Go's syntax: 1m30s, 1.5s.
		d, gerr := time.ParseDuration(s)
		switch {
		case gerr != nil:
			return 0, bad
		case d < 0:
			return 0, errors.New("a duration must not be negative")
		}
		return d, nil
	}
	if n > int64(math.MaxInt64/mult) {
		return 0, errors.New("duration overflows")
	}
	return time.Duration(n) * mult, nil
}

func normalizeDuration(v string) (string, error) {
	d, err := parseDuration(v)
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// parseSize parses a memory size as Flink's MemorySize, into an int.
func parseSize(v string) (int, error) {
	n, err := state.ParseMemorySize(v)
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("memory size %q is too large", v)
	}
	return int(n), nil
}

func normalizeSize(v string) (string, error) {
	n, err := state.ParseMemorySize(v)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(n, 10), nil
}

func parseInt(v string, least int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, errors.New("want an integer")
	}
	if n < least {
		return 0, fmt.Errorf("must be at least %d", least)
	}
	return n, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("want true or false")
}

func parseRestartKind(v string) (checkpoint.RestartKind, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "none", "off", "disable":
		return checkpoint.NoRestart, nil
	case "fixed-delay", "fixeddelay":
		return checkpoint.FixedDelay, nil
	case "exponential-delay", "exponentialdelay":
		return checkpoint.ExponentialDelay, nil
	case "failure-rate", "failurerate":
		return 0, errors.New("failure-rate is not supported: want none, fixed-delay or exponential-delay")
	}
	return 0, errors.New("want none, fixed-delay or exponential-delay")
}

// listItems splits a list value: Flink's "[a, b]" (a YAML list), or
// "a;b" and "a,b".
func listItems(v string) []string {
	s := strings.TrimSpace(v)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	var items []string
	for _, it := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		it = strings.TrimSpace(it)
		if len(it) >= 2 && (it[0] == '"' || it[0] == '\'') && it[len(it)-1] == it[0] {
			it = it[1 : len(it)-1]
		}
		if it != "" {
			items = append(items, it)
		}
	}
	return items
}
