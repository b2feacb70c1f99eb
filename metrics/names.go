package metrics

import "github.com/prometheus/client_golang/prometheus"

// Label names.
const (
	labelJob     = "job_name"
	labelVertex  = "vertex"
	labelSubtask = "subtask"
	labelStatus  = "status"
)

var (
	jobLabels  = []string{labelJob}
	taskLabels = []string{labelJob, labelVertex, labelSubtask}
)

func jobDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(Prefix+"job_"+name, help, append(append([]string(nil), jobLabels...), extra...), nil)
}

func taskDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(Prefix+"task_"+name, help, taskLabels, nil)
}

// Job scope: Flink's job metrics of the checkpointing and availability
// groups.
var (
	descJobStatus       = jobDesc("status", "1 for the job's current status (CREATED, RUNNING, FINISHED, FAILED, CANCELED, RESTARTING), 0 for the others.", labelStatus)
	descNumRestarts     = jobDesc("numRestarts", "Times the job restarted after a failure.")
	descCompleted       = jobDesc("numberOfCompletedCheckpoints", "Completed checkpoints and savepoints of the current attempt.")
	descFailed          = jobDesc("numberOfFailedCheckpoints", "Failed checkpoints and savepoints of the current attempt.")
	descInProgress      = jobDesc("numberOfInProgressCheckpoints", "Checkpoints in progress.")
	descTotal           = jobDesc("totalNumberOfCheckpoints", "Checkpoints triggered in the current attempt (in progress, completed and failed).")
	descLastDuration    = jobDesc("lastCheckpointDuration", "End-to-end duration of the last completed checkpoint, milliseconds.")
	descLastSize        = jobDesc("lastCheckpointSize", "Bytes written by the last completed checkpoint (incremental size).")
	descLastFullSize    = jobDesc("lastCheckpointFullSize", "Bytes of the whole state the last completed checkpoint references.")
	descLastPersisted   = jobDesc("lastCheckpointPersistedData", "In-flight bytes the last completed checkpoint persisted (unaligned checkpoints).")
	descLastProcessed   = jobDesc("lastCheckpointProcessedData", "Bytes processed during the alignment of the last completed checkpoint.")
	descLastID          = jobDesc("lastCompletedCheckpointId", "Id of the last completed checkpoint or savepoint.")
	descLastRestoreTS   = jobDesc("lastCheckpointRestoreTimestamp", "When the current attempt restored from a checkpoint, unix milliseconds.")
	descRestoredSize    = jobDesc("lastRestoredStateSize", "Bytes of state the last restore read.")
	descRestoreDuration = jobDesc("lastRestoreDuration", "Time the last restore took (state restore and channel-state replay), milliseconds.")
	descDowntime        = jobDesc("downtime", "The current outage after a failure (until the next attempt's tasks run), milliseconds; 0 while the job runs.")
	descFailoverDown    = jobDesc("lastFailoverDowntime", "The latest failure's outage, from the job learning of it to the next attempt's first completed checkpoint, milliseconds.")
)

// The autoscaler's (job.autoscaler.enabled), per vertex from its latest
// evaluation over a full metrics window (Flink's autoscaler metrics), and
// the rescales it asked for.
var (
	descASRecommended = jobDesc("autoscalerRecommendedParallelism", "The parallelism the autoscaler's latest evaluation calls for.", labelVertex)
	descASTrueRate    = jobDesc("autoscalerTrueProcessingRate", "The records per second the vertex would process at when always busy, over the autoscaler's metrics window.", labelVertex)
	descASTargetRate  = jobDesc("autoscalerTargetDataRate", "The records per second the vertex should take in, as the autoscaler's latest evaluation has it.", labelVertex)
	descASLag         = jobDesc("autoscalerLag", "A source's backlog in records (Kafka pendingRecords), as the autoscaler's latest evaluation has it; -1: unknown.", labelVertex)
	descASRescales    = jobDesc("autoscalerRescales", "Rescales the autoscaler asked for.")
)

// Task scope: Flink's task I/O and backpressure metrics, and the
// checkpoint figures of the last completed checkpoint.
var (
	descRecordsIn  = taskDesc("numRecordsIn", "Records the task received over the network.")
	descRecordsOut = taskDesc("numRecordsOut", "Records the task sent over the network.")
	descBytesIn    = taskDesc("numBytesIn", "Bytes the task received over the network.")
	descBytesOut   = taskDesc("numBytesOut", "Bytes the task sent over the network.")
	descBusyPerSec = taskDesc("busyTimeMsPerSecond", "Milliseconds per second the task was busy, between the last two scrapes.")
	descIdlePerSec = taskDesc("idleTimeMsPerSecond", "Milliseconds per second the task waited for input, between the last two scrapes.")
	descBPPerSec   = taskDesc("backPressuredTimeMsPerSecond", "Milliseconds per second the task waited for an output buffer, between the last two scrapes.")
	descAccBusy    = taskDesc("accumulatedBusyTime", "Milliseconds the task was busy since it started.")
	descAccIdle    = taskDesc("accumulatedIdleTime", "Milliseconds the task waited for input since it started.")
	descAccBP      = taskDesc("accumulatedBackPressuredTime", "Milliseconds the task waited for an output buffer since it started.")
	descAlignment  = taskDesc("checkpointAlignmentTime", "Barrier alignment time of the task in the last completed checkpoint, nanoseconds.")
	descStartDelay = taskDesc("checkpointStartDelayNanos", "Time from the trigger to the first barrier at the task in the last completed checkpoint, nanoseconds.")
	descInputWM    = taskDesc("currentInputWatermark", "The task's input watermark (the minimum over its active inputs; a source's own), unix milliseconds; -9223372036854775808 before the first, as Flink.")
	descOutputWM   = taskDesc("currentOutputWatermark", "The latest watermark the task sent downstream (a task with nothing downstream: its input watermark), unix milliseconds; -9223372036854775808 before the first.")
)

var allDescs = []*prometheus.Desc{
	descJobStatus, descNumRestarts, descCompleted, descFailed, descInProgress, descTotal,
	descLastDuration, descLastSize, descLastFullSize, descLastPersisted, descLastProcessed, descLastID,
	descLastRestoreTS, descRestoredSize, descRestoreDuration, descDowntime, descFailoverDown,
	descRecordsIn, descRecordsOut, descBytesIn, descBytesOut, descBusyPerSec, descIdlePerSec, descBPPerSec,
	descAccBusy, descAccIdle, descAccBP, descAlignment, descStartDelay,
	descInputWM, descOutputWM,
	descASRecommended, descASTrueRate, descASTargetRate, descASLag, descASRescales,
}
