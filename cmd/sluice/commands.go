package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/checkpoint/storage"
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
	fmt.Fprintln(w, "ID\tNAME\tSTATE\tSTART\tDURATION\tTASKS\tRESULT\t")
	for _, j := range jobs {
		result := "-"
		if r, err := c.ExecutionResult(ctx, j.JID); err == nil && r.Result != nil {
			result = r.Result.ApplicationStatus
			if jr := r.Result.JobResult; jr != nil {
				result = describeResult(jr.Status, jr.LastCheckpoint, jr.Retained, jr.Savepoint, jr.Error)
				if jr.Previous {
					result += " (an earlier run; this one did nothing)"
				}
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d/%d running\t%s\n", j.JID, j.Name, j.State, stamp(j.StartTime),
			(time.Duration(j.Duration) * time.Millisecond).Round(time.Second), j.Tasks["running"], j.Tasks["total"], result)
	}
	return w.Flush()
}

// describeResult says in a table cell how a job ended.
func describeResult(status string, last int64, retained bool, savepoint, errText string) string {
	s := status
	switch {
	case savepoint != "":
		s += ", savepoint " + savepoint
	case last > 0 && retained:
		s += fmt.Sprintf(", checkpoint %d retained", last)
	}
	if errText != "" {
		if len(errText) > 80 {
			errText = errText[:77] + "..."
		}
		s += ": " + errText
	}
	return s
}

// jobDir is one job directory of sluice jobs --checkpoint-dir.
type jobDir struct {
	JobID       string   `json:"job-id"`
	State       string   `json:"state"`
	Ended       int64    `json:"end-time"`
	RunID       string   `json:"run-id,omitempty"`
	Checkpoints []string `json:"checkpoints"`
	Detail      string   `json:"detail"`
}

// listJobDirs lists, offline, the jobs of a checkpoint directory: per job
// directory, whether a process runs it (the lock), its recorded result,
// and its completed checkpoints.
func listJobDirs(dir string, out io.Writer) error {
	dirs, err := readJobDirs(dir)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		fmt.Fprintf(out, "no job directories in %s\n", dir)
		return nil
	}
	w := table(out)
	fmt.Fprintln(w, "JOB ID\tSTATE\tENDED\tRUN\tCHECKPOINTS\tDETAIL\t")
	for _, d := range dirs {
		run := d.RunID
		if run == "" {
			run = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", d.JobID, d.State, stamp(d.Ended), run, checkpointList(d.Checkpoints), d.Detail)
	}
	return w.Flush()
}

func listJobDirsJSON(dir string, out io.Writer) error {
	dirs, err := readJobDirs(dir)
	if err != nil {
		return err
	}
	if dirs == nil {
		dirs = []jobDir{}
	}
	return printJSON(out, struct {
		Jobs []jobDir `json:"jobs"`
	}{dirs})
}

// readJobDirs reads the job directories of a checkpoint directory.
func readJobDirs(dir string) ([]jobDir, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []jobDir
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		jd := filepath.Join(dir, e.Name())
		res, rerr := storage.ReadJobResult(storage.OSFS{}, jd)
		chks := completedCheckpoints(jd)
		if res == nil && rerr == nil && len(chks) == 0 && !exists(filepath.Join(jd, "shared")) {
			continue // not a job directory
		}
		state, ended, run, detail := "SUSPENDED", int64(-1), "", "not running; resumes from its latest checkpoint"
		if len(chks) == 0 {
			state, detail = "CREATED", "not running; no completed checkpoint"
		}
		switch {
		case rerr != nil:
			state, detail = "UNKNOWN", rerr.Error()
		case res != nil:
			state, ended, run = res.Status, res.EndTimestamp, res.RunID
			detail = describeResult("", res.LastCheckpoint, res.Retained, res.Savepoint, res.Error)
			detail = strings.TrimPrefix(detail, ", ")
			if !res.Clean {
				detail += " (cleanup unfinished)"
			}
		}
		if holder, held, err := storage.LockHolder(jd); err == nil && held {
			state, detail = "RUNNING", "held by "+holder
		}
		if chks == nil {
			chks = []string{}
		}
		out = append(out, jobDir{JobID: e.Name(), State: state, Ended: ended, RunID: run, Checkpoints: chks, Detail: detail})
	}
	return out, nil
}

