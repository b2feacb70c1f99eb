package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/memory"
)

// Each transactional producer gets its share of the process's Kafka sink
// memory, the share of one of parallelism × pool size producers alive;
// the user's client options win.
func TestProducerBuffersFromMemoryBudget(t *testing.T) {
	b, err := memory.Config{ProcessSize: 1 << 30}.Budget()
	if err != nil {
		t.Fatal(err)
	}
	old := memory.Install(b)
	t.Cleanup(func() { memory.Install(old) })
	seeds := cluster(t, 1, "out")
	for _, tc := range []struct {
		name string
		opts []Option
		want producerBuffers
	}{
		{"budget", nil, producerShare(b, 2*3)},
		{"client-options", []Option{ClientOptions(kgo.MaxBufferedRecords(77))}, func() producerBuffers {
			p := producerShare(b, 2*3)
			p.MaxBufferedRecords = 77
			return p
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := eosSink(t, seeds, "mem-"+tc.name, append([]Option{TransactionalIDPoolSize(3)}, tc.opts...)...)
			w, err := s.NewWriter(wctx(1, 2))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			writeAll(t, w, "a")
			cl := w.(*transactionalWriter[string]).cur.cl
			if got := cl.OptValue(kgo.MaxBufferedRecords); got != int64(tc.want.MaxBufferedRecords) {
				t.Errorf("MaxBufferedRecords %v, want %d", got, tc.want.MaxBufferedRecords)
			}
			if got := cl.OptValue(kgo.MaxBufferedBytes); got != tc.want.MaxBufferedBytes {
				t.Errorf("MaxBufferedBytes %v, want %d", got, tc.want.MaxBufferedBytes)
			}
			if got := cl.OptValue(kgo.ProducerBatchMaxBytes); got != tc.want.BatchMaxBytes {
				t.Errorf("ProducerBatchMaxBytes %v, want %d", got, tc.want.BatchMaxBytes)
			}
		})
	}
}

// A producer's share: its part of the sink's share of the budget.
func TestProducerShare(t *testing.T) {
	const mib = 1 << 20
	if memoryShare.Name() != "kafka.sink" {
		t.Fatalf("share %q", memoryShare.Name())
	}
	p := producerShare(memory.Budget{Shares: map[string]int64{"kafka.sink": 16 * mib}}, 8) // 2 MiB each
	if p.MaxBufferedBytes != 2*mib || p.MaxBufferedRecords != 2*mib/kafkaclient.RecordOverhead || p.BatchMaxBytes != 512<<10 {
		t.Errorf("producer share %+v", p)
	}
	// The default budget sets 0.02 of the 224 MiB past the overhead
	// aside, 4.48 MiB: 1.12 MiB for each of the four clients of an
	// exactly-once sink of parallelism 2 (two transactional ids each).
	d, err := memory.Config{}.Budget()
	if err != nil {
		t.Fatal(err)
	}
	fraction := 0.02
	want := int64(224 * mib * fraction)
	if p := producerShare(d, 4); memoryShare.Of(d) != want || p.MaxBufferedBytes != want/4 {
		t.Errorf("default share %d, a producer of four %+v", memoryShare.Of(d), p)
	}
}
