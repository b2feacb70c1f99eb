package api

import (
	"net/http"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// disposalKey is the operations' key prefix of savepoint disposals.
const disposalKey = "savepoint-disposal/"

// handleDisposeSavepoint is POST /savepoint-disposal: delete the
// savepoint at savepoint-path (storage.DisposeSavepoint: only a directory
// whose _metadata is a savepoint's), polled at
// GET /savepoint-disposal/:triggerid.
func (s *Server) handleDisposeSavepoint(w http.ResponseWriter, r *http.Request) {
	var req SavepointDisposalRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if req.SavepointPath == "" {
		writeError(w, http.StatusBadRequest, "Property [savepoint-path] must be provided.")
		return
	}
	trigger, err := s.startOp(disposalKey, "", false, "savepoint disposal", "", func() (string, int64, error) {
		return req.SavepointPath, 0, storage.DisposeSavepoint(s.ctx, nil, req.SavepointPath, nil)
	})
	if err != nil {
		writeOpError(w, err)
		return
	}
	s.logger.Info("savepoint disposal requested through the api", "path", req.SavepointPath, "trigger", trigger)
	writeJSON(w, http.StatusAccepted, TriggerResponse{RequestID: trigger})
}

// handleDisposalStatus is GET /savepoint-disposal/:triggerid.
func (s *Server) handleDisposalStatus(w http.ResponseWriter, r *http.Request) {
	op := s.operationAt(disposalKey, r.PathValue("triggerid"))
	if op == nil {
		writeError(w, http.StatusNotFound, "There is no savepoint disposal with triggerId=%s.", r.PathValue("triggerid"))
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if !op.done {
		writeJSON(w, http.StatusOK, DisposalOperationResult{Status: QueueStatus{ID: StatusInProgress}})
		return
	}
	info := &AsynchronousOperationInfo{}
	if op.err != nil {
		info.FailureCause = failureCause(op.err)
	}
	writeJSON(w, http.StatusOK, DisposalOperationResult{Status: QueueStatus{ID: StatusCompleted}, Operation: info})
}
