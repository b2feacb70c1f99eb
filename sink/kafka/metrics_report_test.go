package kafka

import (
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/sink"
)

// Each writer reports its own subtask's figures, its committer's commits
// included, which the runtime reads with the task's metrics; the sink's
// Metrics sums them.
func TestWriterReportsItsSubtask(t *testing.T) {
	seeds := cluster(t, 1, "out")
	s, err := NewSink(seeds, testSerializer, Guarantee(ExactlyOnce), TransactionalIDPrefix("report"),
		TransactionTimeout(time.Minute), OnSerializerError(SkipSerializerErrors()), Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	var ws [2]sink.Writer[string]
	for i := range ws {
		if ws[i], err = s.NewWriter(wctx(i, 2)); err != nil {
			t.Fatal(err)
		}
		defer ws[i].Close()
	}
	writeAll(t, ws[0], "a", "nokey-1", "nokey-2")
	writeAll(t, ws[1], "nokey-3")
	cs, err := ws[0].(sink.PrecommittingWriter[string]).PrepareCommit(1)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.NewCommitter(wctx(0, 2))
	defer c.Close()
	if err := c.Commit(testCtx(t), 1, cs); err != nil {
		t.Fatal(err)
	}
	figures := func(w sink.Writer[string]) map[string]float64 {
		rep, ok := w.(report.Reporter)
		if !ok {
			t.Fatalf("%T does not report its figures", w)
		}
		out := map[string]float64{}
		for _, f := range report.Read("out", rep) {
			out[f.Family] = f.Value
			if f.Family == famCommitLatency.Name {
				out[f.Family] = float64(f.Count)
			}
		}
		return out
	}
	for i, want := range []map[string]float64{
		{"kafka_sink_recordsSkipped": 2, "kafka_sink_transactionsCommitted": 1, "kafka_sink_commitLatency_seconds": 1},
		{"kafka_sink_recordsSkipped": 1, "kafka_sink_transactionsCommitted": 0, "kafka_sink_commitLatency_seconds": 0},
	} {
		got := figures(ws[i])
		for k, v := range want {
			if got[k] != v {
				t.Errorf("subtask %d: %s = %v, want %v (all %v)", i, k, got[k], v, got)
			}
		}
	}
	if m := s.Metrics(); m.RecordsSkipped != 3 || m.TransactionsCommitted != 1 {
		t.Errorf("sink metrics %+v, want 3 skipped and 1 committed over the subtasks", m)
	}
}
