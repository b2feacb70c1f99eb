package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/sluicehq/sluice/checkpoint/snapshot"
)

// The job result store (Flink's FLIP-194): when a job reaches a terminal
// state its result is written, durably and checksummed, into the job's
// directory before any of its checkpoints is deleted. A later start of the
// same job reads it first: a finished job is not run again, and a cancelled
// or failed one is not silently started from scratch.
const (
	jobResultName  = "job-result"
	jobResultMagic = "SLUICEJR"
)

// Terminal job states recorded in a JobResult, with Flink's names.
const (
	ResultFinished = "FINISHED"
	ResultCanceled = "CANCELED"
	ResultFailed   = "FAILED"
)

// JobResult is how a job ended.
type JobResult struct {
	JobID string `json:"job_id"`
	// RunID is the execution that ended.
	RunID string `json:"run_id"`
	// Status is ResultFinished, ResultCanceled or ResultFailed.
	Status string `json:"status"`
	// Error is the failure of a failed job.
	Error string `json:"error,omitempty"`
	// EndTimestamp is when the job ended, unix milliseconds.
	EndTimestamp int64 `json:"end_timestamp"`
	// LastCheckpoint is the latest completed checkpoint of the run (0 if
	// none); Retained says whether the retention policy kept it.
	LastCheckpoint int64 `json:"last_checkpoint,omitempty"`
	Retained       bool  `json:"retained,omitempty"`
	// Savepoint is the savepoint a stop-with-savepoint ended with.
	Savepoint string `json:"savepoint,omitempty"`
	// Origin is the ended run's lineage (Metadata.Origin): a FINISHED job
	// started again with the same restore path does nothing.
	Origin string `json:"origin,omitempty"`
	// Clean is set once the checkpoints the retention policy discards are
	// deleted; a result that is not clean has its cleanup finished by the
	// next start (Flink's dirty entries).
	Clean bool `json:"clean"`
}

// End is EndTimestamp as a time.
func (r *JobResult) End() time.Time { return time.UnixMilli(r.EndTimestamp) }

// String says how the job ended, for logs and errors.
func (r *JobResult) String() string {
	s := fmt.Sprintf("%s at %s (run %s)", r.Status, r.End().UTC().Format(time.RFC3339), r.RunID)
	if r.Error != "" {
		s += ": " + r.Error
	}
	return s
}

// JobResultPath is the file of the job's result.
func (s *Storage) JobResultPath() string { return s.b.Path(jobResultName) }

// WriteJobResult records r durably (Backend.Put: on POSIX a temporary
// file, fsync, rename, directory fsync), replacing an earlier result.
func (s *Storage) WriteJobResult(r *JobResult) error {
	switch r.Status {
	case ResultFinished, ResultCanceled, ResultFailed:
	default:
		return fmt.Errorf("write job result: status %q is not terminal", r.Status)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("write job result: %w", err)
	}
	if err := s.b.Put(s.ctx(), jobResultName, snapshot.Frame(body, jobResultMagic)); err != nil {
		return fmt.Errorf("write job result %s: %w", s.JobResultPath(), err)
	}
	return nil
}

// ReadJobResult returns the recorded result of the job, or nil when there
// is none. A result file that fails its checksum is an error naming it
// (ErrCorrupt): the job's history is unknown, so nothing is assumed.
func (s *Storage) ReadJobResult() (*JobResult, error) {
	return readJobResult(s.ctx(), s.b, jobResultName)
}

// ReadJobResult reads the job result in the job directory dir (nil when
// there is none); for tools that read a job's directory offline.
func ReadJobResult(fsys FS, dir string) (*JobResult, error) {
	return readJobResult(context.Background(), NewPOSIX(fsys, dir), jobResultName)
}

func readJobResult(ctx context.Context, b Backend, key string) (*JobResult, error) {
	p := b.Path(key)
	f, err := b.Get(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fileError(p, err)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, fileError(p, err)
	}
	r, err := decodeJobResult(data)
	if err != nil {
		return nil, fileError(p, err)
	}
	return r, nil
}

// decodeJobResult decodes a job result file's bytes; what is not one, or
// not a terminal result, is ErrCorrupt.
func decodeJobResult(data []byte) (*JobResult, error) {
	body, err := snapshot.Unframe(data, jobResultMagic, "job result")
	if err != nil {
		return nil, err
	}
	var r JobResult
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%w: job result JSON: %v", ErrCorrupt, err)
	}
	switch r.Status {
	case ResultFinished, ResultCanceled, ResultFailed:
	default:
		return nil, fmt.Errorf("%w: job result of status %.40q, not a terminal one", ErrCorrupt, r.Status)
	}
	return &r, nil
}

// ClearJobResult removes the job's result: a new run was started by an
// explicit choice.
func (s *Storage) ClearJobResult() error {
	if err := s.b.DeleteBatch(s.ctx(), []string{jobResultName}); err != nil {
		return fmt.Errorf("clear job result %s: %w", s.JobResultPath(), err)
	}
	if sy, ok := s.b.(Syncer); ok {
		if err := sy.Sync(s.ctx(), ""); err != nil {
			return fmt.Errorf("clear job result: sync %s: %w", s.JobDir(), err)
		}
	}
	return nil
}
