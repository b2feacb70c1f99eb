package sluice_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage/s3"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/internal/testcerts"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// caFile writes a CA certificate in PEM and returns its path.
func caFile(t *testing.T) string {
	t.Helper()
	return testcerts.NewTestCA(t, "kafka-ca").File(t)
}

// The example file sets an option of every kind, nested and flat; each
// lands where the environment's typed options put it.
func TestFlinkStyleFile(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	c, err := sluice.LoadConfiguration("testdata/config/flink-style.yaml")
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
	e := sluice.NewEnvironment(sluice.WithConfiguration(c))
	if err := e.Err(); err != nil {
		t.Fatalf("WithConfiguration: %v", err)
	}
	cfg := e.Config()

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

	// RocksDB, as the backend reads its keys.
	wantRocks := rocksdb.Options{Dir: localdir, BlockCacheSize: 128 << 20, WriteBufferSize: 32 << 20, WriteBufferCount: 3,
		Compression:     []rocksdb.Compression{rocksdb.NoCompression, rocksdb.SnappyCompression, rocksdb.ZSTDCompression},
		CompactionStyle: rocksdb.LevelCompaction, Threads: 4, LocalRecovery: true}
	var rocks rocksdb.Options
	if err := rocks.Configure(c); err != nil {
		t.Fatal(err)
	}
	if got := rocks; !reflect.DeepEqual(got, wantRocks) {
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

	// S3, as the backend reads its keys.
	pathStyle := true
	wantS3 := s3.Config{Endpoint: "http://minio:9000", PathStyle: &pathStyle, PartSize: 16 << 20, RequestTimeout: time.Minute}
	if got, set, err := s3.ConfigFrom(c); err != nil || !set || !reflect.DeepEqual(got, wantS3) || cfg.CheckpointSchemes["s3"] == nil {
		t.Errorf("s3 %+v (set %v, %v; schemes %v), want %+v", got, set, err, cfg.CheckpointSchemes, wantS3)
	}

	// The cluster, as package cluster reads its keys.
	cc, err := cluster.ConfigOf(e)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Slots != 4 || cc.Coordinator != "coordinator.sluice.svc:6123" || cc.HeartbeatInterval != 5*time.Second ||
		cc.HeartbeatTimeout != 30*time.Second || !reflect.DeepEqual(cc.EtcdEndpoints, []string{"http://etcd-0:2379", "http://etcd-1:2379"}) ||
		cc.EtcdPrefix != "/sluice/orders" || cc.LeaseDuration != 15*time.Second {
		t.Errorf("cluster %+v", cc)
	}

	// Kafka.
	opts, err := kafkasource.ClientOptionsFrom(c)
	if err != nil {
		t.Fatalf("ClientOptionsFrom: %v", err)
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
	testutil.ClearSluiceEnv(t)
	nested, err := sluice.LoadConfiguration(testutil.WriteConfig(t, "execution:\n  checkpointing:\n    interval: 10 s\n    dir: /tmp/ck\nrestart-strategy:\n  type: none\nhigh-availability.etcd:\n  endpoints: [a:1, b:2]\n"))
	if err != nil {
		t.Fatal(err)
	}
	flat, err := sluice.LoadConfiguration(testutil.WriteConfig(t, "execution.checkpointing.interval: 10 s\nexecution.checkpointing.dir: /tmp/ck\nrestart-strategy.type: none\nhigh-availability.etcd.endpoints: \"[a:1, b:2]\"\n"))
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
	testutil.ClearSluiceEnv(t)
	path := testutil.WriteConfig(t, "parallelism.default: 2\npipeline:\n  name: from-file\n  max-parallelism: 64\nexecution.checkpointing.timeout: 1 min\n")
	load := func(env map[string]string, args ...string) *sluice.Configuration {
		t.Helper()
		testutil.ClearSluiceEnv(t)
		for k, v := range env {
			t.Setenv(k, v)
		}
		c, err := sluice.LoadConfiguration(path)
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
	check := func(c *sluice.Configuration, key, value, source string) {
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
	c = sluice.NewConfiguration()
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
	e := sluice.NewEnvironment(sluice.WithConfiguration(c))
	if e.Config().Parallelism != 7 || e.Config().JobName != "from-env" || e.Config().MaxParallelism != 32 || e.Config().Checkpoint.Timeout != time.Minute {
		t.Errorf("environment: parallelism %d, name %q, max %d, timeout %v", e.Config().Parallelism, e.Config().JobName, e.Config().MaxParallelism, e.Config().Checkpoint.Timeout)
	}
	// Options after WithConfiguration override it, as any later option.
	e = sluice.NewEnvironment(sluice.WithConfiguration(c), sluice.WithParallelism(9))
	if e.Config().Parallelism != 9 {
		t.Errorf("parallelism %d after sluice.WithParallelism(9)", e.Config().Parallelism)
	}
}

func TestParseDynamicPropertiesRest(t *testing.T) {
	c := sluice.NewConfiguration()
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
		if _, err := sluice.NewConfiguration().ParseDynamicProperties(args); err == nil || !errors.Is(err, sluice.ErrInvalidOption) {
			t.Errorf("ParseDynamicProperties(%q): %v, want an invalid option", args, err)
		}
	}
}

func TestConfigurationErrors(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	configErr := func(t *testing.T, err error, key, value, source string, is error, text string) {
		t.Helper()
		var ce *sluice.ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("error %v (%T), want a *ConfigError", err, err)
		}
		if ce.Key != key || ce.Value != value || ce.Source != source || !errors.Is(err, sluice.ErrInvalidOption) || (is != nil && !errors.Is(err, is)) ||
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
		p := testutil.WriteConfig(t, "parallelism.default: 2\nexecution:\n  checkpointing:\n    intervall: 10 s\n")
		_, err := sluice.LoadConfiguration(p)
		configErr(t, err, "execution.checkpointing.intervall", "10 s", p+":4", sluice.ErrUnknownConfigKey, "did you mean execution.checkpointing.interval?")
	})
	t.Run("bad value in a file", func(t *testing.T) {
		p := testutil.WriteConfig(t, "pipeline.name: x\nexecution.checkpointing.timeout: ten minutes\n")
		_, err := sluice.LoadConfiguration(p)
		configErr(t, err, "execution.checkpointing.timeout", "ten minutes", p+":2", nil, "want a duration")
	})
	t.Run("every error at once", func(t *testing.T) {
		p := testutil.WriteConfig(t, "parallelism.default: 0\nrestart-strategy.type: failure-rate\nnope: 1\n")
		_, err := sluice.LoadConfiguration(p)
		for _, part := range []string{p + ":1: parallelism.default = \"0\"", "must be at least 1", p + ":2: restart-strategy.type", "failure-rate is not supported", p + ":3: nope"} {
			if err == nil || !strings.Contains(err.Error(), part) {
				t.Errorf("error %v does not say %q", err, part)
			}
		}
	})
	t.Run("a value an option refuses", func(t *testing.T) {
		p := testutil.WriteConfig(t, "pipeline.max-parallelism: 40000\n")
		_, err := sluice.LoadConfiguration(p)
		configErr(t, err, "pipeline.max-parallelism", "40000", p+":1", nil, "exceeds 32768")
	})
	t.Run("duplicate keys", func(t *testing.T) {
		p := testutil.WriteConfig(t, "execution:\n  checkpointing:\n    dir: /a\nexecution.checkpointing.dir: /b\n")
		_, err := sluice.LoadConfiguration(p)
		if err == nil || !strings.Contains(err.Error(), "set twice") || !strings.Contains(err.Error(), p+":3") || !strings.Contains(err.Error(), p+":4") {
			t.Errorf("error %v, want one naming both lines", err)
		}
		p = testutil.WriteConfig(t, "state.checkpoints.dir: /a\nexecution.checkpointing.dir: /b\n")
		if _, err := sluice.LoadConfiguration(p); err == nil || !strings.Contains(err.Error(), "two names") {
			t.Errorf("a key and its deprecated name: %v", err)
		}
		p = testutil.WriteConfig(t, "a: 1\na: 2\n")
		if _, err := sluice.LoadConfiguration(p); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("a YAML duplicate: %v", err)
		}
	})
	t.Run("a size too large for its option", func(t *testing.T) {
		err := sluice.NewConfiguration().Set("taskmanager.memory.segment-size", "8gb")
		configErr(t, err, "taskmanager.memory.segment-size", "8gb", "Set", nil, "too large")
	})
	t.Run("a list for one value", func(t *testing.T) {
		p := testutil.WriteConfig(t, "pipeline.name: [a, b]\n")
		_, err := sluice.LoadConfiguration(p)
		configErr(t, err, "pipeline.name", "[a, b]", p+":1", nil, "not a list")
	})
	t.Run("yaml syntax", func(t *testing.T) {
		p := testutil.WriteConfig(t, "pipeline:\n  name: [x\n")
		if _, err := sluice.LoadConfiguration(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "line") {
			t.Errorf("error %v, want one naming the file and line", err)
		}
		p = testutil.WriteConfig(t, "- a\n- b\n")
		if _, err := sluice.LoadConfiguration(p); err == nil || !strings.Contains(err.Error(), "mapping") {
			t.Errorf("a list file: %v", err)
		}
	})
	t.Run("unknown key with a null value", func(t *testing.T) {
		p := testutil.WriteConfig(t, "pipeline.nmae:\npipeline.name: ~\n")
		_, err := sluice.LoadConfiguration(p)
		configErr(t, err, "pipeline.nmae", "", p+":1", sluice.ErrUnknownConfigKey, "did you mean pipeline.name?")
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("SLUICE_CONF_EXECUTION_CHECKPOINTING_MODE", "twice")
		err := sluice.NewConfiguration().FromEnv()
		configErr(t, err, "execution.checkpointing.mode", "twice", "$SLUICE_CONF_EXECUTION_CHECKPOINTING_MODE", nil, "EXACTLY_ONCE or AT_LEAST_ONCE")
		testutil.ClearSluiceEnv(t)
		t.Setenv("SLUICE_CONF_EXECUTION_CHECKPOINTING_INTERVALL", "1")
		err = sluice.NewConfiguration().FromEnv()
		if !errors.Is(err, sluice.ErrUnknownConfigKey) || !strings.Contains(err.Error(), "$SLUICE_CONF_EXECUTION_CHECKPOINTING_INTERVALL") ||
			!strings.Contains(err.Error(), "did you mean SLUICE_CONF_EXECUTION_CHECKPOINTING_INTERVAL?") {
			t.Errorf("unknown variable: %v", err)
		}
		testutil.ClearSluiceEnv(t)
		t.Setenv("SLUICE_PROPERTIES", "pipeline.name: x\nheartbeat.interval: soon\n")
		err = sluice.NewConfiguration().FromEnv()
		configErr(t, err, "heartbeat.interval", "soon", "$SLUICE_PROPERTIES line 2", nil, "want a duration")
	})
	t.Run("-D", func(t *testing.T) {
		_, err := sluice.NewConfiguration().ParseDynamicProperties([]string{"-Dtaskmanager.numberOfTaskSlots=many"})
		configErr(t, err, "taskmanager.numberOfTaskSlots", "many", "-D", nil, "taskmanager.numberOfTaskSlots")
		_, err = sluice.NewConfiguration().ParseDynamicProperties([]string{"-D", "taskmanager.numberOfTaskSlots=0"})
		configErr(t, err, "taskmanager.numberOfTaskSlots", "0", "-D", nil, "must be at least 1")
		_, err = sluice.NewConfiguration().ParseDynamicProperties([]string{"-D", "jobmanager.rpc.port=70000"})
		configErr(t, err, "jobmanager.rpc.port", "70000", "-D", nil, "at most 65535")
	})
	t.Run("secrets are masked", func(t *testing.T) {
		p := testutil.WriteConfig(t, "kafka.properties.sasl.jaas.config: 'PlainLoginModule required password=\"hunter2\"'\ns3.secret-key: [hunter2]\n")
		_, err := sluice.LoadConfiguration(p)
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "******") {
			t.Errorf("error %v shows a secret or hides nothing", err)
		}
		c := sluice.NewConfiguration()
		if err := c.Set("s3.secret-key", "hunter2"); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(c.String(), "hunter2") || !strings.Contains(c.String(), "s3.secret-key: ******") {
			t.Errorf("String() = %q", c.String())
		}
	})
	t.Run("kafka", func(t *testing.T) {
		p := testutil.WriteConfig(t, "kafka.properties:\n  security.protocol: SASL_SSL\n  sasl.mechanism: PLAIN\n  ssl.truststore.location: /nowhere/ca.pem\n"+
			"  sasl.jaas.config: org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";\n")
		c, err := sluice.LoadConfiguration(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = kafkasource.ClientOptionsFrom(c)
		configErr(t, err, "kafka.properties.ssl.truststore.location", "/nowhere/ca.pem", p+":4", nil, "no such file")
		// WithConfiguration checks them too.
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "kafka.properties.ssl.truststore.location") {
			t.Errorf("Validate: %v", err)
		}
		p = testutil.WriteConfig(t, "kafka.properties.ssl.truststore.type: JKS\n")
		_, err = sluice.LoadConfiguration(p)
		configErr(t, err, "kafka.properties.ssl.truststore.type", "JKS", p+":1", nil, "only PEM")
		p = testutil.WriteConfig(t, "kafka.properties.security.protocol: SASL_PLAINTEXT\n")
		c, _ = sluice.LoadConfiguration(p)
		_, err = kafkasource.ClientOptionsFrom(c)
		if err == nil || !strings.Contains(err.Error(), "kafka.properties.sasl.mechanism") || !strings.Contains(err.Error(), "GSSAPI") {
			t.Errorf("a missing mechanism: %v", err)
		}
		p = testutil.WriteConfig(t, "kafka.properties.sasl.kerberos.service.name: kafka\n")
		_, err = sluice.LoadConfiguration(p)
		configErr(t, err, "kafka.properties.sasl.kerberos.service.name", "kafka", p+":1", sluice.ErrUnknownConfigKey, "")
	})
	t.Run("Execute", func(t *testing.T) {
		c := sluice.NewConfiguration()
		c.SetUnchecked("parallelism.default", "-3", "x.yaml:7") // as if read before a check
		env := sluice.NewEnvironment(sluice.WithConfiguration(c))
		err := env.Execute(context.Background())
		configErr(t, err, "parallelism.default", "-3", "x.yaml:7", nil, "parallelism must be at least 1")
	})
}

