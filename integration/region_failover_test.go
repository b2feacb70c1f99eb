package integration

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/codec"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
)

// Region failover on a real broker: Kafka -> map -> exactly-once Kafka
// sink at parallelism 2 is two failover regions. The map of subtask 0
// fails once, midway: with the region strategy (the default) only its
// region restarts, from the latest completed checkpoint (its source's
// offsets, its sink's pre-committed transactions), while subtask 1's
// tasks run on — its map is opened once; with the full strategy both are
// opened again. A read_committed consumer sees every input record exactly
// once either way. The test logs the time from the failure to the first
// record the restarted map reads, and the longest pause of subtask 1. On
// a coordinator and two workers the region restarts on its worker alone,
// as in one process.
func TestRegionFailoverKafkaExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		strategy sluice.FailoverStrategy
		opens    [2]int
		// workers: on a coordinator and two workers of one slot (in this
		// process, over loopback gRPC and TCP), a region on each.
		workers bool
	}{
		{sluice.FailoverRegion, [2]int{2, 1}, false},
		{sluice.FailoverFull, [2]int{2, 2}, false},
		{sluice.FailoverRegion, [2]int{2, 1}, true},
	} {
		name := tc.strategy.String()
		if tc.workers {
			name += "-on-workers"
		}
		t.Run(name, func(t *testing.T) {
			const records, partitions = 2000, 4
			ctx := testContext(t)
			adm := kadm.NewClient(newClient(t))
			in, out := createTopic(ctx, t, adm, partitions), createTopic(ctx, t, adm, partitions)
			recs := make([]*kgo.Record, records)
			for i := range recs {
				v, _ := codec.Int[int64]{}.Append(nil, int64(i))
				recs[i] = &kgo.Record{Partition: int32(i % partitions), Value: v}
			}
			if err := newClient(t, kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.ManualPartitioner())).
				ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce the input: %v", err)
			}

			quiet := slog.New(slog.DiscardHandler)
			// Each subtask reads half the records, 1 ms each: the failure
			// comes half a second in, after several checkpoints.
			fm := &regionMap{failAt: records / 4, shared: &regionMapShared{}}
			cpDir, prefix := t.TempDir(), uniqueName(t, "region")
			build := func(more ...sluice.Option) *sluice.Environment {
				env := sluice.NewEnvironment(append([]sluice.Option{
					sluice.WithLogger(quiet),
					sluice.WithJobName("region-failover"),
					sluice.WithParallelism(2),
					sluice.WithCheckpointing(100*time.Millisecond, cpDir),
					sluice.WithRestartStrategy(sluice.FixedDelayRestart(3, 0)),
					sluice.WithFailoverStrategy(tc.strategy),
				}, more...)...)
				src, err := kafkasource.NewSource(brokers(t), kafkasource.Topics(in), kafkasource.ValueDecoder[int64](codec.Int[int64]{}),
					kafkasource.Bounded(), kafkasource.Logger(quiet))
				if err != nil {
					t.Fatal(err)
				}
				snk, err := kafkasink.NewSink(brokers(t), kafkasink.ValueSerializer(out, codec.String{}),
					kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(prefix), kafkasink.Logger(quiet))
				if err != nil {
					t.Fatal(err)
				}
				s := sluice.FromSource(env, src, sluice.NoWatermarks[int64](), "kafka-in", sluice.UID("kafka-in"))
				m := sluice.RichMap(s, fm, sluice.Name("map"), sluice.UID("map"))
				sluice.SinkTo(m, snk, sluice.Name("kafka-out"), sluice.UID("kafka-out"))
				return env
			}
			var job *sluice.Job
			var err error
			var workers sync.WaitGroup
			if !tc.workers {
				job, err = build().ExecuteAsync(ctx)
			} else {
				addr := haFreeAddr(t)
				job, err = build(cluster.With(cluster.Config{Role: cluster.RoleCoordinator, Listen: addr, HeartbeatInterval: 100 * time.Millisecond,
					HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second})).ExecuteAsync(ctx)
				for i := range 2 {
					workers.Go(func() {
						err := build(cluster.With(cluster.Config{Role: cluster.RoleWorker, Coordinator: addr, Slots: 1, WorkerID: fmt.Sprintf("w%d", i),
							DataListen: "127.0.0.1:0", Host: "127.0.0.1", HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second})).
							Execute(ctx)
						if err != nil {
							t.Errorf("worker %d: %v", i, err)
						}
					})
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			defer workers.Wait()
			if err := job.Wait(); err != nil {
				t.Fatalf("job failed: %v", err)
			}
			if !fm.shared.fired.Load() {
				t.Fatal("the injected failure never fired")
			}
			if n := job.Restarts(); n != 1 {
				t.Errorf("%d restarts, want 1", n)
			}
			if got := fm.shared.openCounts(); got != tc.opens {
				t.Errorf("the map's subtasks were opened %v times, want %v", got, tc.opens)
			}
			var got []int
			for _, r := range readCommitted(ctx, t, out) {
				v, err := strconv.Atoi(r.Value)
				if err != nil {
					t.Fatalf("output record %+v: %v", r, err)
				}
				got = append(got, v)
			}
			slices.Sort(got)
			bad := len(got) != records
			for i := 0; !bad && i < records; i++ {
				bad = got[i] != i
			}
			if bad {
				t.Fatalf("read_committed output is not every input record once: %d records, first %v", len(got), got[:min(len(got), 20)])
			}
			t.Logf("%s failover: failure to the restarted map's first record %v; the other subtask's longest pause between records %v; %d records committed",
				tc.strategy, time.Duration(fm.shared.firstRecord.Load()), time.Duration(fm.shared.gap1.Load()), len(got))
		})
	}
}

