package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// operation is a savepoint (or stop-with-savepoint) being taken: Flink's
// asynchronous operation, polled by its trigger id.
type operation struct {
	stops bool // it ends the job: stop, or a savepoint with cancel-job

	mu       sync.Mutex
	done     bool
	read     bool // a client got the outcome
	location string
	// checkpointID is the checkpoint a checkpoint operation took.
	checkpointID int64
	err          error
	finished     time.Time // when it completed
}

// result returns the operation's status, marking a completed one read.
func (o *operation) result() AsynchronousOperationResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.done {
		return AsynchronousOperationResult{Status: QueueStatus{ID: StatusInProgress}}
	}
	o.read = true
	info := &SavepointInfo{Location: o.location}
	if o.err != nil {
		info = &SavepointInfo{FailureCause: failureCause(o.err)}
	}
	return AsynchronousOperationResult{Status: QueueStatus{ID: StatusCompleted}, Operation: info}
}

// failureCause describes err in the shape of Flink's SerializedThrowable.
func failureCause(err error) *FailureCause {
	return &FailureCause{Class: fmt.Sprintf("%T", err), StackTrace: err.Error(), SerializedThrowable: err.Error()}
}

type operations struct {
	mu      sync.Mutex
	byID    map[string]*operation // by job id + "/" + trigger id
	changed chan struct{}         // closed (and replaced) when one completes or is read
}

// Bounds of the asynchronous operations.
const (
	// DefaultAsyncStoreDuration is Flink's rest.async.store-duration.
	DefaultAsyncStoreDuration = 5 * time.Minute
	// DefaultMaxOperations bounds the operations kept at once.
	DefaultMaxOperations = 1000
	// MaxTriggerIDLen bounds a trigger id a client chooses.
	MaxTriggerIDLen = 128
)

// errTooManyOperations refuses a trigger while MaxOperations are kept
// and none can be let go.
var errTooManyOperations = errors.New("too many asynchronous operations in progress")

// checkTriggerID refuses a client-chosen trigger id that is long or not
// made of letters, digits, '-', '_' and '.' (Flink's are 32 hex digits).
func checkTriggerID(id string) error {
	if len(id) > MaxTriggerIDLen {
		return fmt.Errorf("%w: %d bytes, at most %d", errBadTrigger, len(id), MaxTriggerIDLen)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%w: letters, digits, '-', '_' and '.' only", errBadTrigger)
		}
	}
	return nil
}

// evictLocked forgets completed operations whose outcome is older than
// the store duration, and, while more than the maximum are kept, the
// oldest completed ones. s.ops.mu is held. An unread stop-with-savepoint
// is kept until Shutdown's grace ends.
func (s *Server) evictLocked(now time.Time) {
	keep := s.opts.AsyncStoreDuration
	type done struct {
		key string
		at  time.Time
	}
	var completed []done
	for key, op := range s.ops.byID {
		op.mu.Lock()
		finished, at, unreadStop := op.done, op.finished, op.stops && !op.read
		op.mu.Unlock()
		if !finished || unreadStop {
			continue
		}
		if now.Sub(at) >= keep {
			delete(s.ops.byID, key)
			continue
		}
		completed = append(completed, done{key, at})
	}
	if over := len(s.ops.byID) - s.opts.MaxOperations + 1; over > 0 {
		slices.SortFunc(completed, func(a, b done) int { return a.at.Compare(b.at) })
		for _, d := range completed[:min(over, len(completed))] {
			delete(s.ops.byID, d.key)
		}
	}
}

// changedCh returns a channel closed at the next change of an operation.
func (s *Server) changedCh() chan struct{} {
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	if s.ops.changed == nil {
		s.ops.changed = make(chan struct{})
	}
	return s.ops.changed
}

func (s *Server) opChanged() {
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	if s.ops.changed != nil {
		close(s.ops.changed)
		s.ops.changed = nil
	}
}

// unreadStops returns how many operations that end their job have not
// completed or not had their outcome read.
func (s *Server) unreadStops() int {
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	n := 0
	for _, op := range s.ops.byID {
		op.mu.Lock()
		if op.stops && !op.read {
			n++
		}
		op.mu.Unlock()
	}
	return n
}

// Shutdown closes the server once the outcome of every stop-with-savepoint
// it started (POST /jobs/:jobid/stop, or a savepoint with cancel-job) has
// been read by a client, or when ctx is done, whichever comes first. A
// program that ends when its job ends calls it, bounded by a grace
// period, instead of Close: the client that stopped the job then learns
// where the savepoint is before the process exits.
func (s *Server) Shutdown(ctx context.Context) error {
	for logged := false; ; logged = true {
		ch := s.changedCh()
		n := s.unreadStops()
		if n == 0 {
			break
		}
		if !logged {
			args := []any{"operations", n}
			if dl, ok := ctx.Deadline(); ok {
				args = append(args, "grace", time.Until(dl).Round(time.Millisecond))
			}
			s.logger.Info("waiting for the client that stopped the job to read the savepoint's outcome", args...)
		}
		select {
		case <-ch:
			continue
		case <-ctx.Done():
			s.logger.Warn("closing before the outcome of a stop-with-savepoint was read", "operations", n, "err", ctx.Err())
		}
		break
	}
	return s.Close()
}

