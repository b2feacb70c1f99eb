package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/runtime"
)

// stateQuerier is a job that answers queries against its keyed state
// (*runtime.Job).
type stateQuerier interface {
	QueryState(ctx context.Context, name, key string) (runtime.QueryResult, error)
	QueryableStates() []string
}

// queryTimeout bounds the wait for a task's answer: a task answers
// between two records, so only a task stuck in one record takes longer.
const queryTimeout = 10 * time.Second

// QueryableStatesResponse is GET /jobs/:jobid/queryable-state: the names
// of the job's queryable states (Sluice).
type QueryableStatesResponse struct {
	States []string `json:"states"`
}

// QueryStateResponse is GET /jobs/:jobid/queryable-state/:name?key=...:
// the key's current value (not a checkpointed one), read on the subtask
// that owns it (Sluice).
type QueryStateResponse struct {
	Name  string `json:"name"`
	Key   string `json:"key"`
	Found bool   `json:"found"`
	// Value is the key's value as JSON; absent when not found.
	Value    json.RawMessage `json:"value,omitempty"`
	Operator string          `json:"operator"`
	Subtask  int             `json:"subtask"`
	KeyGroup int             `json:"key-group"`
	Attempt  int             `json:"attempt"`
}

// handleQueryableStates is GET /jobs/:jobid/queryable-state.
func (s *Server) handleQueryableStates(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	out := QueryableStatesResponse{States: []string{}}
	if q, ok := e.job.(stateQuerier); ok {
		out.States = append(out.States, q.QueryableStates()...)
	}
	writeJSON(w, http.StatusOK, out)
}

// handleQueryState is GET /jobs/:jobid/queryable-state/:name?key=...: 200
// with found false when the key has no value; 404 for a state the job did
// not declare queryable; 400 for a key that does not parse; 503 while the
// state cannot be read (restarting, ended) — ask again.
func (s *Server) handleQueryState(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	q, ok := e.job.(stateQuerier)
	if !ok {
		writeError(w, http.StatusNotFound, "job %s answers no state queries", e.id)
		return
	}
	name := r.PathValue("name")
	if !r.URL.Query().Has("key") {
		writeError(w, http.StatusBadRequest, "queryable state %q: give the key as the query parameter key", name)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	res, err := q.QueryState(ctx, name, r.URL.Query().Get("key"))
	switch {
	case errors.Is(err, runtime.ErrUnknownQueryableState):
		writeError(w, http.StatusNotFound, "%v", err)
		return
	case errors.Is(err, runtime.ErrQueryKey):
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	case errors.Is(err, runtime.ErrQueryUnavailable), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "%v", err)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, QueryStateResponse{Name: res.Name, Key: res.Key, Found: res.Found, Value: res.Value,
		Operator: res.Operator, Subtask: res.Subtask, KeyGroup: res.KeyGroup, Attempt: res.Attempt})
}

// QueryableStates returns GET /jobs/:jobid/queryable-state: the names of
// the job's queryable states.
func (c *Client) QueryableStates(ctx context.Context, jobID string) ([]string, error) {
	var out QueryableStatesResponse
	err := c.get(ctx, "/jobs/"+url.PathEscape(jobID)+"/queryable-state", &out)
	return out.States, err
}

// QueryState returns GET /jobs/:jobid/queryable-state/:name?key=...: the
// current value of key in the job's queryable state name. An answer the
// server refused is an *APIError (404: no such queryable state; 400: a
// key that does not parse; 503: not readable now, ask again).
func (c *Client) QueryState(ctx context.Context, jobID, name, key string) (QueryStateResponse, error) {
	var out QueryStateResponse
	err := c.get(ctx, "/jobs/"+url.PathEscape(jobID)+"/queryable-state/"+url.PathEscape(name)+"?key="+url.QueryEscape(key), &out)
	return out, err
}

// QueryValue is QueryState decoding the value into V: the value, whether
// the key has one, and the error.
func QueryValue[V any](ctx context.Context, c *Client, jobID, name, key string) (V, bool, error) {
	var v V
	res, err := c.QueryState(ctx, jobID, name, key)
	if err != nil || !res.Found {
		return v, false, err
	}
	if err := json.Unmarshal(res.Value, &v); err != nil {
		return v, false, err
	}
	return v, true, nil
}
