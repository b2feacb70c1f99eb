package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/checkpoint/storage"
)

// takeCheckpoint is sluice checkpoint JOB [--full]: a checkpoint now
// (Flink's flink checkpoint), waited for; it prints where it is.
func takeCheckpoint(ctx context.Context, c *api.Client, ref string, o options, out io.Writer) error {
	job, err := c.Job(ctx, ref)
	if err != nil {
		return err
	}
	trig, err := c.TriggerCheckpoint(ctx, job.JID, o.full)
	if err != nil {
		return err
	}
	id, loc, err := c.WaitCheckpoint(ctx, job.JID, trig, pollEvery)
	if err != nil {
		return err
	}
	if o.output == outputJSON {
		return printJSON(out, struct {
			JobID        string `json:"jid"`
			CheckpointID int64  `json:"checkpointId"`
			Location     string `json:"location"`
		}{job.JID, id, loc})
	}
	fmt.Fprintf(out, "checkpoint %d of job %s stored in %s\n", id, job.Name, loc)
	return nil
}

// disposeSavepoint is sluice savepoint --dispose PATH: the server deletes
// the savepoint (Flink's POST /savepoint-disposal); when no server
// answers, the command deletes it itself, with the same check that PATH
// is a savepoint.
func disposeSavepoint(ctx context.Context, c *api.Client, path string, o options, out io.Writer) error {
	how := "by the server"
	err := c.DisposeSavepoint(ctx, path, pollEvery)
	if errors.Is(err, syscall.ECONNREFUSED) {
		how = "locally (no server at " + c.BaseURL + ")"
		err = storage.DisposeSavepoint(ctx, nil, path, nil)
	}
	if err != nil {
		return err
	}
	if o.output == outputJSON {
		return printJSON(out, struct {
			Disposed string `json:"disposed"`
		}{path})
	}
	fmt.Fprintf(out, "savepoint %s disposed of %s\n", path, how)
	return nil
}
