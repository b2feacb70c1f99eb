package metrics

import (
	"encoding/hex"
	"hash/fnv"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/runtime"
)

// WithFlinkNames makes the collector export its metrics with the names
// and labels of Flink's Prometheus reporter, so that dashboards made for
// Flink work (metrics.reporter.prom.naming: flink in the job runner):
//
//	flink_jobmanager_job_numberOfCompletedCheckpoints{job_id,job_name}
//	flink_jobmanager_job_runningState{job_id,job_name}            1 while RUNNING (one gauge per status)
//	flink_taskmanager_job_task_busyTimeMsPerSecond{job_id,job_name,task_id,task_name,subtask_index}
//	flink_taskmanager_job_task_operator_numRecordsIn{...,operator_id,operator_name}
//	flink_taskmanager_job_task_operator_kafka_source_currentOffset{...,topic,partition}
//
// Scopes as Flink's: the job's checkpoint and restart figures under
// jobmanager_job, a task's I/O and time figures under
// taskmanager_job_task, and again under taskmanager_job_task_operator
// for numRecordsIn, numRecordsOut, the watermarks and the connectors'
// figures. A Sluice
// task is a chain of operators, Flink's task: task_name and
// operator_name are its vertex name. job_id, task_id and operator_id
// are 32 hex digits derived from the names (stable across restarts, as
// a named Flink job's are not). The checkpoint duration histogram keeps
// its name (sluice_job_checkpoint_duration_seconds), which Flink has no
// counterpart for, and so do the user metrics (sluice_user_*).
func WithFlinkNames() Option { return func(c *collectorConfig) { c.flink = true } }

// Flink's label names.
const (
	flinkJobID     = "job_id"
	flinkJobName   = "job_name"
	flinkTaskID    = "task_id"
	flinkTaskName  = "task_name"
	flinkSubtask   = "subtask_index"
	flinkOpID      = "operator_id"
	flinkOpName    = "operator_name"
	flinkJobPrefix = "flink_jobmanager_job_"
	flinkTask      = "flink_taskmanager_job_task_"
	flinkOperator  = "flink_taskmanager_job_task_operator_"
)

var (
	flinkJobLabels  = []string{flinkJobID, flinkJobName}
	flinkTaskLabels = []string{flinkJobID, flinkJobName, flinkTaskID, flinkTaskName, flinkSubtask}
	flinkOpLabels   = []string{flinkJobID, flinkJobName, flinkTaskID, flinkTaskName, flinkSubtask, flinkOpID, flinkOpName}
)

// flinkDesc is the Flink-named counterpart of one of Sluice's descriptors.
type flinkDesc struct {
	task     *prometheus.Desc // task or job scope
	operator *prometheus.Desc // also at operator scope; nil if not
	job      bool
}

// flinkDescs maps Sluice's descriptors to Flink's (the job status is
// apart: one gauge per status).
var flinkDescs = func() map[*prometheus.Desc]flinkDesc {
	m := map[*prometheus.Desc]flinkDesc{}
	job := func(d *prometheus.Desc, name, help string) {
		m[d] = flinkDesc{task: prometheus.NewDesc(flinkJobPrefix+name, help, flinkJobLabels, nil), job: true}
	}
	task := func(d *prometheus.Desc, name, help string, operator bool) {
		fd := flinkDesc{task: prometheus.NewDesc(flinkTask+name, help, flinkTaskLabels, nil)}
		if operator {
			fd.operator = prometheus.NewDesc(flinkOperator+name, help, flinkOpLabels, nil)
		}
		m[d] = fd
	}
	job(descNumRestarts, "numRestarts", "Times the job restarted after a failure.")
	job(descCompleted, "numberOfCompletedCheckpoints", "Completed checkpoints and savepoints of the current attempt.")
	job(descFailed, "numberOfFailedCheckpoints", "Failed checkpoints and savepoints of the current attempt.")
	job(descInProgress, "numberOfInProgressCheckpoints", "Checkpoints in progress.")
	job(descTotal, "totalNumberOfCheckpoints", "Checkpoints triggered in the current attempt.")
	job(descLastDuration, "lastCheckpointDuration", "End-to-end duration of the last completed checkpoint, milliseconds.")
	job(descLastSize, "lastCheckpointSize", "Bytes written by the last completed checkpoint.")
	job(descLastFullSize, "lastCheckpointFullSize", "Bytes of the whole state the last completed checkpoint references.")
	job(descLastPersisted, "lastCheckpointPersistedData", "In-flight bytes the last completed checkpoint persisted.")
	job(descLastProcessed, "lastCheckpointProcessedData", "Bytes processed during the alignment of the last completed checkpoint.")
	job(descLastID, "lastCompletedCheckpointId", "Id of the last completed checkpoint or savepoint.")
	job(descLastRestoreTS, "lastCheckpointRestoreTimestamp", "When the current attempt restored from a checkpoint, unix milliseconds.")
	job(descRestoredSize, "lastRestoredStateSize", "Bytes of state the last restore read.")
	job(descRestoreDuration, "lastRestoreDuration", "Time the last restore took, milliseconds.")
	job(descDowntime, "downtime", "The current outage after a failure, milliseconds; 0 while the job runs.")
	job(descFailoverDown, "lastFailoverDowntime", "The latest failure's outage until the next completed checkpoint, milliseconds.")
	task(descRecordsIn, "numRecordsIn", "Records received.", true)
	task(descRecordsOut, "numRecordsOut", "Records sent.", true)
	task(descBytesIn, "numBytesIn", "Bytes received over the network.", false)
	task(descBytesOut, "numBytesOut", "Bytes sent over the network.", false)
	task(descBusyPerSec, "busyTimeMsPerSecond", "Milliseconds per second the task was busy.", false)
	task(descIdlePerSec, "idleTimeMsPerSecond", "Milliseconds per second the task waited for input.", false)
	task(descBPPerSec, "backPressuredTimeMsPerSecond", "Milliseconds per second the task waited for an output buffer.", false)
	task(descAccBusy, "accumulateBusyTimeMs", "Milliseconds the task was busy since it started.", false)
	task(descAccIdle, "accumulateIdleTimeMs", "Milliseconds the task waited for input since it started.", false)
	task(descAccBP, "accumulateBackPressuredTimeMs", "Milliseconds the task waited for an output buffer since it started.", false)
	task(descAlignment, "checkpointAlignmentTime", "Barrier alignment time in the last completed checkpoint, nanoseconds.", false)
	task(descStartDelay, "checkpointStartDelayNanos", "Time from the trigger to the first barrier in the last completed checkpoint, nanoseconds.", false)
	task(descInputWM, "currentInputWatermark", "The input watermark, unix milliseconds.", true)
	task(descOutputWM, "currentOutputWatermark", "The latest watermark sent downstream, unix milliseconds.", true)
	return m
}()

