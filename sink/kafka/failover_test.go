package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sink"
)

// failingCluster is a kfake cluster whose answers to requests of key fail
// with code, the first times of them, or all of them when times < 0; it
// counts the failures it answered.
func failingCluster(t *testing.T, key kmsg.Key, code *kerr.Error, times int) ([]string, *atomic.Int64) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var failed atomic.Int64
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if times >= 0 && failed.Load() >= int64(times) {
			return nil, nil, false
		}
		failed.Add(1)
		resp := req.ResponseKind()
		switch r := resp.(type) {
		case *kmsg.InitProducerIDResponse:
			r.ErrorCode = code.Code
		case *kmsg.EndTxnResponse:
			r.ErrorCode = code.Code
		default:
			t.Errorf("no failure to answer a %T with", resp)
		}
		return resp, nil, true
	})
	return c.ListenAddrs(), &failed
}

// writerAndCommitter makes the writer and the committer of subtask 0 of
// 1, closed when the test ends.
func writerAndCommitter(t *testing.T, s *Sink[string]) (sink.Writer[string], sink.Committer) {
	t.Helper()
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	cm, err := s.NewCommitter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cm.Close() })
	return w, cm
}

// noClientRetries has franz-go give up on the first failure of a request,
// so that what the connector retries shows.
var noClientRetries = ClientOptions(kgo.RequestRetries(0))

// tv1 pins the client to transaction version 1, under which the writer
// initialises a producer (InitProducerId) for every transaction.
func tv1() Option {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	return ClientOptions(kgo.MaxVersions(v))
}

// A transaction coordinator that moves or is still loading answers
// InitProducerId with a retriable error: the writer retries it (here
// past franz-go, told not to), under both transaction versions, and the
// transactions commit.
func TestExactlyOnceRetriesInitProducerID(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
	}{{"transaction version 2", nil}, {"transaction version 1", []Option{tv1()}}} {
		t.Run(c.name, func(t *testing.T) {
			const fails = 4
			seeds, failed := failingCluster(t, kmsg.InitProducerID, kerr.CoordinatorNotAvailable, fails)
			logs := &testutil.LogRecorder{}
			s := eosSink(t, seeds, "retry", append(c.opts, noClientRetries, Logger(slog.New(logs)))...)
			w, cm := writerAndCommitter(t, s)
			ctx := testutil.Context(t, 0)
			for cp := int64(1); cp <= 2; cp++ {
				writeAll(t, w, fmt.Sprint("v", cp))
				if err := cm.Commit(ctx, cp, [][]byte{prepare(t, w, cp)}); err != nil {
					t.Fatal(err)
				}
			}
			if failed.Load() != fails {
				t.Fatalf("the cluster failed %d InitProducerId requests, want %d", failed.Load(), fails)
			}
			if got := readAll(t, seeds, "out", kgo.ReadCommitted(), 2); fmt.Sprint(got) != "[v1 v2]" {
				t.Fatalf("read_committed sees %v, want [v1 v2]", got)
			}
			retrying := logs.Matching(func(r testutil.LogRecord) bool { return r.Message == "kafka: call failed, retrying" })
			if len(retrying) != 1 || retrying[0].Attrs["call"] != "InitProducerId for transactional id retry-0-0" ||
				retrying[0].Attrs["cause"] != "COORDINATOR_NOT_AVAILABLE" || !strings.HasPrefix(retrying[0].Attrs["broker"], "broker ") {
				t.Fatalf("INFO lines about the retries: %v, want one naming the call, the broker and the cause", retrying)
			}
		})
	}
}

