package tracing_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/tracing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTracer returns a tracer that exports synchronously into memory.
func newTracer(t *testing.T) (*tracing.Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp), exp
}

func attrs(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// checkAttrs compares the attributes of a span with what they must be.
func checkAttrs(t *testing.T, what string, s tracetest.SpanStub, want map[string]any) {
	t.Helper()
	got := attrs(s)
	for k, w := range want {
		v, ok := got[k]
		if !ok {
			t.Errorf("%s: no attribute %q", what, k)
			continue
		}
		if fmt.Sprint(v.AsInterface()) != fmt.Sprint(w) {
			t.Errorf("%s: attribute %s = %v, want %v", what, k, v.AsInterface(), w)
		}
	}
}

// traceCheckpoints runs the test job until it completed three
// checkpoints and checks the trace of each against the statistics the
// listener got.
func traceCheckpoints(t *testing.T, unaligned bool) {
	tr, exp := newTracer(t)
	name := fmt.Sprintf("traced-unaligned-%t", unaligned)
	run := testjob.Start(t, testjob.Options{
		Name: name, Rate: 20000, Interval: 20 * time.Millisecond, Unaligned: unaligned,
		Options: []sluice.Option{sluice.WithCheckpointListener(tr.CheckpointListener(name))},
	})
	completed := run.AwaitCompleted(t, 3)
	run.Job.Cancel()
	_ = run.Wait(t)

	spans := exp.GetSpans()
	byID := map[int64]tracetest.SpanStub{}
	children := map[string][]tracetest.SpanStub{} // by parent span id
	for _, s := range spans {
		switch s.Name {
		case tracing.SpanCheckpoint:
			byID[attrs(s)[tracing.AttrCheckpointID].AsInt64()] = s
		case tracing.SpanSubtask:
			children[s.Parent.SpanID().String()] = append(children[s.Parent.SpanID().String()], s)
		}
	}
	for _, cs := range completed {
		s, ok := byID[cs.ID]
		if !ok {
			t.Fatalf("no Checkpoint span for checkpoint %d; spans: %d", cs.ID, len(spans))
		}
		what := fmt.Sprintf("checkpoint %d", cs.ID)
		wantType := "CHECKPOINT"
		if unaligned {
			wantType = "UNALIGNED_CHECKPOINT"
		}
		checkAttrs(t, what, s, map[string]any{
			tracing.AttrJob: name, tracing.AttrCheckpointStatus: "COMPLETED", tracing.AttrCheckpointType: wantType,
			tracing.AttrIsSavepoint: false, tracing.AttrIsUnaligned: unaligned,
			tracing.AttrCheckpointedSize: cs.CheckpointedSize, tracing.AttrFullSize: cs.StateSize,
			tracing.AttrPersistedData: cs.PersistedData, tracing.AttrProcessedData: cs.ProcessedData,
			tracing.AttrEndToEndDuration: cs.EndToEndDuration.Milliseconds(),
			tracing.AttrNumSubtasks:      4, tracing.AttrNumAcknowledged: 4, tracing.AttrPath: cs.Path,
		})
		if cs.CheckpointedSize <= 0 {
			t.Errorf("%s: checkpointed size %d, want > 0", what, cs.CheckpointedSize)
		}
		if !s.StartTime.Equal(cs.TriggerTime) || !s.EndTime.Equal(cs.EndTime) {
			t.Errorf("%s: span %v..%v, want the trigger and end times %v..%v", what, s.StartTime, s.EndTime, cs.TriggerTime, cs.EndTime)
		}
		if s.Status.Code != codes.Ok {
			t.Errorf("%s: status %v", what, s.Status)
		}
		kids := children[s.SpanContext.SpanID().String()]
		if len(kids) != len(cs.Tasks) || len(kids) != 4 {
			t.Fatalf("%s: %d subtask spans, want one per subtask (%d)", what, len(kids), len(cs.Tasks))
		}
		sort.Slice(kids, func(i, j int) bool {
			a, b := attrs(kids[i]), attrs(kids[j])
			if a[tracing.AttrVertex].AsString() != b[tracing.AttrVertex].AsString() {
				return a[tracing.AttrVertex].AsString() > b[tracing.AttrVertex].AsString()
			}
			return a[tracing.AttrSubtask].AsInt64() < b[tracing.AttrSubtask].AsInt64()
		})
		tasks := append([]checkpoint.TaskStats(nil), cs.Tasks...)
		sort.Slice(tasks, func(i, j int) bool {
			if tasks[i].Vertex != tasks[j].Vertex {
				return tasks[i].Vertex > tasks[j].Vertex
			}
			return tasks[i].Subtask < tasks[j].Subtask
		})
		persisted := int64(0)
		for i, k := range kids {
			ts := tasks[i]
			f := ts.Figures
			kw := fmt.Sprintf("%s subtask %s (%d)", what, ts.Vertex, ts.Subtask)
			if k.SpanContext.TraceID() != s.SpanContext.TraceID() {
				t.Errorf("%s: in another trace", kw)
			}
			checkAttrs(t, kw, k, map[string]any{
				tracing.AttrCheckpointID: cs.ID, tracing.AttrVertex: ts.Vertex, tracing.AttrSubtask: ts.Subtask,
				tracing.AttrAcknowledged: true,
				tracing.AttrStartDelay:   f.StartDelay.Milliseconds(), tracing.AttrAlignmentDuration: f.Alignment.Milliseconds(),
				tracing.AttrSyncDuration: f.Sync.Milliseconds(), tracing.AttrAsyncDuration: f.Async.Milliseconds(),
				tracing.AttrPersistedData: f.PersistedData, tracing.AttrIsUnaligned: f.Unaligned,
				tracing.AttrCheckpointedSize: f.CheckpointedSize, tracing.AttrFullSize: f.StateSize,
			})
			if f.Unaligned != unaligned {
				t.Errorf("%s: the subtask reports unaligned=%t in a run with unaligned=%t", kw, f.Unaligned, unaligned)
			}
			// The start delay is measured by the task against the barrier's
			// timestamp; the span never starts after the acknowledgement.
			wantStart := cs.TriggerTime.Add(f.StartDelay)
			if wantStart.After(ts.AckTime) {
				wantStart = ts.AckTime
			}
			if !k.StartTime.Equal(wantStart) || !k.EndTime.Equal(ts.AckTime) {
				t.Errorf("%s: span %v..%v, want barrier arrival %v .. ack %v", kw, k.StartTime, k.EndTime, wantStart, ts.AckTime)
			}
			persisted += attrs(k)[tracing.AttrPersistedData].AsInt64()
		}
		if persisted != cs.PersistedData {
			t.Errorf("%s: subtask spans persisted %d bytes in all, the checkpoint %d", what, persisted, cs.PersistedData)
		}
		if unaligned != (cs.PersistedData > 0) && !unaligned {
			t.Errorf("%s: an aligned checkpoint persisted %d bytes of in-flight data", what, cs.PersistedData)
		}
	}
}

func TestAlignedCheckpointSpans(t *testing.T)   { traceCheckpoints(t, false) }
func TestUnalignedCheckpointSpans(t *testing.T) { traceCheckpoints(t, true) }

// A failed checkpoint gets an error span, and subtasks that never
// acknowledged get error child spans that end with the checkpoint.
func TestFailedCheckpointSpan(t *testing.T) {
	tr, exp := newTracer(t)
	trigger := time.Now()
	cs := checkpoint.Stats{
		ID: 7, Kind: checkpoint.KindCheckpoint, Status: checkpoint.StatusFailed, TriggerTime: trigger,
		EndTime: trigger.Add(time.Second), NumTasks: 2, NumAcknowledged: 1,
		FailureReason: checkpoint.ReasonExpired, FailureMessage: "too slow",
		Tasks: []checkpoint.TaskStats{
			{Vertex: "a", Subtask: 0, Acknowledged: true, AckTime: trigger.Add(10 * time.Millisecond),
				Figures: checkpoint.TaskFigures{StartDelay: 2 * time.Millisecond}},
			{Vertex: "b", Subtask: 0},
		},
	}
	tr.ObserveCheckpoint("j", cs)
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	for _, s := range spans {
		a := attrs(s)
		switch {
		case s.Name == tracing.SpanCheckpoint:
			checkAttrs(t, "checkpoint", s, map[string]any{tracing.AttrCheckpointStatus: "FAILED",
				tracing.AttrFailureReason: checkpoint.ReasonExpired.String(), tracing.AttrFailureMessage: "too slow"})
			if s.Status.Code != codes.Error {
				t.Errorf("failed checkpoint span status %v", s.Status)
			}
		case a[tracing.AttrVertex].AsString() == "b":
			if s.Status.Code != codes.Error || !s.EndTime.Equal(cs.EndTime) || !s.StartTime.Equal(trigger) {
				t.Errorf("unacknowledged subtask span %v..%v status %v", s.StartTime, s.EndTime, s.Status)
			}
		default:
			if s.Status.Code == codes.Error || !s.EndTime.Equal(trigger.Add(10*time.Millisecond)) ||
				!s.StartTime.Equal(trigger.Add(2*time.Millisecond)) {
				t.Errorf("acknowledged subtask span %v..%v status %v", s.StartTime, s.EndTime, s.Status)
			}
		}
	}
}

// A job restored from a savepoint reports a JobInitialization trace with
// the restore's figures, and JobStart describes the job.
func TestRestoreAndJobStartSpans(t *testing.T) {
	first := testjob.Start(t, testjob.Options{Name: "restored", Rate: 20000, Interval: 20 * time.Millisecond})
	first.AwaitCompleted(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	sp, err := first.Job.StopWithSavepoint(ctx, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(t); err != nil {
		t.Fatal(err)
	}

	tr, exp := newTracer(t)
	restored := make(chan runtime.RestoreInfo, 1)
	second := testjob.Start(t, testjob.Options{Name: "restored", Rate: 20000, Interval: time.Hour,
		Options: []sluice.Option{
			sluice.WithRestoreFrom(sp),
			sluice.WithRestoreListener(tr.RestoreListener("restored")),
			sluice.WithRestoreListener(func(r runtime.RestoreInfo) { restored <- r }),
		}})
	tr.JobStarted(second.Job)
	var info runtime.RestoreInfo
	select {
	case info = <-restored:
	case <-time.After(testjob.SafetyNet):
		t.Fatal("no restore reported")
	}
	var init, state, replay, start *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		switch s.Name {
		case tracing.SpanJobInitialization:
			init = &s
		case tracing.SpanStateRestore:
			state = &s
		case tracing.SpanChannelStateReplay:
			replay = &s
		case tracing.SpanJobStart:
			start = &s
		}
	}
	if init == nil || state == nil || replay == nil || start == nil {
		t.Fatalf("spans: init %v state %v replay %v start %v", init != nil, state != nil, replay != nil, start != nil)
	}
	if info.RestoredSize <= 0 || info.CheckpointID <= 0 || !info.IsSavepoint || filepath.Dir(sp) != info.Path {
		t.Fatalf("restore info %+v: want a savepoint with a size", info)
	}
	checkAttrs(t, "JobInitialization", *init, map[string]any{
		tracing.AttrJob: "restored", tracing.AttrCheckpointID: info.CheckpointID, tracing.AttrIsSavepoint: true,
		tracing.AttrPath: info.Path, tracing.AttrRestoredSize: info.RestoredSize, tracing.AttrFullSize: info.RestoredSize,
		tracing.AttrStateRestoreDuration: info.StateRestore.Milliseconds(),
		tracing.AttrChannelStateReplay:   info.ChannelStateReplay.Milliseconds(),
		tracing.AttrAttempt:              0,
	})
	if !init.StartTime.Equal(info.Start) || !init.EndTime.Equal(info.Start.Add(info.StateRestore+info.ChannelStateReplay)) {
		t.Errorf("JobInitialization %v..%v, restore %+v", init.StartTime, init.EndTime, info)
	}
	for _, c := range []*tracetest.SpanStub{state, replay} {
		if c.Parent.SpanID() != init.SpanContext.SpanID() {
			t.Errorf("%s is not a child of JobInitialization", c.Name)
		}
	}
	if !state.EndTime.Equal(replay.StartTime) || !state.StartTime.Equal(info.Start) {
		t.Errorf("phases %v..%v then %v..%v", state.StartTime, state.EndTime, replay.StartTime, replay.EndTime)
	}
	checkAttrs(t, "JobStart", *start, map[string]any{tracing.AttrJob: "restored", tracing.AttrVertices: 2,
		tracing.AttrTasks: 4, tracing.AttrRestoreFrom: sp, tracing.AttrCheckpointingMode: "EXACTLY_ONCE"})
}
