package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/api"
)

// rescale is sluice rescale JOB [PARALLELISM]: without a parallelism it
// prints the job's resource requirements; with one it sets every vertex
// (or the --vertex one) to it (a vertex's max parallelism where that is
// lower) through PUT /jobs/:jobid/resource-requirements and, unless
// --no-wait, waits until the job runs at it.
func rescale(ctx context.Context, c *api.Client, args []string, o options, out io.Writer) error {
	job, err := c.Job(ctx, args[0])
	if err != nil {
		return err
	}
	if len(args) == 1 {
		return printRequirements(ctx, c, job, o, out)
	}
	p, err := strconv.Atoi(args[1])
	if err != nil || p < 1 {
		return fmt.Errorf("%w: parallelism %q: want a whole number of at least 1", errUsage, args[1])
	}
	req, err := c.ResourceRequirements(ctx, job.JID)
	if err != nil {
		return err
	}
	want := map[string]int{}
	for _, v := range job.Vertices {
		if o.vertex != "" && v.ID != o.vertex {
			continue
		}
		q := min(p, v.MaxParallelism)
		req[v.ID] = api.JobVertexResourceRequirements{Parallelism: api.ParallelismBounds{LowerBound: q, UpperBound: q}}
		want[v.ID] = q
	}
	if len(want) == 0 {
		return fmt.Errorf("%w: job %s has no vertex %s (sluice rescale %s lists them)", errUsage, job.Name, o.vertex, job.Name)
	}
	start := time.Now()
	if err := c.SetResourceRequirements(ctx, job.JID, req); err != nil {
		return err
	}
	if o.noWait {
		fmt.Fprintf(out, "job %s: rescale to %d asked\n", job.Name, p)
		return nil
	}
	for {
		job, err = c.Job(ctx, job.JID)
		if err != nil {
			return err
		}
		if job.State == "RUNNING" && runsAt(job, want) {
			break
		}
		if slices.Contains([]string{"FINISHED", "FAILED", "CANCELED"}, job.State) {
			return fmt.Errorf("job %s ended (%s) before it ran at the parallelism asked", job.Name, job.State)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s does not run at the parallelism asked yet (sluice rescale %s shows where it is): %w", job.Name, job.Name, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
	if o.output == outputJSON {
		return printJSON(out, struct {
			JobID   string  `json:"jid"`
			Seconds float64 `json:"seconds"`
		}{job.JID, time.Since(start).Seconds()})
	}
	fmt.Fprintf(out, "job %s rescaled to %d in %v\n", job.Name, p, time.Since(start).Round(time.Millisecond))
	return nil
}

// runsAt reports whether every vertex of want runs at its parallelism.
func runsAt(job api.JobDetailsInfo, want map[string]int) bool {
	for _, v := range job.Vertices {
		if p, ok := want[v.ID]; ok && v.Parallelism != p {
			return false
		}
	}
	return true
}

func printRequirements(ctx context.Context, c *api.Client, job api.JobDetailsInfo, o options, out io.Writer) error {
	req, err := c.ResourceRequirements(ctx, job.JID)
	if err != nil {
		return err
	}
	if o.output == outputJSON {
		return printJSON(out, req)
	}
	w := table(out)
	fmt.Fprintln(w, "VERTEX\tNAME\tPARALLELISM\tLOWER\tUPPER\tMAX")
	for _, v := range job.Vertices {
		b := req[v.ID].Parallelism
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\n", v.ID, v.Name, v.Parallelism, b.LowerBound, b.UpperBound, v.MaxParallelism)
	}
	return w.Flush()
}
