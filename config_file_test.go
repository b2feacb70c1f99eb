package sluice

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testcerts"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// clearSluiceEnv unsets the SLUICE_* variables for the test, so that the
// machine's environment cannot change what it sees.
func clearSluiceEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SLUICE_") {
			t.Setenv(name, "") // restored after the test
			os.Unsetenv(name)
		}
	}
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// caFile writes a CA certificate in PEM and returns its path.
func caFile(t *testing.T) string {
	t.Helper()
	return testcerts.NewTestCA(t, "kafka-ca").File(t)
}

// The example file sets an option of every kind, nested and flat; each
// lands where the environment's typed options put it.
func TestFlinkStyleFile(t *testing.T) {
	clearSluiceEnv(t)
	c, err := LoadConfiguration("testdata/config/flink-style.yaml")
	if err != nil {
		t.Fatalf("LoadConfiguration: %v", err)
	}
	if got := c.Source("execution.checkpointing.interval"); got != "testdata/config/flink-style.yaml:18" {
		t.Errorf("source of execution.checkpointing.interval %q, want testdata/config/flink-style.yaml:18", got)
	}
	// The file's machine paths, replaced as -D would.
	localdir := t.TempDir()
	for k, v := range map[string]string{"state.backend.rocksdb.localdir": localdir, "kafka.properties.ssl.truststore.location": caFile(t)} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	e := NewEnvironment()
	a := applyConfiguration(e, c)
	if len(e.errs) > 0 {
		t.Fatalf("WithConfiguration: %v", errors.Join(e.errs...))
	}
	cfg := e.cfg

	// The job, the network.
	if cfg.JobName != "orders-enrichment" || cfg.Parallelism != 4 || cfg.MaxParallelism != 256 || cfg.Chaining ||
		cfg.AutoWatermarkInterval != 500*time.Millisecond || cfg.BufferTimeout != 50*time.Millisecond ||
		cfg.CancellationTimeout != 2*time.Minute || cfg.ClaimMode != runtime.Claim {
		t.Errorf("job options: name %q, parallelism %d, max %d, chaining %v, watermarks %v, buffer timeout %v, cancellation %v, claim %v",
			cfg.JobName, cfg.Parallelism, cfg.MaxParallelism, cfg.Chaining, cfg.AutoWatermarkInterval, cfg.BufferTimeout,
			cfg.CancellationTimeout, cfg.ClaimMode)
	}
	if n := cfg.Network; n.BufferSize != 64<<10 || n.ExclusiveBuffersPerChannel != 4 || n.FloatingBuffersPerGate != 16 {
		t.Errorf("network %+v, want 64 KiB buffers, 4 per channel, 16 per gate", n)
	}
	if cfg.InlineThreshold == nil || *cfg.InlineThreshold != 4<<10 {
		t.Errorf("memory threshold %v, want 4 KiB", cfg.InlineThreshold)
	}

	// Checkpointing.
	want := checkpoint.Config{
		Interval: 30 * time.Second, Mode: checkpoint.ExactlyOnce, Timeout: 5 * time.Minute, MinPause: time.Second,
		MaxConcurrent: 1, TolerableFailed: 3, Unaligned: true, AlignedCheckpointTimeout: 2 * time.Second,
		RetainedCheckpoints: 3, Retention: checkpoint.RetainOnCancellation,
		Directory: "s3://checkpoints/orders", SavepointDirectory: "s3://checkpoints/savepoints",
	}
	if cfg.Checkpoint != want {
		t.Errorf("checkpoint config\n %+v, want\n %+v", cfg.Checkpoint, want)
	}
	if err := cfg.Checkpoint.Validate(); err != nil {
		t.Errorf("the example's checkpoint config is refused: %v", err)
	}

	// Restart strategy.
	if !cfg.RestartSet || cfg.Restart != checkpoint.FixedDelayRestart(5, 10*time.Second) {
		t.Errorf("restart %+v (set %v), want fixed-delay 5 × 10 s", cfg.Restart, cfg.RestartSet)
	}

	// RocksDB, through rocksdb.Options.Set.
	wantRocks := rocksdb.Options{Dir: localdir, BlockCacheSize: 128 << 20, WriteBufferSize: 32 << 20, WriteBufferCount: 3,
		Compression:     []rocksdb.Compression{rocksdb.NoCompression, rocksdb.SnappyCompression, rocksdb.ZSTDCompression},
		CompactionStyle: rocksdb.LevelCompaction, Threads: 4, LocalRecovery: true}
	rocks, ok := a.rocks.(interface{ Options() rocksdb.Options })
	if !ok {
		t.Fatalf("the rocksdb backend type's configuration is %T", a.rocks)
	}
	if got := rocks.Options(); !reflect.DeepEqual(got, wantRocks) {
		t.Errorf("rocksdb options\n %+v, want\n %+v", got, wantRocks)
	}
	if cfg.StateBackend == nil {
		t.Fatal("no state backend: want RocksDB")
	}
	kb, err := cfg.StateBackend(state.BackendOptions{Job: "job", OperatorUID: "op", Subtask: 0, MaxParallelism: 256,
		KeyGroups: state.KeyGroupRange{Start: 0, End: 255}})
	if err != nil {
		t.Fatalf("state backend: %v", err)
	}
	defer kb.Close()
	rb, ok := kb.(*rocksdb.Backend)
	if !ok || !strings.HasPrefix(rb.Dir(), localdir) || !rb.Incremental() {
		t.Errorf("state backend %T in %v, want an incremental RocksDB backend under %s", kb, rb.Dir(), localdir)
	}

	// S3, through S3Config.Set.
	pathStyle := true
	wantS3 := S3Config{Endpoint: "http://minio:9000", PathStyle: &pathStyle, PartSize: 16 << 20, RequestTimeout: time.Minute}
	if !reflect.DeepEqual(a.s3, wantS3) || cfg.CheckpointSchemes["s3"] == nil {
		t.Errorf("s3 %+v (schemes %v), want %+v", a.s3, cfg.CheckpointSchemes, wantS3)
	}

	// The cluster, through ClusterConfig.Set.
	if e.cluster == nil {
		t.Fatal("no cluster configuration")
	}
	cc := *e.cluster
	if cc.Slots != 4 || cc.Coordinator != "coordinator.sluice.svc:6123" || cc.HeartbeatInterval != 5*time.Second ||
		cc.HeartbeatTimeout != 30*time.Second || !reflect.DeepEqual(cc.EtcdEndpoints, []string{"http://etcd-0:2379", "http://etcd-1:2379"}) ||
		cc.EtcdPrefix != "/sluice/orders" || cc.LeaseDuration != 15*time.Second {
		t.Errorf("cluster %+v", cc)
	}

	// Kafka.
	opts, err := KafkaClientOptions(c)
	if err != nil {
		t.Fatalf("KafkaClientOptions: %v", err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ms, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	tc, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config)
	if len(ms) != 1 || ms[0].Name() != "SCRAM-SHA-512" || tc == nil || tc.RootCAs == nil {
		t.Errorf("kafka: SASL %v, TLS %v; want SCRAM-SHA-512 over TLS with the trust store", ms, tc)
	}
}

// Nested and flat keys are the same keys.
func TestNestedAndFlatKeys(t *testing.T) {
	clearSluiceEnv(t)
	nested, err := LoadConfiguration(writeConfig(t, "execution:\n  checkpointing:\n    interval: 10 s\n    dir: /tmp/ck\nrestart-strategy:\n  type: none\nhigh-availability.etcd:\n  endpoints: [a:1, b:2]\n"))
	if err != nil {
		t.Fatal(err)
	}
	flat, err := LoadConfiguration(writeConfig(t, "execution.checkpointing.interval: 10 s\nexecution.checkpointing.dir: /tmp/ck\nrestart-strategy.type: none\nhigh-availability.etcd.endpoints: \"[a:1, b:2]\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"execution.checkpointing.interval", "execution.checkpointing.dir", "restart-strategy.type", "high-availability.etcd.endpoints"} {
		n, okN := nested.Get(k)
		f, okF := flat.Get(k)
		if !okN || !okF || n != f {
			t.Errorf("%s: nested %q (%v), flat %q (%v)", k, n, okN, f, okF)
		}
	}
	if !reflect.DeepEqual(nested.Keys(), flat.Keys()) {
		t.Errorf("keys: nested %v, flat %v", nested.Keys(), flat.Keys())
	}
}

// Flink's precedence: the file, then the environment ($SLUICE_PROPERTIES,
// then SLUICE_CONF_*), then -D.
func TestConfigurationPrecedence(t *testing.T) {
	clearSluiceEnv(t)
	path := writeConfig(t, "parallelism.default: 2\npipeline:\n  name: from-file\n  max-parallelism: 64\nexecution.checkpointing.timeout: 1 min\n")
	load := func(env map[string]string, args ...string) *Configuration {
		t.Helper()
		clearSluiceEnv(t)
		for k, v := range env {
			t.Setenv(k, v)
		}
		c, err := LoadConfiguration(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.FromEnv(); err != nil {
			t.Fatal(err)
		}
		rest, err := c.ParseDynamicProperties(args)
		if err != nil {
			t.Fatal(err)
		}
		if len(rest) != 0 {
			t.Fatalf("rest %v", rest)
		}
		return c
	}
	check := func(c *Configuration, key, value, source string) {
		t.Helper()
		if v, _ := c.Get(key); v != value || c.Source(key) != source {
			t.Errorf("%s = %q from %q, want %q from %q", key, v, c.Source(key), value, source)
		}
	}
	c := load(nil)
	check(c, "parallelism.default", "2", path+":1")
	check(c, "pipeline.name", "from-file", path+":3")

	env := map[string]string{
		"SLUICE_PROPERTIES":                    "parallelism.default: 3\npipeline:\n  name: from-properties\n",
		"SLUICE_CONF_PIPELINE_NAME":            "from-env",
		"SLUICE_CONF_PIPELINE_MAX_PARALLELISM": "32",
	}
	c = load(env)
	check(c, "parallelism.default", "3", "$SLUICE_PROPERTIES line 1")
	check(c, "pipeline.name", "from-env", "$SLUICE_CONF_PIPELINE_NAME") // over $SLUICE_PROPERTIES
	check(c, "pipeline.max-parallelism", "32", "$SLUICE_CONF_PIPELINE_MAX_PARALLELISM")
	check(c, "execution.checkpointing.timeout", "1 min", path+":5")

	c = load(env, "-D", "parallelism.default=5", "-Dpipeline.name=from-D", "-Dparallelism.default=6")
	check(c, "parallelism.default", "6", "-D") // the later -D
	check(c, "pipeline.name", "from-D", "-D")
	check(c, "pipeline.max-parallelism", "32", "$SLUICE_CONF_PIPELINE_MAX_PARALLELISM")

	// The order of reading does not matter: the layers do.
	c = NewConfiguration()
	if _, err := c.ParseDynamicProperties([]string{"-D", "parallelism.default=7"}); err != nil {
		t.Fatal(err)
	}
	if err := c.FromEnv(); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	check(c, "parallelism.default", "7", "-D")
	e := NewEnvironment(WithConfiguration(c))
	if e.cfg.Parallelism != 7 || e.cfg.JobName != "from-env" || e.cfg.MaxParallelism != 32 || e.cfg.Checkpoint.Timeout != time.Minute {
		t.Errorf("environment: parallelism %d, name %q, max %d, timeout %v", e.cfg.Parallelism, e.cfg.JobName, e.cfg.MaxParallelism, e.cfg.Checkpoint.Timeout)
	}
	// Options after WithConfiguration override it, as any later option.
	e = NewEnvironment(WithConfiguration(c), WithParallelism(9))
	if e.cfg.Parallelism != 9 {
		t.Errorf("parallelism %d after WithParallelism(9)", e.cfg.Parallelism)
	}
}

func TestParseDynamicPropertiesRest(t *testing.T) {
	c := NewConfiguration()
	rest, err := c.ParseDynamicProperties([]string{"run", "-Dparallelism.default=2", "-v", "-D", "pipeline.name=a=b", "--", "-Dx=y"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rest, []string{"run", "-v", "--", "-Dx=y"}) {
		t.Errorf("rest %q", rest)
	}
	if v, _ := c.Get("pipeline.name"); v != "a=b" {
		t.Errorf("pipeline.name %q, want a=b (split at the first '=')", v)
	}
	for _, args := range [][]string{{"-D"}, {"-Dparallelism.default"}, {"-D", "nope=1"}} {
		if _, err := NewConfiguration().ParseDynamicProperties(args); err == nil || !errors.Is(err, ErrInvalidOption) {
			t.Errorf("ParseDynamicProperties(%q): %v, want an invalid option", args, err)
		}
	}
}

func TestConfigurationErrors(t *testing.T) {
	clearSluiceEnv(t)
	configErr := func(t *testing.T, err error, key, value, source string, is error, text string) {
		t.Helper()
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("error %v (%T), want a *ConfigError", err, err)
		}
		if ce.Key != key || ce.Value != value || ce.Source != source || !errors.Is(err, ErrInvalidOption) || (is != nil && !errors.Is(err, is)) ||
			!strings.Contains(err.Error(), text) {
			t.Errorf("error %q: key %q, value %q, source %q; want %q, %q, %q, about %q", err, ce.Key, ce.Value, ce.Source, key, value, source, text)
		}
		for _, part := range []string{key, source} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q does not name %q", err, part)
			}
		}
	}
	t.Run("unknown key in a file", func(t *testing.T) {
		p := writeConfig(t, "parallelism.default: 2\nexecution:\n  checkpointing:\n    intervall: 10 s\n")
		_, err := LoadConfiguration(p)
		configErr(t, err, "execution.checkpointing.intervall", "10 s", p+":4", ErrUnknownConfigKey, "did you mean execution.checkpointing.interval?")
	})
	t.Run("bad value in a file", func(t *testing.T) {
		p := writeConfig(t, "pipeline.name: x\nexecution.checkpointing.timeout: ten minutes\n")
		_, err := LoadConfiguration(p)
		configErr(t, err, "execution.checkpointing.timeout", "ten minutes", p+":2", nil, "want a duration")
	})
	t.Run("every error at once", func(t *testing.T) {
		p := writeConfig(t, "parallelism.default: 0\nrestart-strategy.type: failure-rate\nnope: 1\n")
		_, err := LoadConfiguration(p)
		for _, part := range []string{p + ":1: parallelism.default = \"0\"", "must be at least 1", p + ":2: restart-strategy.type", "failure-rate is not supported", p + ":3: nope"} {
			if err == nil || !strings.Contains(err.Error(), part) {
				t.Errorf("error %v does not say %q", err, part)
			}
		}
	})
	t.Run("a value an option refuses", func(t *testing.T) {
		p := writeConfig(t, "pipeline.max-parallelism: 40000\n")
		_, err := LoadConfiguration(p)
		configErr(t, err, "pipeline.max-parallelism", "40000", p+":1", nil, "exceeds 32768")
	})
	t.Run("duplicate keys", func(t *testing.T) {
		p := writeConfig(t, "execution:\n  checkpointing:\n    dir: /a\nexecution.checkpointing.dir: /b\n")
		_, err := LoadConfiguration(p)
		if err == nil || !strings.Contains(err.Error(), "set twice") || !strings.Contains(err.Error(), p+":3") || !strings.Contains(err.Error(), p+":4") {
			t.Errorf("error %v, want one naming both lines", err)
		}
		p = writeConfig(t, "state.checkpoints.dir: /a\nexecution.checkpointing.dir: /b\n")
		if _, err := LoadConfiguration(p); err == nil || !strings.Contains(err.Error(), "two names") {
			t.Errorf("a key and its deprecated name: %v", err)
		}
		p = writeConfig(t, "a: 1\na: 2\n")
		if _, err := LoadConfiguration(p); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("a YAML duplicate: %v", err)
		}
	})
	t.Run("a list for one value", func(t *testing.T) {
		p := writeConfig(t, "pipeline.name: [a, b]\n")
		_, err := LoadConfiguration(p)
		configErr(t, err, "pipeline.name", "[a, b]", p+":1", nil, "not a list")
	})
	t.Run("yaml syntax", func(t *testing.T) {
		p := writeConfig(t, "pipeline:\n  name: [x\n")
		if _, err := LoadConfiguration(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "line") {
			t.Errorf("error %v, want one naming the file and line", err)
		}
		p = writeConfig(t, "- a\n- b\n")
		if _, err := LoadConfiguration(p); err == nil || !strings.Contains(err.Error(), "mapping") {
			t.Errorf("a list file: %v", err)
		}
	})
	t.Run("unknown key with a null value", func(t *testing.T) {
		p := writeConfig(t, "pipeline.nmae:\npipeline.name: ~\n")
		_, err := LoadConfiguration(p)
		configErr(t, err, "pipeline.nmae", "", p+":1", ErrUnknownConfigKey, "did you mean pipeline.name?")
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("SLUICE_CONF_EXECUTION_CHECKPOINTING_MODE", "twice")
		err := NewConfiguration().FromEnv()
		configErr(t, err, "execution.checkpointing.mode", "twice", "$SLUICE_CONF_EXECUTION_CHECKPOINTING_MODE", nil, "EXACTLY_ONCE or AT_LEAST_ONCE")
		clearSluiceEnv(t)
		t.Setenv("SLUICE_CONF_EXECUTION_CHECKPOINTING_INTERVALL", "1")
		err = NewConfiguration().FromEnv()
		if !errors.Is(err, ErrUnknownConfigKey) || !strings.Contains(err.Error(), "$SLUICE_CONF_EXECUTION_CHECKPOINTING_INTERVALL") ||
			!strings.Contains(err.Error(), "did you mean SLUICE_CONF_EXECUTION_CHECKPOINTING_INTERVAL?") {
			t.Errorf("unknown variable: %v", err)
		}
		clearSluiceEnv(t)
		t.Setenv("SLUICE_PROPERTIES", "pipeline.name: x\nheartbeat.interval: soon\n")
		err = NewConfiguration().FromEnv()
		configErr(t, err, "heartbeat.interval", "soon", "$SLUICE_PROPERTIES line 2", nil, "want a duration")
	})
	t.Run("-D", func(t *testing.T) {
		_, err := NewConfiguration().ParseDynamicProperties([]string{"-Dtaskmanager.numberOfTaskSlots=many"})
		configErr(t, err, "taskmanager.numberOfTaskSlots", "many", "-D", nil, "taskmanager.numberOfTaskSlots")
		_, err = NewConfiguration().ParseDynamicProperties([]string{"-D", "taskmanager.numberOfTaskSlots=0"})
		configErr(t, err, "taskmanager.numberOfTaskSlots", "0", "-D", nil, "must be at least 1")
		_, err = NewConfiguration().ParseDynamicProperties([]string{"-D", "jobmanager.rpc.port=70000"})
		configErr(t, err, "jobmanager.rpc.port", "70000", "-D", nil, "at most 65535")
	})
	t.Run("secrets are masked", func(t *testing.T) {
		p := writeConfig(t, "kafka.properties.sasl.jaas.config: 'PlainLoginModule required password=\"hunter2\"'\ns3.secret-key: [hunter2]\n")
		_, err := LoadConfiguration(p)
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "******") {
			t.Errorf("error %v shows a secret or hides nothing", err)
		}
		c := NewConfiguration()
		if err := c.Set("s3.secret-key", "hunter2"); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(c.String(), "hunter2") || !strings.Contains(c.String(), "s3.secret-key: ******") {
			t.Errorf("String() = %q", c.String())
		}
	})
	t.Run("kafka", func(t *testing.T) {
		p := writeConfig(t, "kafka.properties:\n  security.protocol: SASL_SSL\n  sasl.mechanism: PLAIN\n  ssl.truststore.location: /nowhere/ca.pem\n"+
			"  sasl.jaas.config: org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";\n")
		c, err := LoadConfiguration(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = KafkaClientOptions(c)
		configErr(t, err, "kafka.properties.ssl.truststore.location", "/nowhere/ca.pem", p+":4", nil, "no such file")
		// WithConfiguration checks them too.
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "kafka.properties.ssl.truststore.location") {
			t.Errorf("Validate: %v", err)
		}
		p = writeConfig(t, "kafka.properties.ssl.truststore.type: JKS\n")
		_, err = LoadConfiguration(p)
		configErr(t, err, "kafka.properties.ssl.truststore.type", "JKS", p+":1", nil, "only PEM")
		p = writeConfig(t, "kafka.properties.security.protocol: SASL_PLAINTEXT\n")
		c, _ = LoadConfiguration(p)
		_, err = KafkaClientOptions(c)
		if err == nil || !strings.Contains(err.Error(), "kafka.properties.sasl.mechanism") || !strings.Contains(err.Error(), "GSSAPI") {
			t.Errorf("a missing mechanism: %v", err)
		}
		p = writeConfig(t, "kafka.properties.sasl.kerberos.service.name: kafka\n")
		_, err = LoadConfiguration(p)
		configErr(t, err, "kafka.properties.sasl.kerberos.service.name", "kafka", p+":1", ErrUnknownConfigKey, "")
	})
	t.Run("Execute", func(t *testing.T) {
		c := NewConfiguration()
		c.layers[layerFile]["parallelism.default"] = confEntry{key: "parallelism.default", value: "-3", source: "x.yaml:7"} // as if read before a check
		env := NewEnvironment(WithConfiguration(c))
		err := env.Execute(context.Background())
		configErr(t, err, "parallelism.default", "-3", "x.yaml:7", nil, "parallelism must be at least 1")
	})
}

