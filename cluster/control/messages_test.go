package control

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime"
)

// Values that fill every field, extremes where they could be cut short
// (int64 through JSON).
func fullHandle(path string) storage.StateHandle {
	return storage.StateHandle{Path: path, Shared: true, Size: math.MaxInt64 - 7, CRC32C: 0xdeadbeef, Inline: []byte{9, 8, 0xff}, DurableAt: math.MaxInt64 - 11}
}

func fullSubtask() storage.SubtaskState {
	h := fullHandle("000042.sst")
	return storage.SubtaskState{
		OperatorUID: "count-per-user", Subtask: 3, Parallelism: 4, MaxParallelism: 128, Finished: true,
		OperatorState: []storage.OperatorStateHandle{{Name: "positions", Distribution: storage.DistributeUnion, Handle: fullHandle("op-0"), Offsets: []int64{1, math.MaxInt64}}},
		KeyedState: []storage.KeyedStateHandle{{
			KeyGroups: storage.KeyGroupRange{Start: 32, End: 63}, Backend: "rocksdb",
			Handle: &h, KeyGroupOffsets: []int64{5, 6},
			Files: []storage.NamedHandle{{Name: "000042.sst", Handle: fullHandle("shared-1")}},
		}},
		InputChannelState:  []storage.ChannelStateHandle{{Gate: 1, Channel: 2, Handle: fullHandle("in-0"), Offset: 3, Length: 4}},
		OutputChannelState: []storage.ChannelStateHandle{{Gate: 5, Channel: 6, Handle: fullHandle("out-0"), Offset: 7, Length: 8}},
		Committables:       [][]byte{{1, 2, 3}, {0xfe}}, CommittableKind: "kafka-transaction",
		Figures: &storage.Figures{StartDelayMillis: 1, AlignmentMillis: 2, SyncMillis: 3, AsyncMillis: 4,
			ProcessedData: 5, PersistedData: 6, CheckpointedSize: 7, StateSize: math.MaxInt64, Unaligned: true},
	}
}

func fullTrigger(attempt int, id int64) runtime.TriggerCheckpoint {
	return runtime.TriggerCheckpoint{
		To: ref(attempt, 5),
		Barrier: checkpoint.Barrier{ID: id, Timestamp: 1_764_633_600_123, SubMillis: 456_789, Options: checkpoint.Options{
			Kind: checkpoint.KindFullCheckpoint, Alignment: checkpoint.AlignedWithTimeout, AlignedTimeout: 1500 * time.Millisecond}},
		Urgent: true, Stop: true,
	}
}

func fullAck(attempt int, id int64) runtime.AcknowledgeCheckpoint {
	return runtime.AcknowledgeCheckpoint{
		From: ref(attempt, 5), CheckpointID: id,
		States: []storage.SubtaskState{fullSubtask(), fullSubtask()},
		Figures: checkpoint.TaskFigures{StartDelay: time.Nanosecond, Alignment: time.Millisecond, Sync: time.Second, Async: time.Hour, ChannelStateWait: time.Minute,
			ProcessedData: 1, PersistedData: 2, CheckpointedSize: 3, StateSize: math.MaxInt64, Unaligned: true, EarlyInput: true},
	}
}

