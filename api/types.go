package api

// The JSON shapes of the API: Flink's REST response bodies, with Flink's
// field names (snake_case for checkpoints, Flink's hyphenated names for
// jobs and vertices). Times are unix milliseconds, durations milliseconds,
// sizes bytes; -1 stands for "not yet", as in Flink.

// JobIDWithStatus is an entry of GET /jobs.
type JobIDWithStatus struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// JobIDsWithStatusOverview is the body of GET /jobs.
type JobIDsWithStatusOverview struct {
	Jobs []JobIDWithStatus `json:"jobs"`
}

// JobDetails is an entry of GET /jobs/overview.
type JobDetails struct {
	JID              string         `json:"jid"`
	Name             string         `json:"name"`
	State            string         `json:"state"`
	StartTime        int64          `json:"start-time"`
	EndTime          int64          `json:"end-time"`
	Duration         int64          `json:"duration"`
	LastModification int64          `json:"last-modification"`
	Tasks            map[string]int `json:"tasks"`
}

// MultipleJobsDetails is the body of GET /jobs/overview.
type MultipleJobsDetails struct {
	Jobs []JobDetails `json:"jobs"`
}

// JobDetailsInfo is the body of GET /jobs/:jobid.
type JobDetailsInfo struct {
	JID            string           `json:"jid"`
	Name           string           `json:"name"`
	IsStoppable    bool             `json:"isStoppable"`
	State          string           `json:"state"`
	JobType        string           `json:"job-type"`
	StartTime      int64            `json:"start-time"`
	EndTime        int64            `json:"end-time"`
	Duration       int64            `json:"duration"`
	MaxParallelism int              `json:"maxParallelism"`
	Now            int64            `json:"now"`
	Timestamps     map[string]int64 `json:"timestamps"`
	Vertices       []JobVertexInfo  `json:"vertices"`
	StatusCounts   map[string]int   `json:"status-counts"`
	Plan           JobPlan          `json:"plan"`
	// Failovers are the job's latest outages after failures (Sluice's,
	// not Flink's), oldest first.
	Failovers []FailoverDowntimeInfo `json:"failovers,omitempty"`
}

// FailoverDowntimeInfo is one outage of JobDetailsInfo: when the job
// learned of a failure (unix ms), its cause, and the milliseconds from
// then until the next attempt's tasks ran and until its first completed
// checkpoint (-1: not yet).
type FailoverDowntimeInfo struct {
	Timestamp       int64  `json:"timestamp"`
	Cause           string `json:"cause"`
	RunningAfter    int64  `json:"running-after"`
	CheckpointAfter int64  `json:"checkpoint-after"`
}

// JobVertexInfo is a vertex of JobDetailsInfo.
type JobVertexInfo struct {
	ID             string         `json:"id"`
	Name           string         `json:"name"`
	MaxParallelism int            `json:"maxParallelism"`
	Parallelism    int            `json:"parallelism"`
	Status         string         `json:"status"`
	StartTime      int64          `json:"start-time"`
	EndTime        int64          `json:"end-time"`
	Duration       int64          `json:"duration"`
	Tasks          map[string]int `json:"tasks"`
	Metrics        IOMetricsInfo  `json:"metrics"`
}

// IOMetricsInfo are a vertex's throughput figures, summed over its
// subtasks; the accumulated times are those of its busiest subtask.
type IOMetricsInfo struct {
	ReadBytes                    int64   `json:"read-bytes"`
	ReadBytesComplete            bool    `json:"read-bytes-complete"`
	WriteBytes                   int64   `json:"write-bytes"`
	WriteBytesComplete           bool    `json:"write-bytes-complete"`
	ReadRecords                  int64   `json:"read-records"`
	ReadRecordsComplete          bool    `json:"read-records-complete"`
	WriteRecords                 int64   `json:"write-records"`
	WriteRecordsComplete         bool    `json:"write-records-complete"`
	AccumulatedBackpressuredTime int64   `json:"accumulated-backpressured-time"`
	AccumulatedIdleTime          int64   `json:"accumulated-idle-time"`
	AccumulatedBusyTime          float64 `json:"accumulated-busy-time"`
}

// JobPlan is the dataflow plan of a job (the "plan" of JobDetailsInfo).
type JobPlan struct {
	JID   string     `json:"jid"`
	Name  string     `json:"name"`
	Type  string     `json:"type"`
	Nodes []PlanNode `json:"nodes"`
}