// regionMap formats a record, 1 ms each; subtask 0 fails once at its
// failAt-th record. It counts the opens of each subtask and measures the
// time from the failure to the first record a map opened after it reads.
// The job clones it for every subtask: what they share is behind a
// pointer.
type regionMap struct {
	failAt   int64
	shared   *regionMapShared
	subtask  int
	seen     int64
	reopened bool // opened after the failure
	measured bool
}

type regionMapShared struct {
	fired       atomic.Bool
	failedAt    atomic.Int64 // unix nanoseconds
	firstRecord atomic.Int64 // nanoseconds from the failure
	// last1 is when subtask 1 last mapped a record, gap1 its longest
	// pause between two records (unix nanoseconds, nanoseconds).
	last1, gap1 atomic.Int64
	mu          sync.Mutex
	opens       [2]int
}

func (s *regionMapShared) openCounts() [2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

func (m *regionMap) Open(ctx *sluice.OperatorContext) error {
	m.subtask = ctx.Subtask
	m.reopened = m.shared.fired.Load()
	m.shared.mu.Lock()
	defer m.shared.mu.Unlock()
	m.shared.opens[ctx.Subtask]++
	return nil
}

func (m *regionMap) Map(v int64) (string, error) {
	if m.reopened && m.subtask == 0 && !m.measured {
		m.measured = true
		m.shared.firstRecord.CompareAndSwap(0, time.Now().UnixNano()-m.shared.failedAt.Load())
	}
	if m.subtask == 1 {
		now := time.Now().UnixNano()
		if last := m.shared.last1.Swap(now); last > 0 && now-last > m.shared.gap1.Load() {
			m.shared.gap1.Store(now - last) // one goroutine at a time: subtask 1's task
		}
	}
	m.seen++
	if m.subtask == 0 && m.seen >= m.failAt && !m.reopened && m.shared.fired.CompareAndSwap(false, true) {
		m.shared.failedAt.Store(time.Now().UnixNano())
		return "", fmt.Errorf("map of %d: injected failure", v)
	}
	time.Sleep(time.Millisecond)
	return strconv.FormatInt(v, 10), nil
}