func TestGatewayMessagesRoundTrip(t *testing.T) {
	s, coord, _ := newServer(t, nil)
	c, worker, _ := dial(t, s, "w1", nil)
	coord.await(t, "the registration", 1)
	deploy(t, s, "w1", 3, 5)
	worker.await(t, "the deployment", 1)

	// Coordinator -> worker.
	trigger := fullTrigger(3, math.MaxInt64-1)
	notify := runtime.CheckpointNotification{To: ref(3, 5), CheckpointID: math.MaxInt64 - 2, Complete: true}
	finish := ref(3, 5)
	requireAllSet(t, "TriggerCheckpoint", trigger)
	requireAllSet(t, "CheckpointNotification", notify)
	requireAllSet(t, "TaskRef", finish)
	tg := s.TaskGateway(func(checkpoint.TaskID) string { return "w1" })
	stopper, ok := tg.(runtime.TaskStopper)
	if !ok {
		t.Fatal("the task gateway is not a runtime.TaskStopper")
	}
	for _, err := range []error{
		tg.TriggerCheckpoint(trigger),
		tg.NotifyCheckpoint(notify),
		tg.AllowFinish(finish),
		stopper.StopTask(finish),
		stopper.DrainEventTime(finish),
		s.SetSavepointDir(12, "s3://bucket/savepoints/savepoint-1"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := []any{trigger, notify, finish, stopEvent{finish}, drainEvent{finish}, savepointEvent{12, "s3://bucket/savepoints/savepoint-1"}}
	if got := worker.await(t, "the coordinator's messages", 1+len(want))[1:]; !reflect.DeepEqual(got, want) {
		t.Errorf("worker received\n%#v\nwant\n%#v", got, want)
	}

	// Worker -> coordinator.
	ack := fullAck(3, math.MaxInt64-3)
	requireAllSet(t, "AcknowledgeCheckpoint", ack)
	decline := runtime.DeclineCheckpoint{From: ref(3, 5), CheckpointID: 99, Reason: checkpoint.ReasonAsyncFailure,
		Err: fmt.Errorf("write state of checkpoint 99: %w", &suppressErr{"disk full"})}
	requireAllSet(t, "DeclineCheckpoint", decline)
	failed := runtime.TaskEvent{From: ref(3, 5), Kind: runtime.ReportFailed, Err: fmt.Errorf("task 5: %w", &suppressErr{"transaction lost"})}
	requireAllSet(t, "TaskEvent", failed)
	plain := runtime.TaskEvent{From: ref(3, 5), Kind: runtime.ReportFailed, Err: errors.New("boom: a restart may help")}
	finished := runtime.TaskEvent{From: ref(3, 5), Kind: runtime.ReportFinished}
	endOfInput := runtime.TaskEvent{From: ref(3, 5), Kind: runtime.ReportEndOfInput}
	cg := c.CoordinatorGateway()
	for _, err := range []error{cg.Acknowledge(ack), cg.Decline(decline), cg.Report(failed), cg.Report(plain), cg.Report(endOfInput), cg.Report(finished)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	ev := coord.await(t, "the worker's messages", 7)[1:]
	if !reflect.DeepEqual(ev[0], ack) {
		t.Errorf("coordinator received\n%#v\nwant\n%#v", ev[0], ack)
	}
	if got, ok := ev[1].(runtime.DeclineCheckpoint); !ok {
		t.Errorf("second message %#v, want the decline", ev[1])
	} else {
		sameError(t, "decline", got.Err, decline.Err)
		got.Err, decline.Err = nil, nil
		if got != decline {
			t.Errorf("decline %#v, want %#v", got, decline)
		}
	}
	for i, want := range []runtime.TaskEvent{failed, plain, endOfInput, finished} {
		got, ok := ev[2+i].(runtime.TaskEvent)
		if !ok {
			t.Errorf("message %d: %#v, want %#v", 2+i, ev[2+i], want)
			continue
		}
		sameError(t, fmt.Sprintf("task event %d", i), got.Err, want.Err)
		got.Err, want.Err = nil, nil
		if got != want {
			t.Errorf("task event %#v, want %#v", got, want)
		}
	}
}

// The checkpoint protocol relies on each side's messages arriving in the
// order sent: acknowledgements before finished, a trigger before its
// notification.
func TestMessagesInOrder(t *testing.T) {
	const n = 300
	s, coord, _ := newServer(t, nil)
	c, worker, _ := dial(t, s, "w1", nil)
	coord.await(t, "the registration", 1)
	deploy(t, s, "w1", 1, 0, 1)
	worker.await(t, "the deployment", 1)

	tg := s.TaskGateway(nil)
	cg := c.CoordinatorGateway()
	done := make(chan error, 2)
	go func() {
		for i := range int64(n) {
			if err := tg.TriggerCheckpoint(runtime.TriggerCheckpoint{To: ref(1, 0), Barrier: checkpoint.Barrier{ID: i}}); err != nil {
				done <- err
				return
			}
			if err := tg.NotifyCheckpoint(runtime.CheckpointNotification{To: ref(1, 1), CheckpointID: i, Complete: true}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	go func() {
		for i := range int64(n) {
			if err := cg.Acknowledge(fullAck(1, i)); err != nil {
				done <- err
				return
			}
		}
		done <- cg.Report(runtime.TaskEvent{From: ref(1, 5), Kind: runtime.ReportFinished})
	}()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	got := worker.await(t, "every trigger and notification", 1+2*n)[1:]
	for i := range int64(n) {
		tr, ok1 := got[2*i].(runtime.TriggerCheckpoint)
		no, ok2 := got[2*i+1].(runtime.CheckpointNotification)
		if !ok1 || !ok2 || tr.Barrier.ID != i || no.CheckpointID != i {
			t.Fatalf("worker messages %d, %d: %#v, %#v; want trigger then notification of %d", 2*i, 2*i+1, got[2*i], got[2*i+1], i)
		}
	}
	ev := coord.await(t, "every acknowledgement and the finish", 2+n)[1:]
	for i := range int64(n) {
		if a, ok := ev[i].(runtime.AcknowledgeCheckpoint); !ok || a.CheckpointID != i {
			t.Fatalf("coordinator message %d: %#v, want ack of %d", i, ev[i], i)
		}
	}
	if e, ok := ev[n].(runtime.TaskEvent); !ok || e.Kind != runtime.ReportFinished {
		t.Errorf("last message %#v, want finished after every ack", ev[n])
	}
}

// queryWorker is a worker that answers queries: the key back as the
// value, or for the name "gone" that its task is unavailable.
type queryWorker struct{ workerRecorder }

func (q *queryWorker) QueryState(_ context.Context, attempt int, task checkpoint.TaskID, name string, key []byte) ([]byte, bool, error) {
	if name == "gone" {
		return nil, false, fmt.Errorf("task %d: %w", task, runtime.ErrQueryUnavailable)
	}
	return fmt.Appendf(nil, `{"attempt":%d,"task":%d,"key":%q}`, attempt, task, key), true, nil
}

// TestQueryRoundTrip: a query goes to the worker the placement names for
// its task and comes back with its answer; an error keeps its sentinel
// across the wire; a worker that answers no queries, and a task of no
// deployed attempt, are unavailable.
func TestQueryRoundTrip(t *testing.T) {
	s, coord, _ := newServer(t, nil)
	log, _ := testLogger(t)
	c, err := Dial(testutil.Context(t, 0), ClientConfig{CoordinatorAddr: s.Addr(), WorkerID: "w1", Slots: 4, DataAddr: "10.0.0.9:7000",
		Fingerprint: testFingerprint, Host: "host-w1", Logger: log}, &queryWorker{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, _ = dial(t, s, "w2", nil)
	coord.await(t, "the registrations", 2)
	ctx := context.Background()
	if _, _, err := s.QueryState(ctx, 3, 0, "count", []byte("k")); !errors.Is(err, runtime.ErrQueryUnavailable) {
		t.Fatalf("a query before any deployment: %v", err)
	}
	// Task 0 on w1, task 1 on w2.
	for _, w := range []string{"w1", "w2"} {
		if err := s.Deploy(ctx, w, Deployment{Attempt: 3, Tasks: nil, Placement: []string{"w1", "w2"}}); err != nil {
			t.Fatal(err)
		}
	}
	v, found, err := s.QueryState(ctx, 3, 0, "count", []byte("k7"))
	if err != nil || !found || string(v) != `{"attempt":3,"task":0,"key":"k7"}` {
		t.Fatalf("query: %s %v %v", v, found, err)
	}
	if _, _, err := s.QueryState(ctx, 3, 0, "gone", []byte("k")); !errors.Is(err, runtime.ErrQueryUnavailable) {
		t.Fatalf("an unavailable task: %v, want ErrQueryUnavailable across the wire", err)
	}
	if _, _, err := s.QueryState(ctx, 3, 1, "count", []byte("k")); !errors.Is(err, runtime.ErrQueryUnavailable) {
		t.Fatalf("a worker that answers no queries: %v", err)
	}
	if _, _, err := s.QueryState(ctx, 2, 0, "count", []byte("k")); !errors.Is(err, runtime.ErrQueryUnavailable) {
		t.Fatalf("a query of an older attempt: %v", err)
	}
}
