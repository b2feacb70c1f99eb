package integration

// The autoscaler on a cluster, on a real broker: the coordinator runs it
// for the job (job.autoscaler.enabled), from the figures the workers
// report (the Kafka source's pendingRecords, each subtask's busy time),
// and carries its decisions out through the cluster's rescale in place.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/runtime/autoscaler"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
)

// costlyCount is a running count per key whose every record costs cost
// (asleep, so busy without burning the machine's cores): one subtask
// counts about 1/cost records per second.
type costlyCount struct {
	cost  time.Duration
	count state.ValueState[int64]
}

func (c *costlyCount) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *costlyCount) ProcessElement(ctx *sluice.KeyedContext[string], _ string, out sluice.Collector[keyCount]) error {
	time.Sleep(c.cost)
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.count.Update(n); err != nil {
		return err
	}
	out.Collect(keyCount{Key: ctx.Key(), Count: n})
	return nil
}

type keyCount struct {
	Key   string
	Count int64
}

// pacedProducer writes rounds of one record per key to a topic at the
// rate it is set to (records per second) until stopped; the rounds it
// wrote are every key's count.
type pacedProducer struct {
	rate   atomic.Int64
	rounds atomic.Int64
	stop   chan struct{}
	done   chan error
}

func startPacedProducer(ctx context.Context, t *testing.T, topic string, keys int, rate int64) *pacedProducer {
	t.Helper()
	cl := newClient(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	p := &pacedProducer{stop: make(chan struct{}), done: make(chan error, 1)}
	p.rate.Store(rate)
	go func() {
		const tick = 20 * time.Millisecond
		owed := 0.0
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-p.stop:
				p.done <- nil
				return
			case <-ctx.Done():
				p.done <- ctx.Err()
				return
			case <-tk.C:
			}
			owed += float64(p.rate.Load()) * tick.Seconds() / float64(keys)
			var recs []*kgo.Record
			for ; owed >= 1; owed-- {
				round := p.rounds.Load() + int64(len(recs)/keys)
				for k := range keys {
					recs = append(recs, &kgo.Record{Key: []byte(keyName(k)), Value: []byte(strconv.FormatInt(round, 10))})
				}
			}
			if len(recs) == 0 {
				continue
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				p.done <- fmt.Errorf("produce: %w", err)
				return
			}
			p.rounds.Add(int64(len(recs) / keys))
		}
	}()
	return p
}

// finish stops the producer and returns every key's count.
func (p *pacedProducer) finish(t *testing.T) int {
	t.Helper()
	close(p.stop)
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
	return int(p.rounds.Load())
}

