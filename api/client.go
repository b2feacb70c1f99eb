package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls the API of a Sluice server (or, for the read-only calls
// and the savepoint operations, a Flink JobManager).
type Client struct {
	// BaseURL is the server's address, like http://127.0.0.1:8081.
	BaseURL string
	// Token is sent as a bearer token when set.
	Token string
	// HTTP is the client used; nil is http.DefaultClient.
	HTTP *http.Client
}

// APIError is an error answer of the server.
type APIError struct {
	Status int
	Errors []string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), strings.Join(e.Errors, "; "))
}

// ErrSavepointFailed is returned (wrapped) by WaitSavepoint when the
// savepoint failed; the message has the server's cause.
var ErrSavepointFailed = errors.New("savepoint failed")

// NewClient returns a client of the server at base ("host:port" or a
// URL).
func NewClient(base, token string) *Client {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{BaseURL: strings.TrimRight(base, "/"), Token: token}
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var er ErrorResponse
		if json.Unmarshal(data, &er) != nil || len(er.Errors) == 0 {
			er.Errors = []string{strings.TrimSpace(string(data))}
		}
		return fmt.Errorf("%s %s: %w", method, path, &APIError{Status: resp.StatusCode, Errors: er.Errors})
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

// Jobs returns GET /jobs/overview.
func (c *Client) Jobs(ctx context.Context) ([]JobDetails, error) {
	var out MultipleJobsDetails
	err := c.get(ctx, "/jobs/overview", &out)
	return out.Jobs, err
}

// Job returns GET /jobs/:jobid.
func (c *Client) Job(ctx context.Context, jobID string) (JobDetailsInfo, error) {
	var out JobDetailsInfo
	err := c.get(ctx, "/jobs/"+url.PathEscape(jobID), &out)
	return out, err
}

// ExecutionResult returns GET /jobs/:jobid/execution-result: how the job
// ended, with what its result store recorded.
func (c *Client) ExecutionResult(ctx context.Context, jobID string) (JobExecutionResultResponse, error) {
	var out JobExecutionResultResponse
	err := c.get(ctx, "/jobs/"+url.PathEscape(jobID)+"/execution-result", &out)
	return out, err
}

// Checkpoints returns GET /jobs/:jobid/checkpoints.
func (c *Client) Checkpoints(ctx context.Context, jobID string) (CheckpointingStatistics, error) {
	var out CheckpointingStatistics
	err := c.get(ctx, "/jobs/"+url.PathEscape(jobID)+"/checkpoints", &out)
	return out, err
}

// CheckpointDetails returns GET /jobs/:jobid/checkpoints/details/:checkpointid.
func (c *Client) CheckpointDetails(ctx context.Context, jobID string, checkpointID int64) (CheckpointStatistics, error) {
	var out CheckpointStatistics
	err := c.get(ctx, fmt.Sprintf("/jobs/%s/checkpoints/details/%d", url.PathEscape(jobID), checkpointID), &out)
	return out, err
}

// SubtaskDetails returns
// GET /jobs/:jobid/checkpoints/details/:checkpointid/subtasks/:vertexid.
func (c *Client) SubtaskDetails(ctx context.Context, jobID string, checkpointID int64, vertexID string) (TaskCheckpointStatisticsWithSubtaskDetails, error) {
	var out TaskCheckpointStatisticsWithSubtaskDetails
	err := c.get(ctx, fmt.Sprintf("/jobs/%s/checkpoints/details/%d/subtasks/%s", url.PathEscape(jobID), checkpointID, url.PathEscape(vertexID)), &out)
	return out, err
}

// Backpressure returns GET /jobs/:jobid/vertices/:vertexid/backpressure.
func (c *Client) Backpressure(ctx context.Context, jobID, vertexID string) (JobVertexBackPressureInfo, error) {
	var out JobVertexBackPressureInfo
	err := c.get(ctx, fmt.Sprintf("/jobs/%s/vertices/%s/backpressure", url.PathEscape(jobID), url.PathEscape(vertexID)), &out)
	return out, err
}

// TriggerSavepoint starts a savepoint into dir ("" for the job's
// configured savepoint directory) and returns its trigger id.
func (c *Client) TriggerSavepoint(ctx context.Context, jobID, dir string) (string, error) {
	var out TriggerResponse
	err := c.do(ctx, http.MethodPost, "/jobs/"+url.PathEscape(jobID)+"/savepoints", SavepointTriggerRequest{TargetDirectory: dir}, &out)
	return out.RequestID, err
}

// Stop starts a stop-with-savepoint into dir, draining event time first
// when drain is set, and returns its trigger id.
func (c *Client) Stop(ctx context.Context, jobID, dir string, drain bool) (string, error) {
	var out TriggerResponse
	err := c.do(ctx, http.MethodPost, "/jobs/"+url.PathEscape(jobID)+"/stop", StopWithSavepointRequest{TargetDirectory: dir, Drain: drain}, &out)
	return out.RequestID, err
}

// SavepointStatus returns GET /jobs/:jobid/savepoints/:triggerid.
func (c *Client) SavepointStatus(ctx context.Context, jobID, trigger string) (AsynchronousOperationResult, error) {
	var out AsynchronousOperationResult
	err := c.get(ctx, "/jobs/"+url.PathEscape(jobID)+"/savepoints/"+url.PathEscape(trigger), &out)
	return out, err
}

// WaitSavepoint polls a savepoint operation until it completed and
// returns the savepoint's location.
func (c *Client) WaitSavepoint(ctx context.Context, jobID, trigger string, every time.Duration) (string, error) {
	for {
		res, err := c.SavepointStatus(ctx, jobID, trigger)
		if err != nil {
			return "", err
		}
		if res.Status.ID == StatusCompleted {
			if res.Operation == nil {
				return "", fmt.Errorf("%w: the server gave no outcome", ErrSavepointFailed)
			}
			if f := res.Operation.FailureCause; f != nil {
				return "", fmt.Errorf("%w: %s", ErrSavepointFailed, f.StackTrace)
			}
			return res.Operation.Location, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(every):
		}
	}
}

// Cancel cancels the job (PATCH /jobs/:jobid?mode=cancel).
func (c *Client) Cancel(ctx context.Context, jobID string) error {
	return c.do(ctx, http.MethodPatch, "/jobs/"+url.PathEscape(jobID)+"?mode=cancel", nil, nil)
}

// ResourceRequirements returns GET /jobs/:jobid/resource-requirements:
// every vertex's parallelism bounds, by vertex id.
func (c *Client) ResourceRequirements(ctx context.Context, jobID string) (JobResourceRequirements, error) {
	var out JobResourceRequirements
	err := c.get(ctx, "/jobs/"+url.PathEscape(jobID)+"/resource-requirements", &out)
	return out, err
}

// SetResourceRequirements is PUT /jobs/:jobid/resource-requirements: the
// job rescales in place to what the bounds ask; the answer comes before
// it did (Job shows the parallelism it runs at).
func (c *Client) SetResourceRequirements(ctx context.Context, jobID string, req JobResourceRequirements) error {
	return c.do(ctx, http.MethodPut, "/jobs/"+url.PathEscape(jobID)+"/resource-requirements", req, nil)
}
