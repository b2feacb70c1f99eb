// Package jobapi is the operator's client of a Sluice job's REST API
// (the coordinator's, api/openapi.json in the job's module): the job's
// state and checkpoints, savepoints, stop with a savepoint, savepoint
// disposal and the rescale call. It speaks JSON over HTTP and imports
// nothing of the job's module, so the operator links none of the engine.
package jobapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ErrNotSupported is returned by Rescale when the coordinator has no
// rescale call (it answered 404 or 405): the caller rescales with a
// savepoint instead.
var ErrNotSupported = errors.New("the job's REST API has no rescale call")

// ErrConflict is returned when the job cannot do it now (409), e.g. a
// rescale while it restarts, or a savepoint while another runs.
var ErrConflict = errors.New("the job cannot do it now")

// ErrNotFound is returned when the job, or a trigger id, is unknown (404).
var ErrNotFound = errors.New("not found")

// Client calls one coordinator's REST API.
type Client struct {
	// Base is the API's URL, e.g. http://job-coordinator.ns.svc:8081.
	Base string
	// Token is the bearer token (rest.authentication.token); empty: none.
	Token string
	// HTTP is the client used; nil: one with a 10 s timeout.
	HTTP *http.Client
}

// StatusError is an answer that is not a success.
type StatusError struct {
	Method, Path string
	Code         int
	Errors       []string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, http.StatusText(e.Code), strings.Join(e.Errors, "; "))
}

// Unwrap maps the codes callers branch on to the sentinel errors.
func (e *StatusError) Unwrap() error {
	switch e.Code {
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusConflict:
		return ErrConflict
	}
	return nil
}

var defaultHTTP = &http.Client{Timeout: 10 * time.Second}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: encode the body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Base, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{Method: method, Path: path, Code: resp.StatusCode}
		var er struct {
			Errors []string `json:"errors"`
		}
		if json.Unmarshal(data, &er) == nil {
			se.Errors = er.Errors
		}
		if len(se.Errors) == 0 {
			se.Errors = []string{strings.TrimSpace(string(data))}
		}
		return se
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return nil
}