func completedCheckpoints(jobDir string) []string {
	entries, _ := os.ReadDir(jobDir)
	var ids []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "chk-") && exists(filepath.Join(jobDir, e.Name(), "_metadata")) {
			ids = append(ids, strings.TrimPrefix(e.Name(), "chk-"))
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		x, _ := strconv.ParseInt(a, 10, 64)
		y, _ := strconv.ParseInt(b, 10, 64)
		return int(x - y)
	})
	return ids
}

func checkpointList(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	return strings.Join(ids, ",")
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
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
		return savepointDirError(o.dir, err)
	}
	if o.noWait {
		fmt.Fprintf(out, "savepoint of job %s triggered: %s\n", job.Name, trig)
		return nil
	}
	loc, err := c.WaitSavepoint(ctx, job.JID, trig, pollEvery)
	if err != nil {
		return savepointDirError(o.dir, err)
	}
	if o.output == outputJSON {
		return printJSON(out, struct {
			JobID    string `json:"jid"`
			Location string `json:"location"`
		}{job.JID, loc})
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
		return savepointDirError(o.dir, err)
	}
	loc, err := c.WaitSavepoint(ctx, job.JID, trig, pollEvery)
	if err != nil && ctx.Err() == nil {
		// The operation's outcome may be lost (the server abandoned its
		// wait, or forgot the trigger) although the job stopped with the
		// savepoint: the job's recorded result says so.
		if sp, ok := stoppedWithSavepoint(ctx, c, job.JID, o.dir); ok {
			loc, err = sp, nil
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			err = fmt.Errorf("%w\n(the job's server went away before it said where the savepoint is: the savepoint may be complete; "+
				"sluice inspect reads it, sluice jobs --checkpoint-dir lists the job's recorded result)", err)
		}
	}
	if err != nil {
		return savepointDirError(o.dir, err)
	}
	if o.output == outputJSON {
		return printJSON(out, struct {
			JobID    string `json:"jid"`
			Location string `json:"location"`
		}{job.JID, loc})
	}
	fmt.Fprintf(out, "job %s stopped; savepoint stored in %s\n", job.Name, loc)
	return nil
}

// savepointDirError names the ways to give the savepoint directory, the
// --dir flag and the job's configuration keys, in an error of the
// savepoint or stop command about it: the job has none, or it could not
// be written.
func savepointDirError(dir string, err error) error {
	switch {
	case api.IsNoSavepointDirectory(err):
		return fmt.Errorf("the job has no savepoint directory: give one with --dir DIR, or set execution.checkpointing.savepoint-dir "+
			"(or execution.checkpointing.dir: savepoints then go to <dir>/savepoints) in the job's configuration (the server said: %w)", err)
	case strings.Contains(err.Error(), "savepoint directory"):
		from := "--dir " + dir
		if dir == "" {
			from = "the job's execution.checkpointing.savepoint-dir, else <execution.checkpointing.dir>/savepoints; --dir DIR gives another"
		}
		return fmt.Errorf("%w\n(the savepoint directory is %s)", err, from)
	}
	return err
}

// stoppedWithSavepoint returns the savepoint a job's recorded result
// says the job finished with (in dir, when dir is set); ok is false
// unless the API says so.
func stoppedWithSavepoint(ctx context.Context, c *api.Client, jobID, dir string) (string, bool) {
	r, err := c.ExecutionResult(ctx, jobID)
	if err != nil || r.Result == nil || r.Result.JobResult == nil {
		return "", false
	}
	jr := r.Result.JobResult
	sp := strings.TrimSuffix(jr.Savepoint, "/_metadata")
	if jr.Status != "FINISHED" || sp == "" || jr.Previous || (dir != "" && !strings.HasPrefix(sp, strings.TrimRight(dir, "/")+"/")) {
		return "", false
	}
	return sp, true
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