// A key the RocksDB or S3 options learn later is taken without a change
// here, and an unknown one under their prefixes is refused.
func TestDelegatedPrefixes(t *testing.T) {
	c := sluice.NewConfiguration()
	for k, v := range map[string]string{"state.backend.rocksdb.thread.num": "3", "s3.access.key": "AK"} {
		if err := c.Set(k, v); err != nil {
			t.Errorf("Set(%s): %v", k, err)
		}
	}
	for _, k := range []string{"state.backend.rocksdb.nope", "s3.nope"} {
		if err := c.Set(k, "1"); !errors.Is(err, sluice.ErrUnknownConfigKey) {
			t.Errorf("Set(%s): %v, want an unknown key", k, err)
		}
	}
	var rocks rocksdb.Options
	if err := rocks.Configure(c); err != nil {
		t.Fatal(err)
	}
	s3c, _, err := s3.ConfigFrom(c)
	if err != nil {
		t.Fatal(err)
	}
	if s3c.AccessKeyID != "AK" || rocks.Threads != 3 {
		t.Errorf("s3 %+v, rocks threads %d", s3c, rocks.Threads)
	}
}

func TestRestartStrategyKeys(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	env := func(t *testing.T, yaml string, opts ...sluice.Option) *sluice.Environment {
		t.Helper()
		c, err := sluice.LoadConfiguration(testutil.WriteConfig(t, yaml))
		if err != nil {
			t.Fatal(err)
		}
		return sluice.NewEnvironment(append(opts, sluice.WithConfiguration(c))...)
	}
	e := env(t, "restart-strategy:\n  type: exponential-delay\n  exponential-delay:\n    initial-backoff: 2 s\n    max-backoff: 1 min\n    backoff-multiplier: 2\n    jitter-factor: 0.2\n    reset-backoff-threshold: 10 min\n    attempts-before-reset-backoff: 7\n")
	want := sluice.RestartConfig{Kind: checkpoint.ExponentialDelay, InitialBackoff: 2 * time.Second, MaxBackoff: time.Minute, BackoffMultiplier: 2,
		JitterFactor: 0.2, ResetBackoffThreshold: 10 * time.Minute, AttemptsBeforeResetBackoff: 7}
	if e.Err() != nil || !e.Config().RestartSet || e.Config().Restart != want {
		t.Errorf("exponential-delay: %+v (%v), want %+v", e.Config().Restart, e.Err(), want)
	}
	// Without a type, with checkpointing: Flink's default strategy
	// (exponential-delay) takes its options.
	e = env(t, "execution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: /tmp/x\nrestart-strategy.exponential-delay.max-backoff: 5 s\n")
	if !e.Config().RestartSet || e.Config().Restart.Kind != checkpoint.ExponentialDelay || e.Config().Restart.MaxBackoff != 5*time.Second {
		t.Errorf("default strategy with its option: %+v (set %v)", e.Config().Restart, e.Config().RestartSet)
	}
	// ... and without checkpointing, none: the options are ignored.
	e = env(t, "restart-strategy.exponential-delay.max-backoff: 5 s\nrestart-strategy.fixed-delay.attempts: 3\n")
	if e.Config().RestartSet || e.Err() != nil {
		t.Errorf("options of a strategy not chosen: %+v (set %v, %v)", e.Config().Restart, e.Config().RestartSet, e.Err())
	}
	// Options of the strategy an earlier WithRestartStrategy chose.
	e = env(t, "restart-strategy.fixed-delay.attempts: 3\n", sluice.WithRestartStrategy(sluice.FixedDelayRestart(1, time.Second)))
	if e.Config().Restart != sluice.FixedDelayRestart(3, time.Second) {
		t.Errorf("onto WithRestartStrategy: %+v", e.Config().Restart)
	}
	// Validation across keys, blamed on the key it names.
	e = env(t, "restart-strategy.type: exponential-delay\nrestart-strategy.exponential-delay.initial-backoff: 1 min\nrestart-strategy.exponential-delay.max-backoff: 1 s\n")
	var ce *sluice.ConfigError
	if err := e.Err(); !errors.As(err, &ce) || ce.Key != "restart-strategy.exponential-delay.max-backoff" || !strings.HasSuffix(ce.Source, ":3") {
		t.Errorf("max below initial: %v", err)
	}
	e = env(t, "restart-strategy.type: none\n")
	if e.Config().Restart.Kind != checkpoint.NoRestart || !e.Config().RestartSet {
		t.Errorf("none: %+v", e.Config().Restart)
	}
}