// PlanNode is a vertex of the plan.
type PlanNode struct {
	ID                  string         `json:"id"`
	Parallelism         int            `json:"parallelism"`
	Operator            string         `json:"operator"`
	OperatorStrategy    string         `json:"operator_strategy"`
	Description         string         `json:"description"`
	Inputs              []PlanInput    `json:"inputs,omitempty"`
	OptimizerProperties map[string]any `json:"optimizer_properties"`
}

// PlanInput is an input edge of a plan node.
type PlanInput struct {
	Num          int    `json:"num"`
	ID           string `json:"id"`
	ShipStrategy string `json:"ship_strategy"`
	Exchange     string `json:"exchange"`
}

// CheckpointingStatistics is the body of GET /jobs/:jobid/checkpoints.
type CheckpointingStatistics struct {
	Counts  CheckpointCounts       `json:"counts"`
	Summary CheckpointSummary      `json:"summary"`
	Latest  LatestCheckpoints      `json:"latest"`
	History []CheckpointStatistics `json:"history"`
}

// CheckpointCounts count the checkpoints of the job.
type CheckpointCounts struct {
	Restored   int `json:"restored"`
	Total      int `json:"total"`
	InProgress int `json:"in_progress"`
	Completed  int `json:"completed"`
	Failed     int `json:"failed"`
}