// flinkStatusDescs are the gauges of the job's status, Flink's
// <status>State (runningState, restartingState, ...).
var flinkStatusDescs = func() map[runtime.JobStatus]*prometheus.Desc {
	m := map[runtime.JobStatus]*prometheus.Desc{}
	for s := runtime.JobCreated; s <= runtime.JobSuspended; s++ {
		name := strings.ToLower(s.String()) + "State"
		m[s] = prometheus.NewDesc(flinkJobPrefix+name, "1 while the job is "+s.String()+", else 0.", flinkJobLabels, nil)
	}
	return m
}()

// flinkID is a stable 32-hex-digit id of names, as Flink's ids look.
func flinkID(parts ...string) string {
	h := fnv.New128a()
	h.Write([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h.Sum(nil))
}

// emitter sends metrics under Sluice's or Flink's names.
type emitter struct {
	ch    chan<- prometheus.Metric
	flink bool
}

// job sends a job-scope metric; labels are Sluice's: job name, then the
// descriptor's own.
func (e emitter) send(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	if !e.flink {
		e.ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
		return
	}
	fd, ok := flinkDescs[d]
	if !ok {
		return
	}
	job := labels[0]
	if fd.job {
		e.ch <- prometheus.MustNewConstMetric(fd.task, prometheus.GaugeValue, v, flinkID(job), job)
		return
	}
	vertex, sub := labels[1], labels[2]
	taskID := flinkID(job, vertex)
	// Flink's reporter exports counters as gauges too.
	e.ch <- prometheus.MustNewConstMetric(fd.task, prometheus.GaugeValue, v, flinkID(job), job, taskID, vertex, sub)
	if fd.operator != nil {
		e.ch <- prometheus.MustNewConstMetric(fd.operator, prometheus.GaugeValue, v, flinkID(job), job, taskID, vertex, sub, flinkID(job, vertex, "operator"), vertex)
	}
}

// status sends the job's status gauges.
func (e emitter) status(job string, status runtime.JobStatus) {
	for s := runtime.JobCreated; s <= runtime.JobSuspended; s++ {
		if e.flink {
			e.ch <- prometheus.MustNewConstMetric(flinkStatusDescs[s], prometheus.GaugeValue, b2f(s == status), flinkID(job), job)
		} else {
			e.ch <- prometheus.MustNewConstMetric(descJobStatus, prometheus.GaugeValue, b2f(s == status), job, s.String())
		}
	}
}

var flinkFamilyDescs sync.Map // *report.Family -> *prometheus.Desc

// flinkFamilyDesc is a connector family's descriptor under Flink's
// operator scope, named as Flink's Prometheus reporter names it
// (report.Family.FlinkName).
func flinkFamilyDesc(f *report.Family) *prometheus.Desc {
	if d, ok := flinkFamilyDescs.Load(f); ok {
		return d.(*prometheus.Desc)
	}
	labels := append(slices.Clone(flinkOpLabels), f.Labels...)
	d, _ := flinkFamilyDescs.LoadOrStore(f, prometheus.NewDesc(flinkOperator+f.FlinkName(), f.Help, labels, nil))
	return d.(*prometheus.Desc)
}
