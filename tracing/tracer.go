package tracing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime"
)

// InstrumentationName names the tracer (the instrumentation scope).
const InstrumentationName = "github.com/sluicehq/sluice/tracing"

// Span names.
const (
	SpanCheckpoint         = "Checkpoint"
	SpanSubtask            = "Subtask"
	SpanJobStart           = "JobStart"
	SpanJobInitialization  = "JobInitialization"
	SpanStateRestore       = "StateRestore"
	SpanChannelStateReplay = "ChannelStateReplay"
)

// Attribute keys, Flink's where Flink's traces have one. Durations are
// integer milliseconds and sizes bytes, as in Flink.
const (
	AttrJob                     = "job"
	AttrCheckpointID            = "checkpointId"
	AttrCheckpointStatus        = "checkpointStatus"
	AttrCheckpointType          = "checkpointType"
	AttrIsSavepoint             = "isSavepoint"
	AttrIsUnaligned             = "isUnaligned"
	AttrCheckpointedSize        = "checkpointedSize"
	AttrFullSize                = "fullSize"
	AttrPersistedData           = "persistedData"
	AttrProcessedData           = "processedData"
	AttrEndToEndDuration        = "endToEndDurationMs"
	AttrNumSubtasks             = "numSubtasks"
	AttrNumAcknowledged         = "numAcknowledgedSubtasks"
	AttrFailureReason           = "failureReason"
	AttrFailureMessage          = "failureMessage"
	AttrPath                    = "externalPath"
	AttrVertex                  = "vertex"
	AttrSubtask                 = "subtask"
	AttrAcknowledged            = "acknowledged"
	AttrStartDelay              = "startDelayMs"
	AttrAlignmentDuration       = "alignmentDurationMs"
	AttrSyncDuration            = "syncDurationMs"
	AttrAsyncDuration           = "asyncDurationMs"
	AttrAttempt                 = "attempt"
	AttrStateRestoreDuration    = "stateRestoreDurationMs"
	AttrChannelStateReplay      = "channelStateReplayDurationMs"
	AttrRestoredSize            = "restoredSize"
	AttrVertices                = "vertices"
	AttrTasks                   = "tasks"
	AttrCheckpointInterval      = "checkpointIntervalMs"
	AttrUnalignedEnabled        = "unalignedCheckpointsEnabled"
	AttrRestoreFrom             = "restoreFrom"
	AttrCheckpointingMode       = "checkpointingMode"
	AttrInitializationStatus    = "initializationStatus"
	initializationStatusSuccess = "COMPLETED"
)

// Job is what JobStarted reads; *runtime.Job (sluice.Job) implements it.
type Job interface {
	Config() runtime.Config
	Graph() *runtime.JobGraph
}

// Tracer makes the spans of jobs. It is safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
}

// New returns a tracer whose spans go to tp; a nil tp makes no spans.
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Tracer{tracer: tp.Tracer(InstrumentationName)}
}

// CheckpointListener returns the listener (for sluice.WithCheckpointListener)
// that traces every checkpoint of the job of that name.
func (t *Tracer) CheckpointListener(job string) func(checkpoint.Stats) {
	return func(cs checkpoint.Stats) { t.ObserveCheckpoint(job, cs) }
}

// RestoreListener returns the listener (for sluice.WithRestoreListener)
// that traces every restore of the job of that name.
func (t *Tracer) RestoreListener(job string) func(runtime.RestoreInfo) {
	return func(r runtime.RestoreInfo) { t.ObserveRestore(job, r) }
}

// CheckpointType is Flink's REST checkpoint type of a checkpoint:
// CHECKPOINT, UNALIGNED_CHECKPOINT, SAVEPOINT or FULL_CHECKPOINT.
func CheckpointType(cs checkpoint.Stats) string {
	switch {
	case cs.Kind == checkpoint.KindSavepoint:
		return "SAVEPOINT"
	case cs.Unaligned:
		return "UNALIGNED_CHECKPOINT"
	case cs.Kind == checkpoint.KindFullCheckpoint:
		return "FULL_CHECKPOINT"
	}
	return "CHECKPOINT"
}

// ObserveCheckpoint records the trace of a checkpoint of the job named
// job that completed or failed:
// a span from its trigger to its end, and a child span per subtask from
// the arrival of the barrier (trigger plus start delay) to the
// acknowledgement; a subtask that never acknowledged gets a span to the
// checkpoint's end, marked as an error.
func (t *Tracer) ObserveCheckpoint(job string, cs checkpoint.Stats) {
	end := cs.EndTime
	if end.IsZero() {
		end = cs.LatestAck
	}
	if end.IsZero() || end.Before(cs.TriggerTime) {
		end = cs.TriggerTime
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrJob, job),
		attribute.Int64(AttrCheckpointID, cs.ID),
		attribute.String(AttrCheckpointStatus, cs.Status.String()),
		attribute.String(AttrCheckpointType, CheckpointType(cs)),
		attribute.Bool(AttrIsSavepoint, cs.Kind == checkpoint.KindSavepoint),
		attribute.Bool(AttrIsUnaligned, cs.Unaligned),
		attribute.Int64(AttrCheckpointedSize, cs.CheckpointedSize),
		attribute.Int64(AttrFullSize, cs.StateSize),
		attribute.Int64(AttrPersistedData, cs.PersistedData),
		attribute.Int64(AttrProcessedData, cs.ProcessedData),
		attribute.Int64(AttrEndToEndDuration, cs.EndToEndDuration.Milliseconds()),
		attribute.Int(AttrNumSubtasks, cs.NumTasks),
		attribute.Int(AttrNumAcknowledged, cs.NumAcknowledged),
	}
	if cs.Path != "" {
		attrs = append(attrs, attribute.String(AttrPath, cs.Path))
	}
	failed := cs.Status == checkpoint.StatusFailed
	if failed {
		attrs = append(attrs, attribute.String(AttrFailureReason, cs.FailureReason.String()),
			attribute.String(AttrFailureMessage, cs.FailureMessage))
	}
	ctx, span := t.tracer.Start(context.Background(), SpanCheckpoint,
		trace.WithTimestamp(cs.TriggerTime), trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal))
	for _, ts := range cs.Tasks {
		t.subtask(ctx, cs, ts, end)
	}
	if failed {
		span.SetStatus(codes.Error, fmt.Sprintf("checkpoint %d failed (%s): %s", cs.ID, cs.FailureReason, cs.FailureMessage))
	} else {
		span.SetStatus(codes.Ok, "")
	}
	span.End(trace.WithTimestamp(end))
}

