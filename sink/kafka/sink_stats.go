package kafka

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// CommitLatencyBuckets are the upper bounds, in seconds, of the commit
// latency histogram of SinkMetrics.
var CommitLatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// SinkMetrics are the figures of a sink, over all its subtasks, for
// monitoring: for exactly-once, transactions committed, aborted and lost,
// and the latency of the commits (from the commit request to the broker's
// answer); for every guarantee, the records the serializer refused that
// were skipped or dead-lettered.
type SinkMetrics struct {
	TransactionsCommitted int64
	// TransactionsAborted counts the lingering transactions aborted when
	// writers start.
	TransactionsAborted int64
	// TransactionsLost counts the transactions of completed checkpoints
	// that the broker had aborted (their timeout expired) and that the
	// committer passed over under IgnoreFailuresAfterTransactionTimeout.
	TransactionsLost int64
	// RecordsSkipped counts the records the serializer refused that
	// SkipSerializerErrors dropped.
	RecordsSkipped int64
	// RecordsDeadLettered counts the records the serializer refused that
	// DeadLetterTopic wrote to the dead-letter topic (when written: a
	// record replayed after a failure is counted again).
	RecordsDeadLettered int64
	// CommitLatencyCounts[i] counts commits that took at most
	// CommitLatencyBuckets[i] (cumulative counts are made by the reader);
	// the last element counts the slower ones.
	CommitLatencyCounts []uint64
	CommitLatencySum    time.Duration
}

// statsSet holds a sink's counters per subtask, for as long as the sink
// lives: a writer and committer of a later attempt (a restart) go on
// counting where those before them stopped, as counters must.
type statsSet struct {
	mu sync.Mutex
	by map[int]*sinkStats
}

// of returns the counters of subtask.
func (s *statsSet) of(subtask int) *sinkStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.by[subtask]
	if st == nil {
		if s.by == nil {
			s.by = map[int]*sinkStats{}
		}
		st = &sinkStats{}
		s.by[subtask] = st
	}
	return st
}

// snapshot sums the figures of every subtask.
func (s *statsSet) snapshot() SinkMetrics {
	s.mu.Lock()
	all := slices.Collect(maps.Values(s.by))
	s.mu.Unlock()
	sum := (&sinkStats{}).snapshot()
	for _, st := range all {
		m := st.snapshot()
		sum.TransactionsCommitted += m.TransactionsCommitted
		sum.TransactionsAborted += m.TransactionsAborted
		sum.TransactionsLost += m.TransactionsLost
		sum.RecordsSkipped += m.RecordsSkipped
		sum.RecordsDeadLettered += m.RecordsDeadLettered
		sum.CommitLatencySum += m.CommitLatencySum
		for i, n := range m.CommitLatencyCounts {
			sum.CommitLatencyCounts[i] += n
		}
	}
	return sum
}

// sinkStats are the counters of one subtask of a sink, shared by its
// writer and committer.
type sinkStats struct {
	committed, aborted, lost atomic.Int64
	skipped, deadLettered    atomic.Int64
	latency                  [14]atomic.Uint64 // len(CommitLatencyBuckets)+1
	latencySum               atomic.Int64
}

func (s *sinkStats) commit(d time.Duration) {
	if s == nil {
		return
	}
	s.committed.Add(1)
	s.latencySum.Add(int64(d))
	i := 0
	for i < len(CommitLatencyBuckets) && d.Seconds() > CommitLatencyBuckets[i] {
		i++
	}
	s.latency[i].Add(1)
}

func (s *sinkStats) abort() {
	if s != nil {
		s.aborted.Add(1)
	}
}

func (s *sinkStats) lose() {
	if s != nil {
		s.lost.Add(1)
	}
}

func (s *sinkStats) skip() {
	if s != nil {
		s.skipped.Add(1)
	}
}

func (s *sinkStats) deadLetter() {
	if s != nil {
		s.deadLettered.Add(1)
	}
}

func (s *sinkStats) snapshot() SinkMetrics {
	m := SinkMetrics{TransactionsCommitted: s.committed.Load(), TransactionsAborted: s.aborted.Load(),
		TransactionsLost: s.lost.Load(), RecordsSkipped: s.skipped.Load(), RecordsDeadLettered: s.deadLettered.Load(),
		CommitLatencySum: time.Duration(s.latencySum.Load())}
	for i := range s.latency {
		m.CommitLatencyCounts = append(m.CommitLatencyCounts, s.latency[i].Load())
	}
	return m
}

// Metrics returns the sink's figures so far, over all its subtasks.
// Each subtask's are reported with its task's metrics (the writers
// implement report.Reporter), to the REST API and /metrics.
func (s *Sink[T]) Metrics() SinkMetrics { return s.cfg.stats.snapshot() }
