package api

import (
	"net/http"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/runtime"
)

// JobExecutionResultResponse is GET /jobs/:jobid/execution-result, in
// Flink's shape: status IN_PROGRESS while the job runs (or is suspended),
// COMPLETED once it ended, with how it ended. The job-result fields beside
// Flink's say what the job's result store recorded.
type JobExecutionResultResponse struct {
	Status struct {
		ID string `json:"id"`
	} `json:"status"`
	Result *JobExecutionResult `json:"job-execution-result,omitempty"`
}

// JobExecutionResult is how a job ended.
type JobExecutionResult struct {
	ID string `json:"id"`
	// ApplicationStatus is SUCCEEDED, FAILED, CANCELED or UNKNOWN.
	ApplicationStatus  string            `json:"application-status"`
	AccumulatorResults map[string]string `json:"accumulator-results"`
	NetRuntime         int64             `json:"net-runtime"`
	FailureCause       *FailureCause     `json:"failure-cause,omitempty"`
	// What the job result store recorded (absent without a checkpoint
	// directory).
	JobResult *JobResultInfo `json:"job-result,omitempty"`
}

// JobResultInfo is a job's entry of the job result store.
type JobResultInfo struct {
	JobID          string `json:"job-id"`
	RunID          string `json:"run-id"`
	Status         string `json:"status"`
	Error          string `json:"error,omitempty"`
	EndTime        int64  `json:"end-time"`
	LastCheckpoint int64  `json:"last-checkpoint,omitempty"`
	Retained       bool   `json:"checkpoint-retained"`
	Savepoint      string `json:"savepoint,omitempty"`
	Clean          bool   `json:"clean"`
	// Previous is set when the result is an earlier run's, which made
	// this run do nothing (a finished job started again).
	Previous bool `json:"previous-run,omitempty"`
}

// resultJob is a Job that can say what its result store recorded.
type resultJob interface {
	Result() (storage.JobResult, bool)
	PreviousResult() (*storage.JobResult, bool)
}

func (s *Server) handleExecutionResult(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	var out JobExecutionResultResponse
	status := e.job.Status()
	switch status {
	case runtime.JobFinished, runtime.JobFailed, runtime.JobCanceled:
	default:
		out.Status.ID = "IN_PROGRESS"
		writeJSON(w, http.StatusOK, out)
		return
	}
	out.Status.ID = "COMPLETED"
	_, _, dur := e.timing(time.Now())
	res := &JobExecutionResult{ID: e.id, AccumulatorResults: map[string]string{}, NetRuntime: dur}
	switch status {
	case runtime.JobFinished:
		res.ApplicationStatus = "SUCCEEDED"
	case runtime.JobCanceled:
		res.ApplicationStatus = "CANCELED"
	default:
		res.ApplicationStatus = "FAILED"
	}
	if rj, ok := e.job.(resultJob); ok {
		if jr, ok := rj.Result(); ok {
			_, prev := rj.PreviousResult()
			res.JobResult = &JobResultInfo{
				JobID: jr.JobID, RunID: jr.RunID, Status: jr.Status, Error: jr.Error, EndTime: jr.EndTimestamp,
				LastCheckpoint: jr.LastCheckpoint, Retained: jr.Retained, Savepoint: externalPath(jr.Savepoint), Clean: jr.Clean, Previous: prev,
			}
			if jr.Error != "" {
				res.FailureCause = &FailureCause{Class: "error", StackTrace: jr.Error, SerializedThrowable: jr.Error}
			}
		}
	}
	out.Result = res
	writeJSON(w, http.StatusOK, out)
}
