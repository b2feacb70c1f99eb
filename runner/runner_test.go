package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sink"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	"github.com/sluicehq/sluice/source"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// started runs Run in the background and returns where its API is and
// its result.
func start(t *testing.T, ctx context.Context, env *sluice.Environment, opts ...Option) (Started, <-chan error) {
	t.Helper()
	ch := make(chan Started, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, env, append([]Option{WithLogger(quiet()), WithRESTAddress("127.0.0.1:0"), WithSignals(),
			OnStarted(func(s Started) { ch <- s })}, opts...)...)
	}()
	select {
	case s := <-ch:
		return s, done
	case err := <-done:
		t.Fatalf("Run ended before it started: %v", err)
	case <-ctx.Done():
		t.Fatal("Run did not start")
	}
	return Started{}, nil
}

// A Kafka-to-Kafka job on an embedded broker: franz-go's metrics of its
// clients (the source's consumer, the sink's transactional producers)
// are on the job's /metrics with no client named by the program;
// /healthz and /readyz answer; cancelling ctx suspends the job.
func TestKafkaClientMetricsOnMetrics(t *testing.T) {
	ctx := testutil.Context(t, testutil.SafetyNet)
	seeds := testutil.KafkaCluster(t, 2, "in", "out")
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 50 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte{byte('a' + i%26)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	env, src, snk := kafkaJob(t, seeds, map[string]string{"pipeline.name": "kafka-metrics", "execution.checkpointing.interval": "100 ms",
		"execution.checkpointing.dir": t.TempDir(), "parallelism.default": "2"},
		kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix("runner-test"))
	sluice.SinkTo(sluice.FromSource(env, src, sluice.NoWatermarks[string](), "in", sluice.UID("in")), snk, sluice.Name("out"), sluice.UID("out"))

	jobCtx, suspend := context.WithCancel(ctx)
	defer suspend()
	st, done := start(t, jobCtx, env)
	if code, body := get(t, st.APIURL+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	testutil.Await(t, "/readyz to answer 200 (the job runs)", func() bool {
		code, _ := get(t, st.APIURL+"/readyz")
		return code == http.StatusOK
	})
	c := api.NewClient(st.APIURL, "")
	testutil.Await(t, "a completed checkpoint", func() bool {
		cs, err := c.Checkpoints(ctx, "kafka-metrics")
		return err == nil && cs.Counts.Completed > 0
	})
	var body string
	testutil.Await(t, "the Kafka clients' metrics on /metrics", func() bool {
		_, body = get(t, st.APIURL+"/metrics")
		return strings.Contains(body, `sluice_kafka_client_fetch_bytes_total{client="source-consumer-`) &&
			strings.Contains(body, `client="sink-transactional-producer-`) &&
			strings.Contains(body, "sluice_kafka_client_produce_bytes_total")
	})
	for _, want := range []string{`topic="in"`, `topic="out"`, "sluice_task_numRecordsIn", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	suspend()
	if err := <-done; !errors.Is(err, sluice.ErrJobSuspended) {
		t.Fatalf("Run after ctx was cancelled: %v, want ErrJobSuspended", err)
	}
}

// kafkaJob returns an environment of the keys given, a Kafka source of
// the strings of topic "in" and a Kafka sink of them to topic "out", on
// the cluster at seeds.
func kafkaJob(t *testing.T, seeds []string, keys map[string]string, sinkOpts ...kafkasink.Option) (*sluice.Environment, *kafkasource.Source[string], *kafkasink.Sink[string]) {
	t.Helper()
	conf := sluice.NewConfiguration()
	for k, v := range keys {
		if err := conf.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics("in"), func(r *kgo.Record) (string, error) { return string(r.Value), nil })
	if err != nil {
		t.Fatal(err)
	}
	snk, err := kafkasink.NewSink(seeds, func(s string) (*kgo.Record, error) { return &kgo.Record{Topic: "out", Value: []byte(s)}, nil }, sinkOpts...)
	if err != nil {
		t.Fatal(err)
	}
	return sluice.NewEnvironment(sluice.WithConfiguration(conf)), src, snk
}

func datagenJob(t *testing.T, conf *sluice.Configuration) *sluice.Environment {
	t.Helper()
	env := sluice.NewEnvironment(sluice.WithConfiguration(conf))
	gen := source.NewDatagen(source.RandomRecords(1, 16, 100), source.DatagenRate(2000))
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "gen",
		sluice.WithCodec[source.Record](source.RecordCodec{}), sluice.UID("gen"))
	sluice.SinkTo(recs, sink.NewDiscard[source.Record](), sluice.Name("discard"), sluice.UID("discard"))
	return env
}

// With execution.signal.action STOP_WITH_SAVEPOINT a signal stops the
// job with a savepoint in the savepoint directory and Run returns nil;
// with SUSPEND (the default) it suspends the job: nothing recorded, Run
// returns nil too.
func TestSignalActions(t *testing.T) {
	for _, action := range []string{"STOP_WITH_SAVEPOINT", "SUSPEND"} {
		t.Run(action, func(t *testing.T) {
			ctx := testutil.Context(t, testutil.SafetyNet)
			dir := t.TempDir()
			conf := sluice.NewConfiguration()
			for k, v := range map[string]string{"pipeline.name": "signals", "execution.checkpointing.interval": "50 ms",
				"execution.checkpointing.dir": filepath.Join(dir, "chk"), "execution.checkpointing.savepoint-dir": filepath.Join(dir, "sp"),
				KeySignalAction: action, KeyRestGrace: "0 s"} {
				if err := conf.Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
			st, done := start(t, ctx, datagenJob(t, conf), WithSignals(syscall.SIGUSR1))
			testutil.Await(t, "a completed checkpoint", func() bool {
				cs, ok := st.Job.CheckpointStats()
				return ok && cs.Completed > 0
			})
			if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("Run after the signal: %v", err)
			}
			res, recorded := st.Job.Result()
			savepoints, _ := filepath.Glob(filepath.Join(dir, "sp", "savepoint-*", "_metadata"))
			switch action {
			case "STOP_WITH_SAVEPOINT":
				if !recorded || len(savepoints) != 1 {
					t.Fatalf("result %+v (recorded %t), savepoints %v: want the job finished with one savepoint", res, recorded, savepoints)
				}
			case "SUSPEND":
				if recorded || len(savepoints) != 0 || st.Job.Status().String() != "SUSPENDED" {
					t.Fatalf("result %+v (recorded %t), status %v, savepoints %v: want the job suspended, nothing recorded", res, recorded, st.Job.Status(), savepoints)
				}
			}
		})
	}
}

// The runner's keys are a Configuration's once the runner is linked:
// a typo gets the nearest key, a bad value is refused naming the key.
func TestKeys(t *testing.T) {
	c := sluice.NewConfiguration()
	if err := c.Set("rest.prot", "8081"); !errors.Is(err, sluice.ErrUnknownConfigKey) || !strings.Contains(err.Error(), "rest.port") {
		t.Errorf("rest.prot: %v, want unknown with rest.port suggested", err)
	}
	for key, bad := range map[string]string{KeyRestPort: "80801", KeyLogLevel: "loud", KeySignalAction: "explode",
		KeyPromNaming: "graphite", KeyRestBindPort: "9-1", KeyOtelProtocol: "udp"} {
		err := c.Set(key, bad)
		var ce *sluice.ConfigError
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s = %s: %v, want a ConfigError naming the key", key, bad, err)
		}
	}
	t.Setenv("SLUICE_CONF_REST_PORT", "0")
	t.Setenv("SLUICE_CONF_METRICS_REPORTER_PROM_NAMING", "flink")
	t.Setenv("SLUICE_CONF_LOG_LEVEL", "debug")
	c = sluice.NewConfiguration()
	if err := c.FromEnv(); err != nil {
		t.Fatal(err)
	}
	s, err := readSettings(c, func(string) string { return "" })
	if err != nil || s.restPorts[0] != 0 || !s.flink || s.level != slog.LevelDebug || s.restAddr != "127.0.0.1" || s.action != Suspend {
		t.Fatalf("settings from the environment: %+v, %v", s, err)
	}
	if ps, err := parsePorts("9249-9251,9300"); err != nil || len(ps) != 4 || ps[0] != 9249 || ps[3] != 9300 {
		t.Errorf("port list: %v %v", ps, err)
	}
}

// A broker that requires SASL/PLAIN: the configuration's
// kafka.properties reach the connectors' clients through the runner, with
// no client option in the program, and the bounded job reads every record.
func TestKafkaPropertiesReachClients(t *testing.T) {
	ctx := testutil.Context(t, testutil.SafetyNet)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "sluice", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := c.ListenAddrs()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.SASL(plain.Auth{User: "sluice", Pass: "s3cret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const records = 40
	for i := range records {
		if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: fmt.Append(nil, i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	conf := sluice.NewConfiguration()
	for k, v := range map[string]string{"pipeline.name": "sasl", "parallelism.default": "2",
		"kafka.properties.security.protocol": "SASL_PLAINTEXT", "kafka.properties.sasl.mechanism": "PLAIN",
		"kafka.properties.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="sluice" password="s3cret";`,
	} {
		if err := conf.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	env := sluice.NewEnvironment(sluice.WithConfiguration(conf))
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics("in"),
		func(r *kgo.Record) (string, error) { return string(r.Value), nil }, kafkasource.Bounded())
	if err != nil {
		t.Fatal(err)
	}
	out := sink.NewCollect[string]()
	sluice.SinkTo(sluice.FromSource(env, src, sluice.NoWatermarks[string](), "in", sluice.UID("in")), out, sluice.UID("out"))
	if err := Run(ctx, env, WithLogger(quiet()), WithoutREST(), WithSignals()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := map[string]int{}
	for _, v := range out.Values() {
		got[v]++
	}
	for i := range records {
		if k := fmt.Sprint(i); got[k] != 1 {
			t.Errorf("record %s read %d times, want once", k, got[k])
		}
	}
	if len(got) != records {
		t.Errorf("%d distinct records read, want %d", len(got), records)
	}
}