// StatsSummary is Flink's StatsSummaryDto: min, max, average and
// percentiles of a figure.
type StatsSummary struct {
	Min  int64   `json:"min"`
	Max  int64   `json:"max"`
	Avg  int64   `json:"avg"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

// CheckpointSummary summarizes the completed checkpoints.
type CheckpointSummary struct {
	CheckpointedSize  StatsSummary `json:"checkpointed_size"`
	StateSize         StatsSummary `json:"state_size"`
	EndToEndDuration  StatsSummary `json:"end_to_end_duration"`
	AlignmentBuffered StatsSummary `json:"alignment_buffered"`
	ProcessedData     StatsSummary `json:"processed_data"`
	PersistedData     StatsSummary `json:"persisted_data"`
}

// LatestCheckpoints are the latest checkpoint of each outcome.
type LatestCheckpoints struct {
	Completed *CheckpointStatistics `json:"completed"`
	Savepoint *CheckpointStatistics `json:"savepoint"`
	Failed    *CheckpointStatistics `json:"failed"`
	Restored  *RestoredCheckpoint   `json:"restored"`
}

// RestoredCheckpoint says what the job restored from.
type RestoredCheckpoint struct {
	ID               int64  `json:"id"`
	RestoreTimestamp int64  `json:"restore_timestamp"`
	IsSavepoint      bool   `json:"is_savepoint"`
	ExternalPath     string `json:"external_path"`
}

// CheckpointStatistics is one checkpoint: an entry of the history and the
// body of GET /jobs/:jobid/checkpoints/details/:checkpointid. ClassName is
// "completed", "failed" or "in_progress"; completed checkpoints carry
// external_path and discarded, failed ones failure_timestamp and
// failure_message.
type CheckpointStatistics struct {
	ClassName               string                              `json:"className"`
	ID                      int64                               `json:"id"`
	Status                  string                              `json:"status"`
	IsSavepoint             bool                                `json:"is_savepoint"`
	SavepointFormat         *string                             `json:"savepointFormat"`
	TriggerTimestamp        int64                               `json:"trigger_timestamp"`
	LatestAckTimestamp      int64                               `json:"latest_ack_timestamp"`
	CheckpointedSize        int64                               `json:"checkpointed_size"`
	StateSize               int64                               `json:"state_size"`
	EndToEndDuration        int64                               `json:"end_to_end_duration"`
	AlignmentBuffered       int64                               `json:"alignment_buffered"`
	ProcessedData           int64                               `json:"processed_data"`
	PersistedData           int64                               `json:"persisted_data"`
	NumSubtasks             int                                 `json:"num_subtasks"`
	NumAcknowledgedSubtasks int                                 `json:"num_acknowledged_subtasks"`
	CheckpointType          string                              `json:"checkpoint_type"`
	Tasks                   map[string]TaskCheckpointStatistics `json:"tasks"`
	// Phases (a Sluice addition) break a completed checkpoint's time down.
	Phases *CheckpointPhases `json:"phases,omitempty"`
	*CompletedCheckpointFields
	*FailedCheckpointFields
}

// CheckpointPhases break a completed checkpoint's time down along the
// task acknowledging last, in microseconds (the parts are often below a
// millisecond): trigger_to_source_us + barrier_to_last_us + alignment_us +
// sync_us + async_us + ack_us is end_to_end_duration, metadata_us (the
// _metadata write and fsync) and notify_us follow, and completion_us is
// the whole. A Sluice addition to Flink's statistics.
type CheckpointPhases struct {
	LastSubtask     string `json:"last_subtask"`
	TriggerToSource int64  `json:"trigger_to_source_us"`
	BarrierToLast   int64  `json:"barrier_to_last_us"`
	Alignment       int64  `json:"alignment_us"`
	Sync            int64  `json:"sync_us"`
	Async           int64  `json:"async_us"`
	Ack             int64  `json:"ack_us"`
	Metadata        int64  `json:"metadata_us"`
	Notify          int64  `json:"notify_us"`
	Completion      int64  `json:"completion_us"`
}

// CompletedCheckpointFields are what a completed checkpoint adds.
type CompletedCheckpointFields struct {
	ExternalPath string `json:"external_path"`
	Discarded    bool   `json:"discarded"`
}

// FailedCheckpointFields are what a failed checkpoint adds.
type FailedCheckpointFields struct {
	FailureTimestamp int64  `json:"failure_timestamp"`
	FailureMessage   string `json:"failure_message"`
}

// TaskCheckpointStatistics are a vertex's figures for one checkpoint.
type TaskCheckpointStatistics struct {
	ID                      int64  `json:"id"`
	Status                  string `json:"status"`
	LatestAckTimestamp      int64  `json:"latest_ack_timestamp"`
	CheckpointedSize        int64  `json:"checkpointed_size"`
	StateSize               int64  `json:"state_size"`
	EndToEndDuration        int64  `json:"end_to_end_duration"`
	AlignmentBuffered       int64  `json:"alignment_buffered"`
	ProcessedData           int64  `json:"processed_data"`
	PersistedData           int64  `json:"persisted_data"`
	NumSubtasks             int    `json:"num_subtasks"`
	NumAcknowledgedSubtasks int    `json:"num_acknowledged_subtasks"`
}

// TaskCheckpointStatisticsWithSubtaskDetails is the body of
// GET /jobs/:jobid/checkpoints/details/:checkpointid/subtasks/:vertexid.
type TaskCheckpointStatisticsWithSubtaskDetails struct {
	TaskCheckpointStatistics
	Summary  SubtaskCheckpointSummary      `json:"summary"`
	Subtasks []SubtaskCheckpointStatistics `json:"subtasks"`
}

// SubtaskCheckpointSummary summarizes a vertex's acknowledged subtasks.
type SubtaskCheckpointSummary struct {
	CheckpointedSize   StatsSummary               `json:"checkpointed_size"`
	StateSize          StatsSummary               `json:"state_size"`
	EndToEndDuration   StatsSummary               `json:"end_to_end_duration"`
	CheckpointDuration CheckpointDurationSummary  `json:"checkpoint_duration"`
	Alignment          CheckpointAlignmentSummary `json:"alignment"`
	StartDelay         StatsSummary               `json:"start_delay"`
}

// CheckpointDurationSummary summarizes the synchronous and asynchronous
// parts.
type CheckpointDurationSummary struct {
	Sync  StatsSummary `json:"sync"`
	Async StatsSummary `json:"async"`
}

// CheckpointAlignmentSummary summarizes the alignments.
type CheckpointAlignmentSummary struct {
	Buffered  StatsSummary `json:"buffered"`
	Processed StatsSummary `json:"processed"`
	Persisted StatsSummary `json:"persisted"`
	Duration  StatsSummary `json:"duration"`
}

// SubtaskCheckpointStatistics is one subtask's part in a checkpoint.
// Status is "completed" (with the figures) or "pending_or_failed".
type SubtaskCheckpointStatistics struct {
	Index  int    `json:"index"`
	Status string `json:"status"`
	*CompletedSubtaskFields
}

// CompletedSubtaskFields are the figures of a subtask that acknowledged.
type CompletedSubtaskFields struct {
	AckTimestamp        int64               `json:"ack_timestamp"`
	EndToEndDuration    int64               `json:"end_to_end_duration"`
	StateSize           int64               `json:"state_size"`
	CheckpointedSize    int64               `json:"checkpointed_size"`
	Checkpoint          CheckpointDuration  `json:"checkpoint"`
	Alignment           CheckpointAlignment `json:"alignment"`
	StartDelay          int64               `json:"start_delay"`
	UnalignedCheckpoint bool                `json:"unaligned_checkpoint"`
	Aborted             bool                `json:"aborted"`
}

// CheckpointDuration is the length of a subtask's two snapshot parts.
type CheckpointDuration struct {
	Sync  int64 `json:"sync"`
	Async int64 `json:"async"`
}

// CheckpointAlignment is a subtask's alignment: bytes buffered (always 0,
// as in Flink since 1.11), processed and persisted during it, and its
// duration.
type CheckpointAlignment struct {
	Buffered  int64 `json:"buffered"`
	Processed int64 `json:"processed"`
	Persisted int64 `json:"persisted"`
	Duration  int64 `json:"duration"`
}

// CheckpointConfigInfo is the body of GET /jobs/:jobid/checkpoints/config.
type CheckpointConfigInfo struct {
	Mode                       string                     `json:"mode"`
	Interval                   int64                      `json:"interval"`
	Timeout                    int64                      `json:"timeout"`
	MinPause                   int64                      `json:"min_pause"`
	MaxConcurrent              int                        `json:"max_concurrent"`
	Externalization            ExternalizedCheckpointInfo `json:"externalization"`
	CheckpointStorage          string                     `json:"checkpoint_storage"`
	UnalignedCheckpoints       bool                       `json:"unaligned_checkpoints"`
	TolerableFailedCheckpoints int                        `json:"tolerable_failed_checkpoints"`
	AlignedCheckpointTimeout   int64                      `json:"aligned_checkpoint_timeout"`
}

// ExternalizedCheckpointInfo says whether completed checkpoints are kept
// when the job ends.
type ExternalizedCheckpointInfo struct {
	Enabled              bool `json:"enabled"`
	DeleteOnCancellation bool `json:"delete_on_cancellation"`
}

// JobVertexBackPressureInfo is the body of
// GET /jobs/:jobid/vertices/:vertexid/backpressure.
type JobVertexBackPressureInfo struct {
	Status            string                    `json:"status"`
	BackpressureLevel string                    `json:"backpressureLevel"`
	EndTimestamp      int64                     `json:"end-timestamp"`
	Subtasks          []SubtaskBackPressureInfo `json:"subtasks"`
}

// SubtaskBackPressureInfo is a subtask's share of time backpressured
// (ratio), idle and busy, measured between samples at least a second of
// task time apart.
type SubtaskBackPressureInfo struct {
	Subtask           int     `json:"subtask"`
	AttemptNumber     int     `json:"attempt-number"`
	BackpressureLevel string  `json:"backpressureLevel"`
	Ratio             float64 `json:"ratio"`
	IdleRatio         float64 `json:"idleRatio"`
	BusyRatio         float64 `json:"busyRatio"`
	// TaskManagerID is the worker that runs the subtask in a job on
	// several hosts (Flink's taskmanager-id); absent in one process.
	TaskManagerID string `json:"taskmanager-id,omitempty"`
}

// SavepointTriggerRequest is the body of POST /jobs/:jobid/savepoints.
type SavepointTriggerRequest struct {
	TargetDirectory string `json:"target-directory,omitempty"`
	CancelJob       bool   `json:"cancel-job,omitempty"`
	TriggerID       string `json:"triggerId,omitempty"`
}

// StopWithSavepointRequest is the body of POST /jobs/:jobid/stop.
type StopWithSavepointRequest struct {
	TargetDirectory string `json:"targetDirectory,omitempty"`
	Drain           bool   `json:"drain,omitempty"`
	TriggerID       string `json:"triggerId,omitempty"`
}

// TriggerResponse answers an asynchronous operation's trigger.
type TriggerResponse struct {
	RequestID string `json:"request-id"`
}

// AsynchronousOperationResult is the body of
// GET /jobs/:jobid/savepoints/:triggerid.
type AsynchronousOperationResult struct {
	Status    QueueStatus    `json:"status"`
	Operation *SavepointInfo `json:"operation,omitempty"`
}

// QueueStatus is IN_PROGRESS or COMPLETED.
type QueueStatus struct {
	ID string `json:"id"`
}

// Operation states.
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
)

// SavepointInfo is the outcome of a savepoint: its location, or the
// failure.
type SavepointInfo struct {
	Location     string        `json:"location,omitempty"`
	FailureCause *FailureCause `json:"failure-cause,omitempty"`
}

// FailureCause describes an error, in the shape of Flink's
// SerializedThrowable.
type FailureCause struct {
	Class               string `json:"class"`
	StackTrace          string `json:"stack-trace"`
	SerializedThrowable string `json:"serialized-throwable"`
}

// ErrorResponse is the body of every error: Flink's {"errors": [...]}.
type ErrorResponse struct {
	Errors []string `json:"errors"`
}

// CheckpointTimeline is the body of GET /jobs/:jobid/checkpoints/timeline,
// a Sluice addition the dashboard charts: the completed and failed
// checkpoints the server has seen, oldest first, as many as it keeps.
type CheckpointTimeline struct {
	Checkpoints []TimelineEntry `json:"checkpoints"`
}

// TimelineEntry is one checkpoint of the timeline.
type TimelineEntry struct {
	ID               int64  `json:"id"`
	Status           string `json:"status"`
	IsSavepoint      bool   `json:"is_savepoint"`
	CheckpointType   string `json:"checkpoint_type"`
	TriggerTimestamp int64  `json:"trigger_timestamp"`
	EndToEndDuration int64  `json:"end_to_end_duration"`
	CheckpointedSize int64  `json:"checkpointed_size"`
	StateSize        int64  `json:"state_size"`
	ProcessedData    int64  `json:"processed_data"`
	PersistedData    int64  `json:"persisted_data"`
}

// DashboardConfiguration is the body of GET /config.
type DashboardConfiguration struct {
	RefreshInterval int64             `json:"refresh-interval"`
	TimezoneName    string            `json:"timezone-name"`
	TimezoneOffset  int64             `json:"timezone-offset"`
	FlinkVersion    string            `json:"flink-version"`
	FlinkRevision   string            `json:"flink-revision"`
	Features        DashboardFeatures `json:"features"`
}

// DashboardFeatures say what the dashboard may do.
type DashboardFeatures struct {
	WebSubmit  bool `json:"web-submit"`
	WebCancel  bool `json:"web-cancel"`
	WebRescale bool `json:"web-rescale"`
	WebHistory bool `json:"web-history"`
}

// ClusterOverviewWithVersion is the body of GET /overview. A process
// running jobs is one task manager (a job on several hosts counts its
// workers); every task of a running job takes one slot and none is free.
type ClusterOverviewWithVersion struct {
	TaskManagers        int    `json:"taskmanagers"`
	SlotsTotal          int    `json:"slots-total"`
	SlotsAvailable      int    `json:"slots-available"`
	SlotsFreeAndBlocked int    `json:"slots-free-and-blocked"`
	TaskManagersBlocked int    `json:"taskmanagers-blocked"`
	JobsRunning         int    `json:"jobs-running"`
	JobsFinished        int    `json:"jobs-finished"`
	JobsCancelled       int    `json:"jobs-cancelled"`
	JobsFailed          int    `json:"jobs-failed"`
	FlinkVersion        string `json:"flink-version"`
	FlinkCommit         string `json:"flink-commit"`
}

// JobVertexDetailsInfo is the body of GET /jobs/:jobid/vertices/:vertexid.
type JobVertexDetailsInfo struct {
	ID             string                               `json:"id"`
	Name           string                               `json:"name"`
	Parallelism    int                                  `json:"parallelism"`
	MaxParallelism int                                  `json:"maxParallelism"`
	Now            int64                                `json:"now"`
	Subtasks       []SubtaskExecutionAttemptDetailsInfo `json:"subtasks"`
}

// SubtaskExecutionAttemptDetailsInfo is one subtask of a vertex: its
// state, attempt, where it runs, its times and throughput, and (Sluice
// additions) its current input and output watermarks, unix milliseconds,
// math.MinInt64 before the first watermark as Flink's Long.MIN_VALUE.
type SubtaskExecutionAttemptDetailsInfo struct {
	Subtask                int           `json:"subtask"`
	Status                 string        `json:"status"`
	Attempt                int           `json:"attempt"`
	Endpoint               string        `json:"endpoint"`
	Host                   string        `json:"host"`
	StartTime              int64         `json:"start-time"`
	EndTime                int64         `json:"end-time"`
	Duration               int64         `json:"duration"`
	Metrics                IOMetricsInfo `json:"metrics"`
	TaskManagerID          string        `json:"taskmanager-id"`
	CurrentInputWatermark  int64         `json:"current-input-watermark"`
	CurrentOutputWatermark int64         `json:"current-output-watermark"`
}

// Metric is an entry of Flink's metric lists (GET
// /jobs/:jobid/vertices/:vertexid/metrics and .../watermarks): an id and,
// when asked for, its value as a string.
type Metric struct {
	ID    string  `json:"id"`
	Value *string `json:"value,omitempty"`
}

// JobExceptionsInfoWithHistory is the body of GET /jobs/:jobid/exceptions:
// the failures that ended attempts of the job, newest first (at most
// runtime.ExceptionHistorySize, or ?maxExceptions). root-exception,
// timestamp, all-exceptions and truncated are the fields Flink 1.x
// deprecated in favour of exceptionHistory, kept for older tools.
type JobExceptionsInfoWithHistory struct {
	RootException    *string             `json:"root-exception"`
	Timestamp        *int64              `json:"timestamp"`
	AllExceptions    []any               `json:"all-exceptions"`
	Truncated        bool                `json:"truncated"`
	ExceptionHistory JobExceptionHistory `json:"exceptionHistory"`
}

// JobExceptionHistory is the exceptionHistory of JobExceptionsInfoWithHistory.
type JobExceptionHistory struct {
	Entries   []RootExceptionInfo `json:"entries"`
	Truncated bool                `json:"truncated"`
}

// RootExceptionInfo is one failure: the error's type and message (Go has
// no stack trace to give: stacktrace holds the error chain's message), when,
// and the task it came from.
type RootExceptionInfo struct {
	ExceptionName        string            `json:"exceptionName"`
	Stacktrace           string            `json:"stacktrace"`
	Timestamp            int64             `json:"timestamp"`
	TaskName             *string           `json:"taskName"`
	Endpoint             *string           `json:"endpoint"`
	TaskManagerID        *string           `json:"taskManagerId"`
	FailureLabels        map[string]string `json:"failureLabels"`
	ConcurrentExceptions []any             `json:"concurrentExceptions"`
}

// CheckpointTriggerRequest is the body of POST /jobs/:jobid/checkpoints:
// checkpointType CONFIGURED (default) or INCREMENTAL takes the configured
// kind, FULL a full checkpoint of an incremental state backend.
type CheckpointTriggerRequest struct {
	CheckpointType string `json:"checkpointType,omitempty"`
	TriggerID      string `json:"triggerId,omitempty"`
}

// CheckpointOperationResult is the body of
// GET /jobs/:jobid/checkpoints/:triggerid.
type CheckpointOperationResult struct {
	Status    QueueStatus     `json:"status"`
	Operation *CheckpointInfo `json:"operation,omitempty"`
}

// CheckpointInfo is the outcome of a triggered checkpoint: its id, or the
// failure. Location (a Sluice addition) is the checkpoint's directory.
type CheckpointInfo struct {
	CheckpointID *int64        `json:"checkpointId,omitempty"`
	Location     string        `json:"location,omitempty"`
	FailureCause *FailureCause `json:"failureCause,omitempty"`
}

// SavepointDisposalRequest is the body of POST /savepoint-disposal.
type SavepointDisposalRequest struct {
	SavepointPath string `json:"savepoint-path"`
}

// DisposalOperationResult is the body of GET /savepoint-disposal/:triggerid.
type DisposalOperationResult struct {
	Status    QueueStatus                `json:"status"`
	Operation *AsynchronousOperationInfo `json:"operation,omitempty"`
}

// AsynchronousOperationInfo is the outcome of an operation that returns
// nothing but its failure.
type AsynchronousOperationInfo struct {
	FailureCause *FailureCause `json:"failure-cause,omitempty"`
}

// HealthStatus is the body of GET /healthz and GET /readyz (Sluice
// additions for probes): "ok" / "ready", or "not ready" with the reason.
type HealthStatus struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// ParallelismBounds are a vertex's parallelism bounds in
// JobVertexResourceRequirements.
type ParallelismBounds struct {
	LowerBound int `json:"lowerBound"`
	UpperBound int `json:"upperBound"`
}

// JobVertexResourceRequirements is one vertex's entry of
// JobResourceRequirements.
type JobVertexResourceRequirements struct {
	Parallelism ParallelismBounds `json:"parallelism"`
}

// JobResourceRequirements is the body of GET and PUT
// /jobs/:jobid/resource-requirements: the bounds by vertex id.
type JobResourceRequirements map[string]JobVertexResourceRequirements