func (t *Tracer) subtask(ctx context.Context, cs checkpoint.Stats, ts checkpoint.TaskStats, cpEnd time.Time) {
	f := ts.Figures
	start := cs.TriggerTime.Add(f.StartDelay)
	end := cpEnd
	if ts.Acknowledged {
		end = ts.AckTime
	}
	if start.After(end) {
		start = end
	}
	_, span := t.tracer.Start(ctx, SpanSubtask, trace.WithTimestamp(start), trace.WithAttributes(
		attribute.Int64(AttrCheckpointID, cs.ID),
		attribute.String(AttrVertex, ts.Vertex),
		attribute.Int(AttrSubtask, ts.Subtask),
		attribute.Bool(AttrAcknowledged, ts.Acknowledged),
		attribute.Int64(AttrStartDelay, f.StartDelay.Milliseconds()),
		attribute.Int64(AttrAlignmentDuration, f.Alignment.Milliseconds()),
		attribute.Int64(AttrSyncDuration, f.Sync.Milliseconds()),
		attribute.Int64(AttrAsyncDuration, f.Async.Milliseconds()),
		attribute.Int64(AttrPersistedData, f.PersistedData),
		attribute.Int64(AttrProcessedData, f.ProcessedData),
		attribute.Int64(AttrCheckpointedSize, f.CheckpointedSize),
		attribute.Int64(AttrFullSize, f.StateSize),
		attribute.Bool(AttrIsUnaligned, f.Unaligned),
		attribute.Int64(AttrEndToEndDuration, ts.EndToEndDuration.Milliseconds()),
	))
	if !ts.Acknowledged {
		span.SetStatus(codes.Error, fmt.Sprintf("%s (%d) did not acknowledge checkpoint %d", ts.Vertex, ts.Subtask, cs.ID))
	}
	span.End(trace.WithTimestamp(end))
}

// ObserveRestore records the trace of a job attempt's restore: a
// "JobInitialization" span from the start of the restore to the end of
// the channel-state replay, with a child span per phase.
func (t *Tracer) ObserveRestore(job string, r runtime.RestoreInfo) {
	stateEnd := r.Start.Add(r.StateRestore)
	end := stateEnd.Add(r.ChannelStateReplay)
	ctx, span := t.tracer.Start(context.Background(), SpanJobInitialization, trace.WithTimestamp(r.Start), trace.WithAttributes(
		attribute.String(AttrJob, job),
		attribute.String(AttrInitializationStatus, initializationStatusSuccess),
		attribute.Int(AttrAttempt, r.Attempt),
		attribute.Int64(AttrCheckpointID, r.CheckpointID),
		attribute.Bool(AttrIsSavepoint, r.IsSavepoint),
		attribute.String(AttrPath, r.Path),
		attribute.Int64(AttrStateRestoreDuration, r.StateRestore.Milliseconds()),
		attribute.Int64(AttrChannelStateReplay, r.ChannelStateReplay.Milliseconds()),
		attribute.Int64(AttrRestoredSize, r.RestoredSize),
		attribute.Int64(AttrFullSize, r.RestoredSize),
	))
	_, s := t.tracer.Start(ctx, SpanStateRestore, trace.WithTimestamp(r.Start),
		trace.WithAttributes(attribute.Int64(AttrRestoredSize, r.RestoredSize)))
	s.End(trace.WithTimestamp(stateEnd))
	_, s = t.tracer.Start(ctx, SpanChannelStateReplay, trace.WithTimestamp(stateEnd))
	s.End(trace.WithTimestamp(end))
	span.SetStatus(codes.Ok, "")
	span.End(trace.WithTimestamp(end))
}

// JobStarted records a "JobStart" span for a job that has just been
// started: its name, vertices, tasks and checkpoint settings.
func (t *Tracer) JobStarted(j Job) {
	cfg := j.Config()
	tasks := 0
	for _, v := range j.Graph().Vertices {
		tasks += v.Parallelism
	}
	cp := cfg.Checkpoint
	attrs := []attribute.KeyValue{
		attribute.String(AttrJob, cfg.JobName),
		attribute.Int(AttrVertices, len(j.Graph().Vertices)),
		attribute.Int(AttrTasks, tasks),
		attribute.Int64(AttrCheckpointInterval, cp.Interval.Milliseconds()),
		attribute.Bool(AttrUnalignedEnabled, cp.Unaligned),
		attribute.String(AttrCheckpointingMode, cp.Mode.String()),
	}
	if cfg.RestoreFrom != "" {
		attrs = append(attrs, attribute.String(AttrRestoreFrom, cfg.RestoreFrom))
	}
	now := time.Now()
	_, span := t.tracer.Start(context.Background(), SpanJobStart, trace.WithTimestamp(now), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(now))
}

// ObserveJob records the start of a job (sluice.WithObservers calls it).
func (t *Tracer) ObserveJob(j *runtime.Job) { t.JobStarted(j) }
