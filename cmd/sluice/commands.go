package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/api"
)

// pollEvery is how often savepoint operations are polled.
const pollEvery = 100 * time.Millisecond

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// ms prints milliseconds as the checkpointdemo does.
func ms(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%d ms", v)
}

// size prints bytes as the checkpointdemo does.
func size(n int64) string {
	switch {
	case n < 0:
		return "-"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func stamp(msec int64) string {
	if msec <= 0 {
		return "-"
	}
	return time.UnixMilli(msec).Format("2006-01-02 15:04:05")
}

func listJobs(ctx context.Context, c *api.Client, out io.Writer) error {
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		fmt.Fprintln(out, "no jobs")
		return nil
	}
	w := table(out)
	fmt.Fprintln(w, "ID\tNAME\tSTATE\tSTART\tDURATION\tTASKS\t")
	for _, j := range jobs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d/%d running\n", j.JID, j.Name, j.State, stamp(j.StartTime),
			(time.Duration(j.Duration) * time.Millisecond).Round(time.Second), j.Tasks["running"], j.Tasks["total"])
	}
	return w.Flush()
}

func showCheckpoints(ctx context.Context, c *api.Client, ref string, id int64, out io.Writer) error {
	job, err := c.Job(ctx, ref)
	if err != nil {
		return err
	}
	st, err := c.Checkpoints(ctx, job.JID)
	if err != nil {
		return err
	}
	n := st.Counts
	fmt.Fprintf(out, "job %s (%s), %s: checkpoints completed %d, failed %d, in progress %d, restored %d\n",
		job.Name, job.JID, job.State, n.Completed, n.Failed, n.InProgress, n.Restored)
	if d := st.Summary.EndToEndDuration; n.Completed > 0 {
		fmt.Fprintf(out, "end-to-end duration: min %s, avg %s, p50 %s, p90 %s, p99 %s, max %s\n",
			ms(d.Min), ms(d.Avg), ms(int64(d.P50)), ms(int64(d.P90)), ms(int64(d.P99)), ms(d.Max))
	}
	if r := st.Latest.Restored; r != nil {
		kind := "checkpoint"
		if r.IsSavepoint {
			kind = "savepoint"
		}
		fmt.Fprintf(out, "restored from %s %d at %s (%s)\n", kind, r.ID, stamp(r.RestoreTimestamp), r.ExternalPath)
	}
	if id == 0 {
		switch {
		case st.Latest.Completed != nil:
			id = st.Latest.Completed.ID
		case st.Latest.Failed != nil:
			id = st.Latest.Failed.ID
		default:
			fmt.Fprintln(out, "no checkpoint has finished yet")
			return nil
		}
	}
	cp, err := c.CheckpointDetails(ctx, job.JID, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\ncheckpoint %d: %s, %s, end-to-end %s, size %s, full size %s, persisted %s\n", cp.ID,
		strings.ToLower(strings.ReplaceAll(cp.CheckpointType, "_", " ")), cp.Status, ms(cp.EndToEndDuration),
		size(cp.CheckpointedSize), size(cp.StateSize), size(cp.PersistedData))
	if f := cp.FailedCheckpointFields; f != nil {
		fmt.Fprintf(out, "failed: %s\n", f.FailureMessage)
	}
	if p := cp.CompletedCheckpointFields; p != nil && p.ExternalPath != "" {
		fmt.Fprintf(out, "path %s\n", p.ExternalPath)
	}
	fmt.Fprintln(out)
	w := table(out)
	fmt.Fprintln(w, "vertex\tsub\tstart_delay\talignment\tsync\tasync\tend_to_end\tpersisted\tunaligned\t")
	for _, v := range job.Vertices {
		if _, ok := cp.Tasks[v.ID]; !ok {
			continue
		}
		sub, err := c.SubtaskDetails(ctx, job.JID, id, v.ID)
		if err != nil {
			return err
		}
		for _, s := range sub.Subtasks {
			f := s.CompletedSubtaskFields
			if f == nil {
				fmt.Fprintf(w, "%s\t%d\t-\t-\t-\t-\t-\t-\t%s\n", v.Name, s.Index, s.Status)
				continue
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%t\n", v.Name, s.Index, ms(f.StartDelay), ms(f.Alignment.Duration),
				ms(f.Checkpoint.Sync), ms(f.Checkpoint.Async), ms(f.EndToEndDuration), size(f.Alignment.Persisted), f.UnalignedCheckpoint)
		}
	}
	return w.Flush()
}

func savepoint(ctx context.Context, c *api.Client, ref string, o options, out io.Writer) error {
	job, err := c.Job(ctx, ref)
	if err != nil {
		return err
	}
	trig, err := c.TriggerSavepoint(ctx, job.JID, o.dir)
	if err != nil {
		return err
	}
	if o.noWait {
		fmt.Fprintf(out, "savepoint of job %s triggered: %s\n", job.Name, trig)
		return nil
	}
	loc, err := c.WaitSavepoint(ctx, job.JID, trig, pollEvery)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "savepoint of job %s stored in %s\n", job.Name, loc)
	return nil
}

func stopJob(ctx context.Context, c *api.Client, ref string, o options, out io.Writer) error {
	job, err := c.Job(ctx, ref)
	if err != nil {
		return err
	}
	trig, err := c.Stop(ctx, job.JID, o.dir, o.drain)
	if err != nil {
		return err
	}
	loc, err := c.WaitSavepoint(ctx, job.JID, trig, pollEvery)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "job %s stopped; savepoint stored in %s\n", job.Name, loc)
	return nil
}

func cancelJob(ctx context.Context, c *api.Client, ref string, out io.Writer) error {
	job, err := c.Job(ctx, ref)
	if err != nil {
		return err
	}
	if err := c.Cancel(ctx, job.JID); err != nil {
		return err
	}
	fmt.Fprintf(out, "job %s (%s) cancelled\n", job.Name, job.JID)
	return nil
}