func (s *Server) operation(job, trigger string) *operation { return s.operationAt(job+"/", trigger) }

func (s *Server) operationAt(key, trigger string) *operation {
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	s.evictLocked(time.Now())
	return s.ops.byID[key+trigger]
}

// start runs take in the background as the savepoint operation of
// trigger; stops says that it ends the job.
func (s *Server) start(e *jobEntry, trigger string, stops bool, take func() (string, error)) (string, error) {
	return s.startOp(e.id+"/", trigger, stops, "savepoint", e.name, func() (string, int64, error) {
		path, err := take()
		return path, 0, err
	})
}

// startOp runs take in the background as the operation key+trigger (a new
// trigger id when trigger is empty) and returns the trigger id; what and
// job name it in the logs.
func (s *Server) startOp(key, trigger string, stops bool, what, job string, take func() (string, int64, error)) (string, error) {
	if trigger == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		trigger = hex.EncodeToString(b[:])
	}
	if err := checkTriggerID(trigger); err != nil {
		return "", err
	}
	op := &operation{stops: stops}
	s.ops.mu.Lock()
	if s.ops.byID == nil {
		s.ops.byID = map[string]*operation{}
	}
	s.evictLocked(time.Now())
	if len(s.ops.byID) >= s.opts.MaxOperations {
		s.ops.mu.Unlock()
		return "", fmt.Errorf("%w (%d); try again later", errTooManyOperations, len(s.ops.byID))
	}
	if _, dup := s.ops.byID[key+trigger]; dup {
		s.ops.mu.Unlock()
		return "", fmt.Errorf("an operation with triggerId %s exists already", trigger)
	}
	s.ops.byID[key+trigger] = op
	s.ops.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		path, id, err := take()
		path = externalPath(path)
		if err != nil {
			s.logger.Warn(what+" failed", "job", job, "trigger", trigger, "err", err)
		} else {
			s.logger.Info(what+" completed", "job", job, "trigger", trigger, "path", path)
		}
		op.mu.Lock()
		op.done, op.location, op.checkpointID, op.err, op.finished = true, path, id, err, time.Now()
		op.mu.Unlock()
		s.opChanged()
	}()
	return trigger, nil
}

// errBadTrigger is a trigger id a client chose that is refused.
var errBadTrigger = errors.New("bad triggerId")

// writeOpError answers a trigger that did not start: 400 for a bad
// trigger id, 503 while too many operations are kept, 409 for a trigger
// id in use.
func writeOpError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errBadTrigger):
		writeError(w, http.StatusBadRequest, "%v", err)
	case errors.Is(err, errTooManyOperations):
		writeError(w, http.StatusServiceUnavailable, "%v", err)
	default:
		writeError(w, http.StatusConflict, "%v", err)
	}
}

// maxBody bounds a request body: the API's are a few fields.
const maxBody = 64 << 10

// decodeBody decodes an optional JSON body into v.
func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
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

// hasSavepointTarget says whether the job has a directory for savepoints
// whose request names none: execution.checkpointing.savepoint-dir, else
// <execution.checkpointing.dir>/savepoints.
func hasSavepointTarget(e *jobEntry) bool {
	dir, _ := e.job.Config().Checkpoint.SavepointTarget()
	return dir != ""
}

// noSavepointDirectory is the answer to a savepoint request that names no
// directory for a job that has none: Flink's words, naming the request's
// property, and the key whose default is beside the checkpoints.
func noSavepointDirectory(property string) string {
	return "Config key [execution.checkpointing.savepoint-dir] is not set, nor [execution.checkpointing.dir] " +
		"(savepoints then go to its savepoints directory). Property [" + property + "] must be provided."
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
	if req.TargetDirectory == "" && !hasSavepointTarget(e) {
		writeError(w, http.StatusBadRequest, "%s", noSavepointDirectory("target-directory"))
		return
	}
	trigger, err := s.start(e, req.TriggerID, req.CancelJob, func() (string, error) {
		if req.CancelJob {
			return e.job.StopWithSavepoint(s.ctx, req.TargetDirectory, false)
		}
		return e.job.TriggerSavepoint(s.ctx, req.TargetDirectory)
	})
	if err != nil {
		writeOpError(w, err)
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
	if req.TargetDirectory == "" && !hasSavepointTarget(e) {
		writeError(w, http.StatusBadRequest, "%s", noSavepointDirectory("targetDirectory"))
		return
	}
	trigger, err := s.start(e, req.TriggerID, true, func() (string, error) {
		return e.job.StopWithSavepoint(s.ctx, req.TargetDirectory, req.Drain)
	})
	if err != nil {
		writeOpError(w, err)
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
	res := op.result()
	writeJSON(w, http.StatusOK, res)
	if res.Status.ID == StatusCompleted {
		s.opChanged() // it has been read
	}
}
