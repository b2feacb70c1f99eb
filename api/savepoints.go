package api

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// operation is a savepoint (or stop-with-savepoint) being taken: Flink's
// asynchronous operation, polled by its trigger id.
type operation struct {
	mu       sync.Mutex
	done     bool
	location string
	err      error
}

func (o *operation) result() AsynchronousOperationResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.done {
		return AsynchronousOperationResult{Status: QueueStatus{ID: StatusInProgress}}
	}
	info := &SavepointInfo{Location: o.location}
	if o.err != nil {
		info = &SavepointInfo{FailureCause: &FailureCause{Class: fmt.Sprintf("%T", o.err),
			StackTrace: o.err.Error(), SerializedThrowable: o.err.Error()}}
	}
	return AsynchronousOperationResult{Status: QueueStatus{ID: StatusCompleted}, Operation: info}
}

type operations struct {
	mu   sync.Mutex
	byID map[string]*operation // by job id + "/" + trigger id
}

func (s *Server) operation(job, trigger string) *operation {
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	return s.ops.byID[job+"/"+trigger]
}

// start runs take in the background as the operation of trigger.
func (s *Server) start(e *jobEntry, trigger string, take func() (string, error)) (string, error) {
	if trigger == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		trigger = hex.EncodeToString(b[:])
	}
	op := &operation{}
	s.ops.mu.Lock()
	if s.ops.byID == nil {
		s.ops.byID = map[string]*operation{}
	}
	if _, dup := s.ops.byID[e.id+"/"+trigger]; dup {
		s.ops.mu.Unlock()
		return "", fmt.Errorf("an operation with triggerId %s exists already", trigger)
	}
	s.ops.byID[e.id+"/"+trigger] = op
	s.ops.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		path, err := take()
		path = externalPath(path)
		if err != nil {
			s.logger.Warn("savepoint failed", "job", e.name, "trigger", trigger, "err", err)
		} else {
			s.logger.Info("savepoint completed", "job", e.name, "trigger", trigger, "path", path)
		}
		op.mu.Lock()
		op.done, op.location, op.err = true, path, err
		op.mu.Unlock()
	}()
	return trigger, nil
}

// decodeBody decodes an optional JSON body into v.
func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read request body: %w", err)
	}
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}

// handleTriggerSavepoint is POST /jobs/:jobid/savepoints: a savepoint into
// target-directory (or the configured savepoint directory); with
// cancel-job the job stops once it completed.
func (s *Server) handleTriggerSavepoint(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	var req SavepointTriggerRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if req.TargetDirectory == "" && e.job.Config().Checkpoint.SavepointDirectory == "" {
		writeError(w, http.StatusBadRequest, "Config key [execution.checkpointing.savepoint-dir] is not set. Property [target-directory] must be provided.")
		return
	}
	trigger, err := s.start(e, req.TriggerID, func() (string, error) {
		if req.CancelJob {
			return e.job.StopWithSavepoint(s.ctx, req.TargetDirectory, false)
		}
		return e.job.TriggerSavepoint(s.ctx, req.TargetDirectory)
	})
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, TriggerResponse{RequestID: trigger})
}

// handleStop is POST /jobs/:jobid/stop: stop with a savepoint, draining
// event time first when asked.
func (s *Server) handleStop(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	var req StopWithSavepointRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if req.TargetDirectory == "" && e.job.Config().Checkpoint.SavepointDirectory == "" {
		writeError(w, http.StatusBadRequest, "Config key [execution.checkpointing.savepoint-dir] is not set. Property [targetDirectory] must be provided.")
		return
	}
	trigger, err := s.start(e, req.TriggerID, func() (string, error) {
		return e.job.StopWithSavepoint(s.ctx, req.TargetDirectory, req.Drain)
	})
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, TriggerResponse{RequestID: trigger})
}

// handleSavepointStatus is GET /jobs/:jobid/savepoints/:triggerid, for
// savepoints and stop-with-savepoint alike.
func (s *Server) handleSavepointStatus(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	op := s.operation(e.id, r.PathValue("triggerid"))
	if op == nil {
		writeError(w, http.StatusNotFound, "There is no savepoint operation with triggerId=%s for job %s.", r.PathValue("triggerid"), e.id)
		return
	}
	writeJSON(w, http.StatusOK, op.result())
}
