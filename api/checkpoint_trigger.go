package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/runtime"
)

// checkpointTrigger is a job that takes checkpoints on request
// (*runtime.Job).
type checkpointTrigger interface {
	TriggerCheckpoint(ctx context.Context, full bool) (runtime.CheckpointResult, error)
}

// handleTriggerCheckpoint is POST /jobs/:jobid/checkpoints (Flink 1.19):
// a checkpoint now, polled at GET /jobs/:jobid/checkpoints/:triggerid.
func (s *Server) handleTriggerCheckpoint(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	var req CheckpointTriggerRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var full bool
	switch strings.ToUpper(req.CheckpointType) {
	case "", "CONFIGURED", "INCREMENTAL":
	case "FULL":
		full = true
	default:
		writeError(w, http.StatusBadRequest, "checkpointType %q: want CONFIGURED, FULL or INCREMENTAL", req.CheckpointType)
		return
	}
	ct, ok := e.job.(checkpointTrigger)
	if !ok || !e.job.Config().Checkpoint.Enabled() {
		writeError(w, http.StatusBadRequest, "Checkpointing is not enabled for job %s (%s): set execution.checkpointing.dir and execution.checkpointing.interval.", e.id, e.name)
		return
	}
	trigger, err := s.startOp(e.id+"/checkpoint/", req.TriggerID, false, "checkpoint", e.name, func() (string, int64, error) {
		res, err := ct.TriggerCheckpoint(s.ctx, full)
		return res.Path, res.ID, err
	})
	if err != nil {
		writeOpError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, TriggerResponse{RequestID: trigger})
}

// handleCheckpointStatus is GET /jobs/:jobid/checkpoints/:triggerid.
func (s *Server) handleCheckpointStatus(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	op := s.operationAt(e.id+"/checkpoint/", r.PathValue("triggerid"))
	if op == nil {
		writeError(w, http.StatusNotFound, "There is no checkpoint operation with triggerId=%s for job %s.", r.PathValue("triggerid"), e.id)
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if !op.done {
		writeJSON(w, http.StatusOK, CheckpointOperationResult{Status: QueueStatus{ID: StatusInProgress}})
		return
	}
	info := &CheckpointInfo{}
	if op.err != nil {
		info.FailureCause = failureCause(op.err)
	} else {
		id := op.checkpointID
		info.CheckpointID, info.Location = &id, op.location
	}
	writeJSON(w, http.StatusOK, CheckpointOperationResult{Status: QueueStatus{ID: StatusCompleted}, Operation: info})
}