// A coordinator that never comes back: the writer gives up when the
// transaction timeout is spent, and the error says which call, which
// broker, how often and what was retried.
func TestExactlyOnceInitProducerIDGivesUpWithTheStory(t *testing.T) {
	seeds, _ := failingCluster(t, kmsg.InitProducerID, kerr.NotCoordinator, -1)
	s := eosSink(t, seeds, "down", noClientRetries, TransactionTimeout(time.Second), Logger(slog.New(slog.DiscardHandler)))
	w, err := s.NewWriter(wctx(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	err = w.Write("v", 0)
	if err == nil {
		t.Fatal("Write succeeded with a coordinator that never answers InitProducerId")
	}
	for _, want := range []string{"kafka sink subtask 1: InitProducerId for transactional id down-1-0 (broker ", "): gave up after ",
		"because its time ran out (1s (the sink's transaction timeout))", "(retried: NOT_COORDINATOR ×"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !errors.Is(err, kerr.NotCoordinator) {
		t.Errorf("error %v does not wrap NOT_COORDINATOR", err)
	}
	t.Logf("the error: %v", err)
}

// The raw EndTxn that resumes a prepared transaction retries a
// coordinator still loading it, and gives up only when its time is
// spent, naming the call, the broker and what was retried.
func TestExactlyOnceCommitRetriesEndTxn(t *testing.T) {
	seeds, failed := failingCluster(t, kmsg.EndTxn, kerr.CoordinatorLoadInProgress, 3)
	s := eosSink(t, seeds, "commit", tv1(), noClientRetries, Logger(slog.New(slog.DiscardHandler)), CommitRetryBackoff(time.Millisecond, 10*time.Millisecond))
	w, cm := writerAndCommitter(t, s)
	writeAll(t, w, "v1")
	if err := cm.Commit(testutil.Context(t, 0), 1, [][]byte{prepare(t, w, 1)}); err != nil {
		t.Fatalf("commit through %d failures: %v", failed.Load(), err)
	}
	if failed.Load() != 3 {
		t.Fatalf("%d EndTxn failures answered, want 3", failed.Load())
	}

	seeds, _ = failingCluster(t, kmsg.EndTxn, kerr.CoordinatorLoadInProgress, -1)
	s = eosSink(t, seeds, "commit", tv1(), noClientRetries, Logger(slog.New(slog.DiscardHandler)), CommitRetryBackoff(time.Millisecond, 10*time.Millisecond))
	w, cm = writerAndCommitter(t, s)
	writeAll(t, w, "v1")
	ctx, cancel := context.WithTimeout(testutil.Context(t, 0), 300*time.Millisecond)
	defer cancel()
	err := cm.Commit(ctx, 1, [][]byte{prepare(t, w, 1)})
	if !errors.Is(err, ErrCommitFailed) || !errors.Is(err, kerr.CoordinatorLoadInProgress) {
		t.Fatalf("commit with a coordinator loading for ever: %v, want ErrCommitFailed wrapping COORDINATOR_LOAD_IN_PROGRESS", err)
	}
	for _, want := range []string{"EndTxn(commit) of transactional id commit-0-0 (broker ", "gave up after", "(retried: COORDINATOR_LOAD_IN_PROGRESS ×"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A writer closed after its task was cancelled (a failover) leaves its
// open transaction to the next start without a word above DEBUG: a
// failover is no reason for a warning per writer.
func TestExactlyOnceCloseAfterCancelIsQuiet(t *testing.T) {
	seeds := cluster(t, 1, "out")
	logs := &testutil.LogRecorder{}
	s := eosSink(t, seeds, "quiet")
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.NewWriter(sink.WriterContext{Context: ctx, Subtask: 0, Parallelism: 1, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, "open")
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if loud := logs.Matching(func(r testutil.LogRecord) bool { return r.Level > slog.LevelInfo }); len(loud) > 0 {
		t.Fatalf("a close after a cancellation logged %v", loud)
	}
	left := logs.Matching(func(r testutil.LogRecord) bool { return strings.Contains(r.Message, "left the open transaction") })
	if len(left) != 1 {
		t.Fatalf("lines about the open transaction left: %v, want one at DEBUG", left)
	}
}

// A commit through the writer's own client (transaction version 2) is
// proof only when that client's epoch moved by exactly the one bump of
// its EndTxn. franz-go re-initialises a producer whose id it marked for
// reloading before it ends the transaction: InitProducerId bumps the
// epoch and aborts the open transaction, and the EndTxn then "commits" an
// empty one, a second bump. Here the broker's first answer to the
// writer's client claims that double bump without committing anything:
// the committer must not count it, and commits from the committable.
func TestExactlyOnceCommitDoesNotTrustADoubleEpochBump(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var faked atomic.Int32
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || faked.Add(1) > 1 {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.Version = r.Version
		resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch+2
		return resp, nil, true
	})
	seeds := c.ListenAddrs()
	s := eosSink(t, seeds, "double", Logger(slog.New(slog.DiscardHandler)))
	w, cm := writerAndCommitter(t, s)
	writeAll(t, w, "a")
	cs := prepare(t, w, 1)
	if tv := committable(t, cs).TransactionVersion; tv != 2 {
		t.Fatalf("transaction version %d, want 2 (the commit through the writer's client)", tv)
	}
	if err := cm.Commit(testutil.Context(t, 0), 1, [][]byte{cs}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if faked.Load() < 2 {
		t.Fatalf("%d EndTxn(commit) requests, want the faked one and the committer's own", faked.Load())
	}
	if lso, end := stableOffsets(t, seeds, "out"); lso[0] != end[0] {
		t.Fatalf("after the commit: last stable offset %d, end %d; want the transaction committed", lso[0], end[0])
	}
	if got := readAll(t, seeds, "out", kgo.ReadCommitted(), 1); fmt.Sprint(got) != "[a]" {
		t.Fatalf("read_committed sees %v, want [a]", got)
	}
}
