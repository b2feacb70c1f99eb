package e2e

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linxGnu/grocksdb"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testutil"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// One logger: a job given a slog handler (WithLogger) receives the
// records of its RocksDB backends, of its Kafka source and sink and of
// the franz-go clients they make, with the job's attributes; none of
// them goes to slog's default logger.
func TestJobLoggerReceivesRocksDBAndKafkaClients(t *testing.T) {
	seeds := testutil.KafkaCluster(t, 1, "in", "out")
	ctx := testutil.Context(t, 0)
	p, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("in"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "k%d", i%4)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()

	// A database of an earlier run where the job's backend will open
	// its own: the backend discards it and says so, at INFO.
	stateDir := t.TempDir()
	stale := filepath.Join(stateDir, "logs", "count", "0", "db")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := grocksdb.NewDefaultOptions()
	opts.SetCreateIfMissing(true)
	db, err := grocksdb.OpenDb(opts, stale)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	opts.Destroy()

	defaults := &testutil.LogRecorder{}
	old := slog.Default()
	slog.SetDefault(slog.New(defaults))
	defer slog.SetDefault(old)

	logs := &testutil.LogRecorder{}
	env := sluice.NewEnvironment(
		sluice.WithJobName("logs"),
		sluice.WithLogger(slog.New(logs)),
		sluice.WithCheckpointing(50*time.Millisecond, t.TempDir()),
		sluice.WithStateBackend(rocksdb.Factory(stateDir, rocksdb.Options{})),
	)
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics("in"),
		func(r *kgo.Record) (string, error) { return string(r.Value), nil }, kafkasource.Bounded())
	if err != nil {
		t.Fatal(err)
	}
	keys := sluice.FromSource(env, src, sluice.NoWatermarks[string](), "in", sluice.UID("in"))
	counted := sluice.Reduce(sluice.KeyBy(keys, func(k string) string { return k }),
		func(acc, v string) (string, error) { return acc + v, nil }, sluice.UID("count"))
	out, err := kafkasink.NewSink(seeds, kafkasink.ValueSerializer("out", codec.String{}),
		kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix("logs"))
	if err != nil {
		t.Fatal(err)
	}
	sluice.SinkTo(counted, out, sluice.UID("out"))
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}

	has := func(what string, match func(testutil.LogRecord) bool) {
		t.Helper()
		if len(logs.Matching(match)) == 0 {
			t.Errorf("the job's handler received no record of %s", what)
		}
	}
	has("the RocksDB backend (with the operator)", func(r testutil.LogRecord) bool {
		return r.Message == "rocksdb backend: discarded the database of an earlier run" && r.Attrs["operator"] != ""
	})
	has("the Kafka source", func(r testutil.LogRecord) bool { return strings.HasPrefix(r.Message, "kafka source: ") })
	for _, kind := range []string{"source-admin", "source-consumer", "sink-admin", "sink-transactional-producer"} {
		has("the Kafka client "+kind, func(r testutil.LogRecord) bool {
			return r.Attrs["component"] == "kafka-client" && r.Attrs["client"] == kind
		})
	}
	strays := defaults.Matching(func(r testutil.LogRecord) bool {
		return r.Attrs["component"] == "kafka-client" || strings.HasPrefix(r.Message, "rocksdb") || strings.HasPrefix(r.Message, "kafka")
	})
	if len(strays) > 0 {
		t.Errorf("%d records of RocksDB or Kafka went to slog's default logger, the first: %v", len(strays), strays[0])
	}
}