// JobID returns the id of the job the coordinator runs (it runs one).
func (c *Client) JobID(ctx context.Context) (string, error) {
	var out struct {
		Jobs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"jobs"`
	}
	if err := c.do(ctx, http.MethodGet, "/jobs", nil, &out); err != nil {
		return "", err
	}
	if len(out.Jobs) == 0 {
		return "", fmt.Errorf("GET /jobs: %w: the coordinator runs no job yet", ErrNotFound)
	}
	return out.Jobs[0].ID, nil
}

// Vertex is one vertex of a job.
type Vertex struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Parallelism int32  `json:"parallelism"`
	Status      string `json:"status"`
}

// Details are a job's state and vertices.
type Details struct {
	ID       string   `json:"jid"`
	Name     string   `json:"name"`
	State    string   `json:"state"`
	Vertices []Vertex `json:"vertices"`
}

// Parallelism is the highest parallelism of the job's vertices.
func (d *Details) Parallelism() int32 {
	var p int32
	for _, v := range d.Vertices {
		p = max(p, v.Parallelism)
	}
	return p
}

// Running reports whether the job and every vertex run.
func (d *Details) Running() bool {
	if d.State != "RUNNING" || len(d.Vertices) == 0 {
		return false
	}
	for _, v := range d.Vertices {
		if v.Status != "RUNNING" {
			return false
		}
	}
	return true
}

// Job returns a job's details (GET /jobs/{id}).
func (c *Client) Job(ctx context.Context, id string) (*Details, error) {
	var d Details
	if err := c.do(ctx, http.MethodGet, "/jobs/"+id, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Checkpoint is a completed checkpoint.
type Checkpoint struct {
	ID           int64  `json:"id"`
	ExternalPath string `json:"external_path"`
	Status       string `json:"status"`
}

// LatestCheckpoint returns the latest completed checkpoint, or nil
// (GET /jobs/{id}/checkpoints).
func (c *Client) LatestCheckpoint(ctx context.Context, id string) (*Checkpoint, error) {
	var out struct {
		Latest struct {
			Completed *Checkpoint `json:"completed"`
		} `json:"latest"`
	}
	if err := c.do(ctx, http.MethodGet, "/jobs/"+id+"/checkpoints", nil, &out); err != nil {
		return nil, err
	}
	return out.Latest.Completed, nil
}

type trigger struct {
	RequestID string `json:"request-id"`
}

// TriggerSavepoint starts a savepoint into dir ("" for the job's
// default) and returns its trigger id (POST /jobs/{id}/savepoints).
func (c *Client) TriggerSavepoint(ctx context.Context, id, dir string) (string, error) {
	body := map[string]any{"cancel-job": false}
	if dir != "" {
		body["target-directory"] = dir
	}
	var t trigger
	if err := c.do(ctx, http.MethodPost, "/jobs/"+id+"/savepoints", body, &t); err != nil {
		return "", err
	}
	return t.RequestID, nil
}

// StopWithSavepoint stops the job with a savepoint into dir ("" for the
// default) and returns the trigger id (POST /jobs/{id}/stop). The job
// ends FINISHED; its processes stay up until they are stopped.
func (c *Client) StopWithSavepoint(ctx context.Context, id, dir string) (string, error) {
	body := map[string]any{"drain": false}
	if dir != "" {
		body["targetDirectory"] = dir
	}
	var t trigger
	if err := c.do(ctx, http.MethodPost, "/jobs/"+id+"/stop", body, &t); err != nil {
		return "", err
	}
	return t.RequestID, nil
}

// SavepointResult is the state of a triggered savepoint.
type SavepointResult struct {
	// Done is false while it runs.
	Done bool
	// Location of the completed savepoint.
	Location string
	// Failure says why it failed (Done, no Location).
	Failure string
}

// Savepoint polls a savepoint or stop-with-savepoint
// (GET /jobs/{id}/savepoints/{trigger}).
func (c *Client) Savepoint(ctx context.Context, id, triggerID string) (SavepointResult, error) {
	var out struct {
		Status struct {
			ID string `json:"id"`
		} `json:"status"`
		Operation *struct {
			Location     string `json:"location"`
			FailureCause *struct {
				Class      string `json:"class"`
				StackTrace string `json:"stack-trace"`
			} `json:"failure-cause"`
		} `json:"operation"`
	}
	if err := c.do(ctx, http.MethodGet, "/jobs/"+id+"/savepoints/"+triggerID, nil, &out); err != nil {
		return SavepointResult{}, err
	}
	if out.Status.ID != "COMPLETED" {
		return SavepointResult{}, nil
	}
	r := SavepointResult{Done: true}
	if op := out.Operation; op != nil {
		r.Location = op.Location
		if fc := op.FailureCause; fc != nil {
			r.Failure = strings.TrimSpace(fc.Class + ": " + fc.StackTrace)
		}
	}
	if r.Location == "" && r.Failure == "" {
		r.Failure = "the savepoint completed with no location"
	}
	return r, nil
}

// DisposeSavepoint deletes a savepoint (POST /savepoint-disposal); it
// does not wait for the deletion.
func (c *Client) DisposeSavepoint(ctx context.Context, path string) error {
	return c.do(ctx, http.MethodPost, "/savepoint-disposal", map[string]string{"savepoint-path": path}, nil)
}

// Rescale asks the job to run every vertex in vertices at its new
// parallelism (PUT /jobs/{id}/resource-requirements, Flink's shape: the
// body keyed by vertex id, {"parallelism":{"lowerBound":n,"upperBound":n}}).
// ErrNotSupported: the coordinator has no such call (404 or 405);
// ErrConflict: the job cannot rescale now.
func (c *Client) Rescale(ctx context.Context, id string, vertices map[string]int32) error {
	type bounds struct {
		LowerBound int32 `json:"lowerBound"`
		UpperBound int32 `json:"upperBound"`
	}
	type req struct {
		Parallelism bounds `json:"parallelism"`
	}
	body := make(map[string]req, len(vertices))
	for v, n := range vertices {
		body[v] = req{Parallelism: bounds{LowerBound: n, UpperBound: n}}
	}
	err := c.do(ctx, http.MethodPut, "/jobs/"+id+"/resource-requirements", body, nil)
	var se *StatusError
	if errors.As(err, &se) && (se.Code == http.StatusMethodNotAllowed ||
		se.Code == http.StatusNotFound && !jobNotFound(se)) {
		return fmt.Errorf("%w: %w", ErrNotSupported, err)
	}
	return err
}

// jobNotFound tells a 404 about the job (the call exists, the job does
// not: "job not found: ...") from one about the path ("Not found: PUT
// /jobs/...", a coordinator without the call).
func jobNotFound(se *StatusError) bool {
	for _, e := range se.Errors {
		if strings.Contains(strings.ToLower(e), "job not found") {
			return true
		}
	}
	return false
}

// Readiness is a coordinator's GET /readyz: Status "ready", "not ready"
// (Reason says why) or "standby" (under HA: another coordinator leads
// the job). It needs no token.
type Readiness struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// Standby reports whether the coordinator stands by for the leadership.
func (r Readiness) Standby() bool { return r.Status == "standby" }

// Ready returns the coordinator's readiness; a 503 is an answer too
// (not ready), not an error.
func (c *Client) Ready(ctx context.Context) (Readiness, error) {
	var out Readiness
	err := c.do(ctx, http.MethodGet, "/readyz", nil, &out)
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusServiceUnavailable {
		out = Readiness{Status: "not ready", Reason: strings.Join(se.Errors, "; ")}
		_ = json.Unmarshal([]byte(out.Reason), &out) // the body, {"status","reason"}
		return out, nil
	}
	return out, err
}

// Evaluation is one evaluation of the job's autoscaler.
type Evaluation struct {
	Time     time.Time `json:"time"`
	Outcome  string    `json:"outcome"`
	Vertices []struct {
		Name           string `json:"name"`
		Parallelism    int32  `json:"parallelism"`
		NewParallelism int32  `json:"newParallelism"`
		Change         string `json:"change"`
		Reason         string `json:"reason"`
	} `json:"vertices"`
}

// Autoscaler is GET /jobs/{id}/autoscaler: whether the job's autoscaler
// runs, how many rescales it asked, its latest evaluation and the latest
// that rescaled the job or recommended it.
type Autoscaler struct {
	Enabled      bool        `json:"enabled"`
	Rescales     int64       `json:"rescales"`
	Last         *Evaluation `json:"last"`
	LastDecision *Evaluation `json:"lastDecision"`
}

// Autoscaler returns what the job's autoscaler reports.
func (c *Client) Autoscaler(ctx context.Context, id string) (*Autoscaler, error) {
	var out Autoscaler
	if err := c.do(ctx, http.MethodGet, "/jobs/"+id+"/autoscaler", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
