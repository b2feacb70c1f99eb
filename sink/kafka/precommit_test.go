package kafka

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sink"
)

// produceControlled is a one-broker kfake cluster with topic "out" whose
// answers to the Produce requests of transactional id id go through
// control (its other requests are answered as usual).
func produceControlled(t *testing.T, id string, control func(c *kfake.Cluster, req *kmsg.ProduceRequest) (kmsg.Response, error, bool)) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if pr.TransactionID == nil || *pr.TransactionID != id {
			return nil, nil, false
		}
		return control(c, pr)
	})
	return c.ListenAddrs()
}

// The pre-commit of a checkpoint runs on while the writer writes the next
// interval under another transactional id, and its wait returns only once
// the broker has acknowledged every record of the checkpoint's
// transaction: the runtime completes the checkpoint (and commits it) only
// after that wait, so a wait that returned earlier would let a checkpoint
// complete over records that could still fail. The broker here holds the
// first transaction's produce answers until the test lets them go, after
// the writer has written and flushed a record of the next interval.
func TestExactlyOncePrecommitWaitsForAcks(t *testing.T) {
	release := make(chan struct{})
	var released atomic.Bool
	seeds := produceControlled(t, TransactionalID("held", 0, 0), func(c *kfake.Cluster, _ *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	s := eosSink(t, seeds, "held")
	w, cm := writerAndCommitter(t, s)
	aw := w.(sink.AsyncPrecommittingWriter[string])

	writeAll(t, w, "a", "b")
	wait, err := aw.PrepareCommitAsync(1)
	if err != nil || wait == nil {
		t.Fatalf("PrepareCommitAsync(1): wait %v, %v", wait != nil, err)
	}
	type result struct {
		cs            [][]byte
		err           error
		afterReleased bool
	}
	done := make(chan result, 1)
	go func() {
		cs, err := wait()
		done <- result{cs, err, released.Load()}
	}()

	// The next interval goes on under the pool's other id, and its
	// records are acknowledged while the first transaction's are held.
	writeAll(t, w, "c")
	if err := w.Flush(false); err != nil {
		t.Fatalf("flush the next interval: %v", err)
	}
	if id := w.(*transactionalWriter[string]).cur.id; id != TransactionalID("held", 0, 1) {
		t.Fatalf("the next interval writes under %s, want held-0-1", id)
	}
	select {
	case r := <-done:
		t.Fatalf("the pre-commit of checkpoint 1 returned (%v) before the broker acknowledged its records", r.err)
	default:
	}
	released.Store(true)
	close(release)

	r := <-done
	if r.err != nil {
		t.Fatalf("pre-commit of checkpoint 1: %v", r.err)
	}
	if !r.afterReleased {
		t.Fatal("the pre-commit of checkpoint 1 returned before the broker acknowledged its records")
	}
	if len(r.cs) != 1 {
		t.Fatalf("%d committables, want 1", len(r.cs))
	}
	c := committable(t, r.cs[0])
	if c.Records != 2 || c.CheckpointID != 1 || len(c.LastOffsets) != 1 || c.TransactionalID != TransactionalID("held", 0, 0) {
		t.Fatalf("committable %+v, want 2 records of checkpoint 1 under held-0-0", c)
	}
	// The wait may be called again and answers the same.
	if again, err := wait(); err != nil || len(again) != 1 || string(again[0]) != string(r.cs[0]) {
		t.Fatalf("second wait: %d committables, %v", len(again), err)
	}
	if err := cm.Commit(testutil.Context(t, 0), 1, r.cs); err != nil {
		t.Fatalf("commit checkpoint 1: %v", err)
	}
	// The next interval's transaction, whose record the broker took
	// first, is committed at checkpoint 2: both are visible then.
	cs2, err := w.(sink.PrecommittingWriter[string]).PrepareCommit(2)
	if err != nil {
		t.Fatalf("pre-commit of checkpoint 2: %v", err)
	}
	if err := cm.Commit(testutil.Context(t, 0), 2, cs2); err != nil {
		t.Fatalf("commit checkpoint 2: %v", err)
	}
	if got := readAll(t, seeds, "out", kgo.ReadCommitted(), 3); fmt.Sprint(got) != "[c a b]" {
		t.Fatalf("read_committed sees %v, want [c a b]", got)
	}
}

// A record of a pre-committed transaction that the broker refuses fails
// the pre-commit's wait (the checkpoint is declined), and the writer's
// next Write fails with it (the job fails over), although the writer had
// gone on under another id.
func TestExactlyOnceFailedPrecommitFailsWriter(t *testing.T) {
	seeds := produceControlled(t, TransactionalID("refused", 0, 0), func(_ *kfake.Cluster, req *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	s := eosSink(t, seeds, "refused")
	w, _ := writerAndCommitter(t, s)
	aw := w.(sink.AsyncPrecommittingWriter[string])

	writeAll(t, w, "a")
	wait, err := aw.PrepareCommitAsync(1)
	if err != nil || wait == nil {
		t.Fatalf("PrepareCommitAsync(1): wait %v, %v", wait != nil, err)
	}
	cs, err := wait()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || !errors.Is(err, ErrProduce) {
		t.Fatalf("pre-commit of checkpoint 1: %d committables, %v; want the refused record's error", len(cs), err)
	}
	if err := w.Write("b", 0); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("Write after the failed pre-commit: %v, want its error", err)
	}
	if _, err := aw.PrepareCommitAsync(2); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("PrepareCommitAsync after the failed pre-commit: %v, want its error", err)
	}
}
