package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrCheckpointFailed is returned (wrapped) by WaitCheckpoint when the
// checkpoint failed; ErrDisposalFailed by DisposeSavepoint.
var (
	ErrCheckpointFailed = errors.New("checkpoint failed")
	ErrDisposalFailed   = errors.New("savepoint disposal failed")
)

// TriggerCheckpoint starts a checkpoint now (full: a full one of an
// incremental state backend) and returns its trigger id.
func (c *Client) TriggerCheckpoint(ctx context.Context, jobID string, full bool) (string, error) {
	req := CheckpointTriggerRequest{}
	if full {
		req.CheckpointType = "FULL"
	}
	var out TriggerResponse
	err := c.do(ctx, http.MethodPost, "/jobs/"+url.PathEscape(jobID)+"/checkpoints", req, &out)
	return out.RequestID, err
}

// CheckpointStatus returns GET /jobs/:jobid/checkpoints/:triggerid.
func (c *Client) CheckpointStatus(ctx context.Context, jobID, trigger string) (CheckpointOperationResult, error) {
	var out CheckpointOperationResult
	err := c.get(ctx, "/jobs/"+url.PathEscape(jobID)+"/checkpoints/"+url.PathEscape(trigger), &out)
	return out, err
}

// WaitCheckpoint polls a triggered checkpoint until it ended and returns
// its id and (from a Sluice server) its directory.
func (c *Client) WaitCheckpoint(ctx context.Context, jobID, trigger string, every time.Duration) (int64, string, error) {
	for {
		res, err := c.CheckpointStatus(ctx, jobID, trigger)
		if err != nil {
			return 0, "", err
		}
		if res.Status.ID == StatusCompleted {
			switch op := res.Operation; {
			case op == nil:
				return 0, "", fmt.Errorf("%w: the server gave no outcome", ErrCheckpointFailed)
			case op.FailureCause != nil:
				return 0, "", fmt.Errorf("%w: %s", ErrCheckpointFailed, op.FailureCause.StackTrace)
			case op.CheckpointID == nil:
				return 0, "", fmt.Errorf("%w: the server gave no checkpoint id", ErrCheckpointFailed)
			default:
				return *op.CheckpointID, op.Location, nil
			}
		}
		if err := sleep(ctx, every); err != nil {
			return 0, "", err
		}
	}
}

// DisposeSavepoint has the server delete the savepoint at path
// (POST /savepoint-disposal) and waits until it did.
func (c *Client) DisposeSavepoint(ctx context.Context, path string, every time.Duration) error {
	var tr TriggerResponse
	if err := c.do(ctx, http.MethodPost, "/savepoint-disposal", SavepointDisposalRequest{SavepointPath: path}, &tr); err != nil {
		return err
	}
	for {
		var res DisposalOperationResult
		if err := c.get(ctx, "/savepoint-disposal/"+url.PathEscape(tr.RequestID), &res); err != nil {
			return err
		}
		if res.Status.ID == StatusCompleted {
			if res.Operation != nil && res.Operation.FailureCause != nil {
				return fmt.Errorf("%w: %s", ErrDisposalFailed, res.Operation.FailureCause.StackTrace)
			}
			return nil
		}
		if err := sleep(ctx, every); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// Overview returns GET /overview.
func (c *Client) Overview(ctx context.Context) (ClusterOverviewWithVersion, error) {
	var out ClusterOverviewWithVersion
	err := c.get(ctx, "/overview", &out)
	return out, err
}

// Vertex returns GET /jobs/:jobid/vertices/:vertexid.
func (c *Client) Vertex(ctx context.Context, jobID, vertexID string) (JobVertexDetailsInfo, error) {
	var out JobVertexDetailsInfo
	err := c.get(ctx, "/jobs/"+url.PathEscape(jobID)+"/vertices/"+url.PathEscape(vertexID), &out)
	return out, err
}

// Exceptions returns GET /jobs/:jobid/exceptions.
func (c *Client) Exceptions(ctx context.Context, jobID string) (JobExceptionsInfoWithHistory, error) {
	var out JobExceptionsInfoWithHistory
	err := c.get(ctx, "/jobs/"+url.PathEscape(jobID)+"/exceptions", &out)
	return out, err
}

// IsNoSavepointDirectory says whether err is the server's answer to a
// savepoint or stop request that named no directory for a job that has
// none (a client such as the CLI then names its own way to give one).
func IsNoSavepointDirectory(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		return false
	}
	for _, e := range ae.Errors {
		if strings.HasPrefix(e, "Config key [execution.checkpointing.savepoint-dir] is not set") {
			return true
		}
	}
	return false
}