func TestDurationsAndSizes(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"500": 500 * time.Millisecond, "10 s": 10 * time.Second, "10s": 10 * time.Second, "1 min": time.Minute, "2m": 2 * time.Minute,
		"3 h": 3 * time.Hour, "1d": 24 * time.Hour, "250 ms": 250 * time.Millisecond, "7 seconds": 7 * time.Second, "5 MINUTES": 5 * time.Minute,
		"100 us": 100 * time.Microsecond, "100µs": 100 * time.Microsecond, "9ns": 9, "1m30s": 90 * time.Second, "1.5s": 1500 * time.Millisecond, "0": 0,
	} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ten", "-1", "-5s", "5 fortnights", "1 s 2", "99999999999999999 d"} {
		if d, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) = %v, want an error", in, d)
		}
	}
	for in, want := range map[string]int{"32kb": 32 << 10, "64 mb": 64 << 20, "4096": 4096, "1k": 1 << 10, "2 mebibytes": 2 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "big", "-1kb", "8gb"} {
		if n, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %v, want an error", in, n)
		}
	}
	if got := listItems("[a, 'b', \"c\"]"); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("listItems = %q", got)
	}
	if got := listItems("a;b,c"); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("listItems = %q", got)
	}
}

// Every key has its own SLUICE_CONF_ variable, every key handed to a
// package's Set is one it knows, and the doc comment lists every key.
func TestConfigKeyTable(t *testing.T) {
	suffixes := map[string]string{}
	for _, o := range options() {
		for _, k := range append([]string{o.key}, o.aliases...) {
			s := envSuffix(k)
			if prev, dup := suffixes[s]; dup && optionByKey[prev] != o {
				t.Errorf("%s and %s share the variable %s%s", prev, k, EnvPrefix, s)
			}
			suffixes[s] = k
			if got := envKeys()[s]; got != o.key {
				t.Errorf("%s%s maps to %q, want %q", EnvPrefix, s, got, o.key)
			}
		}
		switch {
		case strings.HasPrefix(o.key, rocksdbPrefix) || (len(o.aliases) > 0 && strings.HasPrefix(o.aliases[0], "state.backend.") && o.cluster == "" && !strings.HasPrefix(o.key, "state.")):
			var r rocksdb.Options
			if err := r.Set(rocksKeyOf(o), ""); errors.Is(err, rocksdb.ErrUnknownOption) {
				t.Errorf("%s: rocksdb.Options.Set does not know %s", o.key, rocksKeyOf(o))
			}
		case strings.HasPrefix(o.key, "s3."):
			var s S3Config
			if err := s.Set(o.key, ""); err != nil && strings.Contains(err.Error(), "unknown option") {
				t.Errorf("S3Config.Set does not know %s", o.key)
			}
		case o.cluster != "":
			var cc cluster.Config
			if err := cc.Set(o.cluster, ""); err != nil && strings.Contains(err.Error(), "unknown option") {
				t.Errorf("cluster.Config.Set does not know %s", o.cluster)
			}
		}
	}
	src, err := os.ReadFile("config_file.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src[:strings.Index(string(src), "type Configuration struct")])
	for _, o := range options() {
		name := o.key
		if p, ok := strings.CutPrefix(name, kafkaPrefix); ok {
			name = p
			if i := strings.LastIndexByte(name, '.'); strings.HasPrefix(name, "ssl.") && i > 4 {
				name = name[i+1:] // ssl.truststore.{type,...}
			}
		}
		name = strings.TrimPrefix(name, rocksdbPrefix)
		if !strings.Contains(doc, name) {
			t.Errorf("the Configuration doc does not list %s", o.key)
		}
	}
}

// A key the RocksDB or S3 options learn later is taken without a change
// here, and an unknown one under their prefixes is refused.
func TestDelegatedPrefixes(t *testing.T) {
	c := NewConfiguration()
	for k, v := range map[string]string{"state.backend.rocksdb.thread.num": "3", "s3.access.key": "AK"} {
		if err := c.Set(k, v); err != nil {
			t.Errorf("Set(%s): %v", k, err)
		}
	}
	for _, k := range []string{"state.backend.rocksdb.nope", "s3.nope"} {
		if err := c.Set(k, "1"); !errors.Is(err, ErrUnknownConfigKey) {
			t.Errorf("Set(%s): %v, want an unknown key", k, err)
		}
	}
	a := applyConfiguration(NewEnvironment(), c)
	rocks, ok := a.rocks.(interface{ Options() rocksdb.Options })
	if !ok {
		t.Fatalf("the rocksdb backend type's configuration is %T", a.rocks)
	}
	if a.s3.AccessKeyID != "AK" || rocks.Options().Threads != 3 {
		t.Errorf("s3 %+v, rocks threads %d", a.s3, rocks.Options().Threads)
	}
}

func TestRestartStrategyKeys(t *testing.T) {
	clearSluiceEnv(t)
	env := func(t *testing.T, yaml string, opts ...Option) *Environment {
		t.Helper()
		c, err := LoadConfiguration(writeConfig(t, yaml))
		if err != nil {
			t.Fatal(err)
		}
		return NewEnvironment(append(opts, WithConfiguration(c))...)
	}
	e := env(t, "restart-strategy:\n  type: exponential-delay\n  exponential-delay:\n    initial-backoff: 2 s\n    max-backoff: 1 min\n    backoff-multiplier: 2\n    jitter-factor: 0.2\n    reset-backoff-threshold: 10 min\n    attempts-before-reset-backoff: 7\n")
	want := RestartStrategy{Kind: checkpoint.ExponentialDelay, InitialBackoff: 2 * time.Second, MaxBackoff: time.Minute, BackoffMultiplier: 2,
		JitterFactor: 0.2, ResetBackoffThreshold: 10 * time.Minute, AttemptsBeforeResetBackoff: 7}
	if len(e.errs) > 0 || !e.cfg.RestartSet || e.cfg.Restart != want {
		t.Errorf("exponential-delay: %+v (%v), want %+v", e.cfg.Restart, e.errs, want)
	}
	// Without a type, with checkpointing: Flink's default strategy
	// (exponential-delay) takes its options.
	e = env(t, "execution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: /tmp/x\nrestart-strategy.exponential-delay.max-backoff: 5 s\n")
	if !e.cfg.RestartSet || e.cfg.Restart.Kind != checkpoint.ExponentialDelay || e.cfg.Restart.MaxBackoff != 5*time.Second {
		t.Errorf("default strategy with its option: %+v (set %v)", e.cfg.Restart, e.cfg.RestartSet)
	}
	// ... and without checkpointing, none: the options are ignored.
	e = env(t, "restart-strategy.exponential-delay.max-backoff: 5 s\nrestart-strategy.fixed-delay.attempts: 3\n")
	if e.cfg.RestartSet || len(e.errs) > 0 {
		t.Errorf("options of a strategy not chosen: %+v (set %v, %v)", e.cfg.Restart, e.cfg.RestartSet, e.errs)
	}
	// Options of the strategy an earlier WithRestartStrategy chose.
	e = env(t, "restart-strategy.fixed-delay.attempts: 3\n", WithRestartStrategy(FixedDelayRestart(1, time.Second)))
	if e.cfg.Restart != FixedDelayRestart(3, time.Second) {
		t.Errorf("onto WithRestartStrategy: %+v", e.cfg.Restart)
	}
	// Validation across keys, blamed on the key it names.
	e = env(t, "restart-strategy.type: exponential-delay\nrestart-strategy.exponential-delay.initial-backoff: 1 min\nrestart-strategy.exponential-delay.max-backoff: 1 s\n")
	var ce *ConfigError
	if err := errors.Join(e.errs...); !errors.As(err, &ce) || ce.Key != "restart-strategy.exponential-delay.max-backoff" || !strings.HasSuffix(ce.Source, ":3") {
		t.Errorf("max below initial: %v", err)
	}
	e = env(t, "restart-strategy.type: none\n")
	if e.cfg.Restart.Kind != checkpoint.NoRestart || !e.cfg.RestartSet {
		t.Errorf("none: %+v", e.cfg.Restart)
	}
}

func TestStateBackendKeys(t *testing.T) {
	clearSluiceEnv(t)
	c := NewConfiguration()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Set("state.backend.type", "hashmap"))
	must(c.Set("state.backend.rocksdb.thread.num", "2")) // checked, no effect
	e := NewEnvironment(WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{})), WithConfiguration(c))
	kb, err := e.cfg.StateBackend(state.BackendOptions{Job: "j", OperatorUID: "o", MaxParallelism: 8, KeyGroups: state.KeyGroupRange{Start: 0, End: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if _, isRocks := kb.(*rocksdb.Backend); isRocks {
		t.Error("state.backend.type hashmap left RocksDB")
	}
	kb.Close()
	// Unset, the environment's backend stays.
	c = NewConfiguration()
	must(c.Set("state.backend.rocksdb.thread.num", "2"))
	if e := NewEnvironment(WithConfiguration(c)); e.cfg.StateBackend != nil {
		t.Error("RocksDB options without state.backend.type chose a backend")
	}
	// Flink 1's key, and the default working directory.
	c = NewConfiguration()
	must(c.Set("state.backend", "ROCKSDB"))
	must(c.Set("execution.checkpointing.incremental", "false"))
	e = NewEnvironment(WithConfiguration(c))
	kb, err = e.cfg.StateBackend(state.BackendOptions{Job: "config-test-" + t.Name(), OperatorUID: "o", MaxParallelism: 8, KeyGroups: state.KeyGroupRange{Start: 0, End: 7}})
	if err != nil {
		t.Fatal(err)
	}
	rb := kb.(*rocksdb.Backend)
	defer os.RemoveAll(filepath.Join(defaultRocksDBDir(), "config-test-"+t.Name()))
	defer rb.Close()
	if !strings.HasPrefix(rb.Dir(), defaultRocksDBDir()) || rb.Incremental() {
		t.Errorf("backend in %s (incremental %v), want a full-snapshot backend under %s", rb.Dir(), rb.Incremental(), defaultRocksDBDir())
	}
}

func TestClusterKeys(t *testing.T) {
	clearSluiceEnv(t)
	p := writeConfig(t, "cluster.role: worker\ntaskmanager.numberOfTaskSlots: 2\njobmanager.rpc.address: coord:7000\n")
	c, err := LoadConfiguration(p)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's own variables rank over the file ...
	t.Setenv("SLUICE_SLOTS", "3")
	t.Setenv("SLUICE_WORKER_ID", "w-7")
	e := NewEnvironment(WithConfiguration(c))
	if cc := e.cluster; cc == nil || cc.Role != RoleWorker || cc.Slots != 3 || cc.WorkerID != "w-7" || cc.Coordinator != "coord:7000" {
		t.Fatalf("cluster %+v", e.cluster)
	}
	// ... and under the environment's keys and -D.
	if _, err := c.ParseDynamicProperties([]string{"-Dtaskmanager.numberOfTaskSlots=5", "-Dheartbeat.timeout=1 min"}); err != nil {
		t.Fatal(err)
	}
	e = NewEnvironment(WithConfiguration(c))
	if cc := e.cluster; cc.Slots != 5 || cc.HeartbeatTimeout != time.Minute {
		t.Errorf("cluster after -D: %+v", cc)
	}
	// Over an earlier WithCluster: the file fills what it leaves unset,
	// -D overrides it.
	e = NewEnvironment(WithCluster(ClusterConfig{Role: RoleCoordinator, Listen: ":9999", Slots: 1}), WithConfiguration(c))
	if cc := e.cluster; cc.Role != RoleCoordinator || cc.Listen != ":9999" || cc.Coordinator != "coord:7000" || cc.Slots != 5 || cc.WorkerID != "" {
		t.Errorf("cluster over WithCluster: %+v", cc)
	}
	// high-availability.type.
	c = NewConfiguration()
	if err := c.Set("high-availability.type", "etcd"); err != nil {
		t.Fatal(err)
	}
	e = NewEnvironment(WithConfiguration(c))
	if err := errors.Join(e.errs...); err == nil || !strings.Contains(err.Error(), "high-availability.etcd.endpoints") {
		t.Errorf("etcd without endpoints: %v", err)
	}
	if err := c.Set("high-availability.type", "zookeeper"); err == nil {
		t.Error("zookeeper accepted")
	}
	// No cluster key: the environment's role as before.
	if e := NewEnvironment(WithConfiguration(NewConfiguration())); e.cluster != nil {
		t.Errorf("an empty configuration set the cluster: %+v", e.cluster)
	}
}

func TestConfigFlags(t *testing.T) {
	clearSluiceEnv(t)
	file := writeConfig(t, "parallelism.default: 2\ntaskmanager.numberOfTaskSlots: 2\n")
	t.Setenv("SLUICE_CONFIG_FILE", writeConfig(t, "parallelism.default: 8\npipeline.name: env-file\n"))
	t.Setenv("SLUICE_CONF_PIPELINE_MAX_PARALLELISM", "64")

	fs := flag.NewFlagSet("job", flag.ContinueOnError)
	cc := ClusterFlags(fs) // registers -D first
	c := ConfigFlags(fs)
	if err := fs.Parse([]string{"-config", file, "-D", "taskmanager.numberOfTaskSlots=6", "-D", "pipeline.name=flagged", "-role", "worker", "-coordinator", "c:1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get("parallelism.default"); v != "2" {
		t.Errorf("parallelism %q: -config replaces $SLUICE_CONFIG_FILE", v)
	}
	if _, ok := c.Get("pipeline.max-parallelism"); !ok {
		t.Error("the environment was not read")
	}
	// The cluster key reached ClusterFlags' configuration too.
	if cc.Slots != 6 || cc.Role != RoleWorker {
		t.Errorf("ClusterFlags' config %+v, want 6 slots from -D", cc)
	}
	e := NewEnvironment(WithCluster(*cc), WithConfiguration(c))
	if e.cfg.Parallelism != 2 || e.cfg.JobName != "flagged" || e.cfg.MaxParallelism != 64 || e.cluster.Slots != 6 || e.cluster.Coordinator != "c:1" {
		t.Errorf("environment: parallelism %d, name %q, max %d, cluster %+v", e.cfg.Parallelism, e.cfg.JobName, e.cfg.MaxParallelism, e.cluster)
	}
	// A bad -D fails the parse.
	fs = flag.NewFlagSet("job", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	ConfigFlags(fs)
	if err := fs.Parse([]string{"-D", "parallelism.default=none"}); err == nil || !strings.Contains(err.Error(), "parallelism.default") {
		t.Errorf("bad -D: %v", err)
	}
	// A bad environment is reported by WithConfiguration.
	t.Setenv("SLUICE_CONF_PARALLELISM_DEFAULT", "x")
	c = ConfigFlags(flag.NewFlagSet("job", flag.ContinueOnError))
	if err := errors.Join(NewEnvironment(WithConfiguration(c)).errs...); err == nil || !strings.Contains(err.Error(), "$SLUICE_CONF_PARALLELISM_DEFAULT") {
		t.Errorf("bad variable: %v", err)
	}
}

func TestYAMLKeyLines(t *testing.T) {
	got := yamlKeyLines([]byte("# comment\na:\n  b: 1\n  'c.d': |\n    e: not a key\n    f: nor this\n  g: 2\n\"h\": [1, 2]\ni.j: {k: 3}\n- item\nl:\n  - m: 4\n"))
	want := map[string][]int{"a": {2}, "a.b": {3}, "a.c.d": {4}, "a.g": {7}, "h": {8}, "i.j": {9}, "l": {11}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("yamlKeyLines = %v, want %v", got, want)
	}
}

// A job runs with the options a configuration gives it.
func TestJobFromConfiguration(t *testing.T) {
	clearSluiceEnv(t)
	dir := t.TempDir()
	c, err := LoadConfiguration(writeConfig(t, "pipeline.name: configured\nparallelism.default: 2\nexecution.checkpointing:\n  interval: 50 ms\n  dir: "+dir+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := NewEnvironment(WithConfiguration(c))
	out := sink.NewCollect[int]()
	in := make([]int, 100)
	for i := range in {
		in[i] = i
	}
	doubled := Map(FromSource(env, source.FromSlice(in), NoWatermarks[int](), "numbers"), func(v int) (int, error) { return 2 * v, nil }, Name("double"))
	SinkTo(doubled, out, Name("out"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j, err := env.ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := j.Config(); got.JobName != "configured" || got.Parallelism != 2 || got.Checkpoint.Interval != 50*time.Millisecond {
		t.Errorf("job config: name %q, parallelism %d, interval %v", got.JobName, got.Parallelism, got.Checkpoint.Interval)
	}
	if len(out.Values()) != 100 {
		t.Errorf("%d records out, want 100", len(out.Values()))
	}
	if _, err := os.Stat(filepath.Join(dir, "configured")); err != nil {
		t.Errorf("the job's checkpoint directory: %v", err)
	}
}

func TestDefaultCodecKey(t *testing.T) {
	for v, want := range map[string]codec.Format{"json": codec.FormatJSON, "BINARY": codec.FormatBinary} {
		c := NewConfiguration()
		if err := c.Set("pipeline.default-codec", v); err != nil {
			t.Fatal(err)
		}
		e := NewEnvironment(WithDefaultCodec(codec.FormatJSON - want)) // the other one first
		applyConfiguration(e, c)
		if len(e.errs) > 0 || e.codecFormat != want {
			t.Errorf("%s: format %v (errors %v), want %v", v, e.codecFormat, e.errs, want)
		}
	}
	c := NewConfiguration()
	err := c.Set("pipeline.default-codec", "avro")
	if err == nil {
		e := NewEnvironment()
		applyConfiguration(e, c)
		err = errors.Join(e.errs...)
	}
	if !errors.Is(err, codec.ErrUnknownFormatName) || !strings.Contains(err.Error(), "pipeline.default-codec") {
		t.Errorf("avro: %v, want an error naming the key", err)
	}
	if e := NewEnvironment(WithDefaultCodec(codec.Format(9))); !errors.Is(errors.Join(e.errs...), ErrInvalidOption) {
		t.Errorf("format 9: %v", e.errs)
	}
}

// The processes' authentication, etcd's credentials and the data plane's
// bounds are cluster keys a file takes (they were unknown keys); the
// secret and the password are masked where the configuration is shown.
// Over an earlier WithCluster the file fills the security settings it
// leaves unset, field by field.
func TestClusterSecurityKeys(t *testing.T) {
	clearSluiceEnv(t)
	p := writeConfig(t, `security.ssl.internal.enabled: true
security.ssl.internal.cert: /etc/sluice/tls/tls.crt
security.ssl.internal.key: /etc/sluice/tls/tls.key
security.ssl.internal.truststore: /etc/sluice/tls/ca.crt
security.ssl.internal.handshake-timeout: 5 s
security.internal.secret: a-secret-of-the-deployment
high-availability.etcd.username: sluice
high-availability.etcd.password: etcd-password
high-availability.etcd.tls.ca: /etc/etcd/ca.crt
taskmanager.network.max-pending-requests-per-connection: 16
taskmanager.network.connection.idle-timeout: 30 s
`)
	c, err := LoadConfiguration(p)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEnvironment(WithConfiguration(c))
	if err := errors.Join(e.errs...); err != nil {
		t.Fatal(err)
	}
	cc := e.cluster
	if cc == nil || !cc.Security.TLS || cc.Security.CertFile != "/etc/sluice/tls/tls.crt" || cc.Security.KeyFile != "/etc/sluice/tls/tls.key" ||
		cc.Security.TrustFile != "/etc/sluice/tls/ca.crt" || cc.Security.HandshakeTimeout != 5*time.Second ||
		string(cc.Security.Secret) != "a-secret-of-the-deployment" || cc.EtcdUsername != "sluice" || cc.EtcdPassword != "etcd-password" ||
		cc.EtcdTLSCA != "/etc/etcd/ca.crt" || cc.DataLimits.MaxPendingRequests != 16 || cc.DataLimits.IdleTimeout != 30*time.Second {
		t.Fatalf("cluster %+v", cc)
	}
	if shown := c.String(); strings.Contains(shown, "a-secret-of-the-deployment") || strings.Contains(shown, "etcd-password") {
		t.Errorf("the configuration shows a secret:\n%s", shown)
	}
	e = NewEnvironment(WithCluster(ClusterConfig{Role: RoleCoordinator, Security: peerauth.Config{CertFile: "/mine.crt"}}), WithConfiguration(c))
	if cc := e.cluster; cc.Security.CertFile != "/mine.crt" || cc.Security.KeyFile != "/etc/sluice/tls/tls.key" || !cc.Security.TLS {
		t.Errorf("security over WithCluster: %+v", cc.Security)
	}
}