// defaultRocksDBDir is state.backend.rocksdb.localdir's default.
var defaultRocksDBDir = filepath.Join(os.TempDir(), "sluice-rocksdb")

func TestStateBackendKeys(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	c := sluice.NewConfiguration()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Set("state.backend.type", "hashmap"))
	must(c.Set("state.backend.rocksdb.thread.num", "2")) // checked, no effect
	e := sluice.NewEnvironment(sluice.WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{})), sluice.WithConfiguration(c))
	kb, err := e.Config().StateBackend(state.BackendOptions{Job: "j", OperatorUID: "o", MaxParallelism: 8, KeyGroups: state.KeyGroupRange{Start: 0, End: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if _, isRocks := kb.(*rocksdb.Backend); isRocks {
		t.Error("state.backend.type hashmap left RocksDB")
	}
	kb.Close()
	// Unset, the environment's backend stays.
	c = sluice.NewConfiguration()
	must(c.Set("state.backend.rocksdb.thread.num", "2"))
	if e := sluice.NewEnvironment(sluice.WithConfiguration(c)); e.Config().StateBackend != nil {
		t.Error("RocksDB options without state.backend.type chose a backend")
	}
	// Flink 1's key, and the default working directory.
	c = sluice.NewConfiguration()
	must(c.Set("state.backend", "ROCKSDB"))
	must(c.Set("execution.checkpointing.incremental", "false"))
	e = sluice.NewEnvironment(sluice.WithConfiguration(c))
	kb, err = e.Config().StateBackend(state.BackendOptions{Job: "config-test-" + t.Name(), OperatorUID: "o", MaxParallelism: 8, KeyGroups: state.KeyGroupRange{Start: 0, End: 7}})
	if err != nil {
		t.Fatal(err)
	}
	rb := kb.(*rocksdb.Backend)
	defer os.RemoveAll(filepath.Join(defaultRocksDBDir, "config-test-"+t.Name()))
	defer rb.Close()
	if !strings.HasPrefix(rb.Dir(), defaultRocksDBDir) || rb.Incremental() {
		t.Errorf("backend in %s (incremental %v), want a full-snapshot backend under %s", rb.Dir(), rb.Incremental(), defaultRocksDBDir)
	}
}

// A job runs with the options a configuration gives it.
func TestJobFromConfiguration(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	dir := t.TempDir()
	c, err := sluice.LoadConfiguration(testutil.WriteConfig(t, "pipeline.name: configured\nparallelism.default: 2\nexecution.checkpointing:\n  interval: 50 ms\n  dir: "+dir+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := sluice.NewEnvironment(sluice.WithConfiguration(c))
	out := sink.NewCollect[int]()
	in := make([]int, 100)
	for i := range in {
		in[i] = i
	}
	doubled := sluice.Map(sluice.FromSource(env, source.FromSlice(in), sluice.NoWatermarks[int](), "numbers"), func(v int) (int, error) { return 2 * v, nil }, sluice.Name("double"))
	sluice.SinkTo(doubled, out, sluice.Name("out"))
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