// A keyed count on a coordinator and two workers of two slots, read from
// a topic of 4 partitions at a rate that steps up and down: each record
// costs the count 2 ms, so at 1200 records/s the count at parallelism 1
// is busy all the time and the Kafka source's pending records grow. The
// autoscaler scales the count up on its busy time (and the lag), the job
// catches up (the lag falls back while the rate is still high), and
// after the rate drops to 100 records/s it scales the count down. Every
// decision is the coordinator's autoscaler's, carried out in place; the
// committed output (read_committed) is every key's counts 1..n once.
func TestAutoscalerOnClusterFollowsKafkaLag(t *testing.T) {
	const keys, low, high, countV = 16, 100, 1200, 1
	ctx := jobContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t))
	in, out := createTopic(ctx, t, adm, 4), createTopic(ctx, t, adm, 4)
	seeds, cpDir, prefix := brokers(t), t.TempDir(), uniqueName(t, "sluice-it-as")
	conf := sluice.NewConfiguration()
	for k, v := range map[string]string{
		"job.autoscaler.enabled":                      "true",
		"autoscaler.standalone.control-loop.interval": "250 ms",
		"job.autoscaler.metrics.window":               "2 s",
		"job.autoscaler.stabilization.interval":       "1 s",
		"job.autoscaler.scale-down.interval":          "1 s",
		"job.autoscaler.utilization.target":           "0.5",
		"job.autoscaler.target.utilization.boundary":  "0.2",
		"job.autoscaler.catch-up.duration":            "5 s",
		"job.autoscaler.restart.time":                 "1 s",
		"job.autoscaler.vertex.max-parallelism":       "4",
	} {
		if err := conf.Set(k, v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	env := func(c cluster.Config) *sluice.Environment {
		env := sluice.NewEnvironment(sluice.WithConfiguration(conf), sluice.WithJobName("autoscaled-count"), sluice.WithParallelism(1),
			sluice.WithCheckpointing(100*time.Millisecond, cpDir), sluice.WithBufferTimeout(5*time.Millisecond),
			sluice.WithRestartStrategy(sluice.NoRestart()), cluster.With(c))
		src, err := kafkasource.NewSource(seeds, kafkasource.Topics(in), func(r *kgo.Record) (string, error) { return string(r.Key), nil })
		if err != nil {
			t.Fatal(err)
		}
		snk, err := kafkasink.NewSink(seeds, func(kc keyCount) (*kgo.Record, error) {
			return &kgo.Record{Topic: out, Key: []byte(kc.Key), Value: strconv.AppendInt(nil, kc.Count, 10)}, nil
		}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		ks := sluice.FromSource(env, src, sluice.NoWatermarks[string](), "kafka-in", sluice.UID("kafka-in"))
		counts := sluice.Process[string, string, keyCount](sluice.KeyBy(ks, func(k string) string { return k }),
			&costlyCount{cost: 2 * time.Millisecond}, sluice.Name("count"), sluice.UID("count"))
		sluice.SinkTo(counts, snk, sluice.Name("kafka-out"), sluice.UID("kafka-out"))
		return env
	}
	prod := startPacedProducer(ctx, t, in, keys, low)
	addr := haFreeAddr(t)
	job, err := env(cluster.Config{Role: cluster.RoleCoordinator, Listen: addr, HeartbeatInterval: 100 * time.Millisecond,
		HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second}).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	werrs := make([]error, 2)
	for i := range werrs {
		wg.Go(func() {
			werrs[i] = env(cluster.Config{Role: cluster.RoleWorker, Coordinator: addr, Slots: 2, WorkerID: fmt.Sprintf("w%d", i+1),
				DataListen: "127.0.0.1:0", Host: "127.0.0.1", HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second}).
				Execute(ctx)
		})
	}
	d := autoscaler.Of(job)
	if d == nil {
		t.Fatal("no autoscaler runs with the job on the coordinator")
	}
	countAt := func() int { return job.Graph().Parallelism()[countV] }
	lag := func() int64 {
		s, err := autoscaler.NewJobSource(job).Snapshot(ctx)
		if err != nil || !s.Running {
			return -1
		}
		return s.Vertices[0].Lag
	}
	awaitOrFail := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-job.Done():
				t.Fatalf("the job ended (%v) waiting for %s", job.Wait(), what)
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v; the autoscaler's last evaluation: %s", what, ctx.Err(), d.Last())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	// At the low rate the count at 1 keeps up: the autoscaler evaluates
	// full windows and leaves it.
	awaitOrFail("an evaluation of a full window at the low rate", func() bool { return len(d.LastEvaluated().Vertices) > 0 })
	if p := countAt(); p != 1 {
		t.Fatalf("the count runs at %d at the low rate; the autoscaler decided %s", p, d.LastDecision())
	}
	prod.rate.Store(high)
	awaitOrFail("the scale-up at the high rate", func() bool { return countAt() > 1 })
	up := d.LastDecision()
	peak := countAt()
	// The count's busy time drives it: its true processing rate is below
	// the scale-up threshold. The source's lag may still be 0 when the
	// window's input rate alone (part of it at the high rate) is more
	// than the count sustains at the target utilization.
	if v := up.Vertices; up.Outcome != autoscaler.Scale || len(v) != 2 || v[0].Lag < 0 || v[countV].Change != autoscaler.ScaleUp ||
		float64(v[countV].TrueProcessingRate) >= float64(v[countV].ScaleUpThreshold) {
		t.Errorf("the scale-up was not driven by the count's busy time: %s", up)
	}
	awaitOrFail("the job to catch up at the high rate", func() bool {
		l := lag()
		return l >= 0 && l < high/4 && countAt() > 1 // a quarter second of input
	})
	t.Logf("scaled up to %d and caught up: %s", peak, up)
	prod.rate.Store(low)
	awaitOrFail("the scale-down at the low rate", func() bool { return countAt() < peak })
	t.Logf("scaled down to %d: %s", countAt(), d.LastDecision())
	perKey := prod.finish(t)
	var got []outRecord
	awaitOrFail("every record counted and committed", func() bool {
		got = readCommittedSoFar(ctx, t, out)
		return len(got) >= keys*perKey
	})
	if _, err := job.StopWithSavepoint(ctx, t.TempDir(), false); err != nil {
		t.Fatalf("stop with savepoint: %v", err)
	}
	wg.Wait()
	for i, err := range werrs {
		if err != nil {
			t.Errorf("worker w%d: %v", i+1, err)
		}
	}
	checkExactCounts(t, readCommitted(ctx, t, out), keys, perKey)
	h := job.RescaleHistory()
	if len(h) < 2 {
		t.Fatalf("rescales %+v, want the scale-up and the scale-down", h)
	}
	for _, r := range h {
		if r.Cause != "autoscaler" || r.Outcome != "rescaled" {
			t.Errorf("rescale %+v: want the autoscaler's, rescaled", r)
		}
	}
	if n := job.Restarts(); n != 0 {
		t.Errorf("the job restarted %d times; a rescale is no failure", n)
	}
	t.Logf("%d rescales (%d asked by the autoscaler), %d records per key", len(h), d.Rescales(), perKey)
}
