package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/inspect"
)

// Output formats (--output).
const (
	outputText = "text"
	outputJSON = "json"
)

// printJSON writes v as indented JSON.
func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jobWithResult is an entry of sluice jobs --output json: the job's
// /jobs/overview entry and, once it ended, its execution result.
type jobWithResult struct {
	api.JobDetails
	Result *api.JobExecutionResult `json:"job-execution-result,omitempty"`
}

func listJobsJSON(ctx context.Context, c *api.Client, out io.Writer) error {
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return err
	}
	list := make([]jobWithResult, 0, len(jobs))
	for _, j := range jobs {
		e := jobWithResult{JobDetails: j}
		if r, err := c.ExecutionResult(ctx, j.JID); err == nil {
			e.Result = r.Result
		}
		list = append(list, e)
	}
	return printJSON(out, struct {
		Jobs []jobWithResult `json:"jobs"`
	}{list})
}

// checkpointsReport is sluice checkpoints --output json: the job's
// checkpoint statistics, the checkpoint shown and its subtasks per vertex
// id, in the API's shapes.
type checkpointsReport struct {
	JobID      string                                                    `json:"jid"`
	Name       string                                                    `json:"name"`
	State      string                                                    `json:"state"`
	Statistics api.CheckpointingStatistics                               `json:"checkpoints"`
	Checkpoint *api.CheckpointStatistics                                 `json:"checkpoint,omitempty"`
	Subtasks   map[string]api.TaskCheckpointStatisticsWithSubtaskDetails `json:"subtasks,omitempty"`
}

func showCheckpointsJSON(ctx context.Context, c *api.Client, ref string, id int64, out io.Writer) error {
	job, err := c.Job(ctx, ref)
	if err != nil {
		return err
	}
	st, err := c.Checkpoints(ctx, job.JID)
	if err != nil {
		return err
	}
	rep := checkpointsReport{JobID: job.JID, Name: job.Name, State: job.State, Statistics: st}
	if id == 0 {
		switch {
		case st.Latest.Completed != nil:
			id = st.Latest.Completed.ID
		case st.Latest.Failed != nil:
			id = st.Latest.Failed.ID
		}
	}
	if id != 0 {
		cp, err := c.CheckpointDetails(ctx, job.JID, id)
		if err != nil {
			return err
		}
		rep.Checkpoint = &cp
		rep.Subtasks = map[string]api.TaskCheckpointStatisticsWithSubtaskDetails{}
		for _, v := range job.Vertices {
			if _, ok := cp.Tasks[v.ID]; !ok {
				continue
			}
			sub, err := c.SubtaskDetails(ctx, job.JID, id, v.ID)
			if err != nil {
				return err
			}
			rep.Subtasks[v.ID] = sub
		}
	}
	return printJSON(out, rep)
}

func inspectPathJSON(path string, out io.Writer) error {
	r, err := inspect.Load(path)
	if err != nil {
		return err
	}
	return printJSON(out, r)
}

// checkFormat refuses an --output that is neither text nor json.
func checkFormat(f string) error {
	if f != outputText && f != outputJSON {
		return fmt.Errorf("%w: --output %q: want text or json", errUsage, f)
	}
	return nil
}
