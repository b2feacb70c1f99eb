package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
)

// CheckpointResult is a checkpoint taken on request (TriggerCheckpoint).
type CheckpointResult struct {
	ID int64
	// Path is the checkpoint's _metadata.
	Path string
}

// checkpointRequest is a TriggerCheckpoint call waiting for its
// checkpoint: first for it to be triggered (id 0), then to end.
type checkpointRequest struct {
	full bool
	id   int64
	done chan checkpointOutcome
}

type checkpointOutcome struct {
	res CheckpointResult
	err error
}

// TriggerCheckpoint takes a checkpoint now, outside the periodic schedule
// (Flink's POST /jobs/:jobid/checkpoints), and waits until it completed
// or failed. full asks for a full checkpoint of an incremental state
// backend (Flink's checkpointType FULL); otherwise the configured kind.
// The request ignores the min pause but waits for a slot under the max
// concurrent checkpoints; the first checkpoint of its kind triggered
// after the call is the one it waits for (a periodic one that takes the
// slot first serves it too).
func (j *Job) TriggerCheckpoint(ctx context.Context, full bool) (CheckpointResult, error) {
	a := j.att.Load()
	if a == nil || a.driver == nil {
		return CheckpointResult{}, ErrNoCheckpointing
	}
	return a.driver.triggerCheckpoint(ctx, full)
}

func (d *checkpointDriver) triggerCheckpoint(ctx context.Context, full bool) (CheckpointResult, error) {
	req := &checkpointRequest{full: full, done: make(chan checkpointOutcome, 1)}
	kind := checkpoint.KindCheckpoint
	if full {
		kind = checkpoint.KindFullCheckpoint
	}
	var terr error
	ok := d.call(func() {
		d.mu.Lock()
		d.requests = append(d.requests, req)
		d.mu.Unlock()
		acts, err := d.coord.RequestCheckpoint(time.Now(), kind)
		if err != nil {
			d.dropRequest(req)
			terr = err
			return
		}
		d.exec(acts)
	})
	if !ok {
		return CheckpointResult{}, fmt.Errorf("checkpoint: %w", checkpoint.ErrCoordinatorStopped)
	}
	if terr != nil {
		return CheckpointResult{}, fmt.Errorf("checkpoint: %w", terr)
	}
	select {
	case o := <-req.done:
		return o.res, o.err
	case <-ctx.Done():
		d.mu.Lock()
		d.dropRequestLocked(req)
		d.mu.Unlock()
		return CheckpointResult{}, ctx.Err()
	}
}

func (d *checkpointDriver) dropRequest(req *checkpointRequest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropRequestLocked(req)
}

func (d *checkpointDriver) dropRequestLocked(req *checkpointRequest) {
	for i, r := range d.requests {
		if r == req {
			d.requests = append(d.requests[:i], d.requests[i+1:]...)
			return
		}
	}
}

// checkpointTriggered hands checkpoint id (of kind) to the requests still
// waiting for a trigger that it serves.
func (d *checkpointDriver) checkpointTriggered(id int64, kind checkpoint.Kind) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.requests {
		if r.id == 0 && (!r.full || kind == checkpoint.KindFullCheckpoint) {
			r.id = id
		}
	}
}

// checkpointEnded answers the requests waiting for checkpoint id.
func (d *checkpointDriver) checkpointEnded(id int64, path string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := d.requests[:0]
	for _, r := range d.requests {
		if r.id != id {
			kept = append(kept, r)
			continue
		}
		if err != nil {
			r.done <- checkpointOutcome{err: err}
		} else {
			r.done <- checkpointOutcome{res: CheckpointResult{ID: id, Path: path}}
		}
	}
	d.requests = kept
}

// failRequests answers every waiting request with err (the driver shut
// down).
func (d *checkpointDriver) failRequests(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.requests {
		r.done <- checkpointOutcome{err: err}
	}
	d.requests = nil
}
