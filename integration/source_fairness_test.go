package integration

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/inspect"
	"github.com/sluicehq/sluice/sink"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
)

// A job with 2 source subtasks reads a topic of 4 partitions, one with a
// far larger backlog than the others, through a slow first operator: in
// the first completed checkpoint that shows a subtask's reader at work,
// every partition of that subtask has moved, whatever the backlog of its
// other partition (a regression: a reader handed out one partition's fetched
// records before the next partition's, so a partition sat at offset 0
// while another had data). Then the job reads every record once.
func TestKafkaSourceFairnessAcrossPartitions(t *testing.T) {
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	topic := createTopic(ctx, t, adm, 4)
	// One partition much larger than the others; the others large enough
	// that a reader draining one partition's fetch first would still be in
	// it at the first checkpoint.
	sizes := []int{60000, 12000, 12000, 12000}
	p := newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	for part, n := range sizes {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Partition: int32(part), Value: []byte{byte(i)}}
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", part, err)
		}
	}
	owners := map[int][]int32{}
	for part := range sizes {
		o := kafkasource.OwnerOf(topic, int32(part), 2)
		owners[o] = append(owners[o], int32(part))
	}
	if len(owners[0]) != 2 || len(owners[1]) != 2 {
		t.Fatalf("assignment %v, want two partitions per subtask", owners)
	}

	// The first completed checkpoint in which each subtask's partitions
	// moved, read from the checkpoint itself as it completes (before a
	// later one could subsume it).
	var (
		mu       sync.Mutex
		first    = map[int]map[int32]int64{} // subtask -> partition -> offset
		firstID  = map[int]int64{}
		problems []string
		released atomic.Bool
	)
	listener := func(cs checkpoint.Stats) {
		if cs.Status != checkpoint.StatusCompleted || cs.Kind == checkpoint.KindSavepoint {
			return
		}
		rep, err := inspect.Load(cs.Path)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			problems = append(problems, fmt.Sprintf("load checkpoint %d at %s: %v", cs.ID, cs.Path, err))
			released.Store(true)
			return
		}
		offsets := map[int]map[int32]int64{}
		for _, sp := range rep.Sources {
			if sp.Kind != "kafka" || sp.Topic != topic {
				continue
			}
			if offsets[sp.Subtask] == nil {
				offsets[sp.Subtask] = map[int32]int64{}
			}
			offsets[sp.Subtask][sp.Partition] = sp.Offset
		}
		for sub, offs := range offsets {
			if first[sub] != nil {
				continue
			}
			moved := false
			for _, o := range offs {
				moved = moved || o > 0
			}
			if moved {
				first[sub], firstID[sub] = offs, cs.ID
			}
		}
		if len(first) == 2 {
			released.Store(true) // the check is done: let the job run at full speed
		}
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := sluice.NewEnvironment(
		sluice.WithLogger(quiet), sluice.WithParallelism(2), sluice.WithRestartStrategy(sluice.NoRestart()),
		sluice.WithCheckpointing(300*time.Millisecond, t.TempDir()),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.RetainedCheckpoints = 1000 }),
		sluice.WithCheckpointListener(listener),
	)
	src, err := kafkasource.NewSource(brokers(t), kafkasource.Topics(topic),
		func(r *kgo.Record) (int32, error) { return r.Partition, nil },
		kafkasource.Bounded(), kafkasource.Logger(quiet),
		// Room for both partitions' first fetches: the default share
		// (taskmanager.memory.kafka.source.fraction) holds a few thousand of these
		// tiny records, less than one partition's 64 KiB fetch, and a
		// reader over its bound fetches no more until the task takes them,
		// so the other partition's first fetch would wait on the pacing
		// below and the check be about the budget, not the hand-out.
		kafkasource.MaxBufferedRecords(1<<20), kafkasource.MaxBufferedBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	// A slow operator, chained to the source (same parallelism, forward),
	// paces the reader until the check is done, so that the first
	// checkpoint comes long before any partition's fetched records are
	// handed out. It paces; no assertion depends on its speed.
	var n atomic.Int64
	slow := func(part int32) (int32, error) {
		if !released.Load() && n.Add(1)%8 == 0 {
			time.Sleep(time.Millisecond)
		}
		return part, nil
	}
	out := sink.NewCollect[int32]()
	sluice.SinkTo(sluice.Map(sluice.FromSource(env, src, sluice.NoWatermarks[int32](), "kafka"), slow), out)
	if err := env.Execute(ctx); err != nil {
		t.Fatalf("job: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("reading the checkpoints: %s", strings.Join(problems, "; "))
	}
	for sub := range 2 {
		offs := first[sub]
		if offs == nil {
			t.Fatalf("no completed checkpoint showed subtask %d's partitions %v moving", sub, owners[sub])
		}
		for _, part := range owners[sub] {
			o, ok := offs[part]
			switch {
			case !ok:
				t.Errorf("checkpoint %d has no position of partition %d (subtask %d): %v", firstID[sub], part, sub, offs)
			case o == 0:
				t.Errorf("checkpoint %d, the first with subtask %d at work: partition %d at offset 0 while the subtask read %v (sizes %v)",
					firstID[sub], sub, part, offs, sizes)
			}
		}
		drained := true
		for _, part := range owners[sub] {
			drained = drained && offs[part] >= int64(sizes[part])
		}
		if drained {
			t.Errorf("checkpoint %d found subtask %d's partitions read to the end (%v): the check proves nothing", firstID[sub], sub, offs)
		}
	}
	got := make([]int, len(sizes))
	for _, part := range out.Values() {
		got[part]++
	}
	if !slices.Equal(got, sizes) {
		t.Fatalf("records read per partition %v, want %v", got, sizes)
	}
}
