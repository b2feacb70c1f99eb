package runtime

import (
	"slices"
	"sync"
	"time"
)

// ExceptionHistorySize is how many failures a job keeps (Flink's
// web.exception-history-size default).
const ExceptionHistorySize = 16

// JobException is one failure of a job: the error that ended an attempt
// (which then restarted, or failed the job), when, and the task it came
// from.
type JobException struct {
	Time time.Time
	// Task is the subtask that failed first ("vertex (2/4)"); empty when
	// the failure was not a task's (deployment, restore, the checkpoint
	// coordinator reports "checkpoint coordinator").
	Task string
	// Worker is the worker that ran the task in a job on several hosts.
	Worker string
	Err    error
	// Attempt is the number of the attempt that failed (0 for the first).
	Attempt int
}

// exceptionHistory keeps the latest failures of a job, oldest first.
type exceptionHistory struct {
	mu      sync.Mutex
	entries []JobException
	dropped int // how many older entries were let go
}

func (h *exceptionHistory) add(e JobException) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entries = append(h.entries, e)
	if n := len(h.entries) - ExceptionHistorySize; n > 0 {
		h.entries = slices.Delete(h.entries, 0, n)
		h.dropped += n
	}
}

// Exceptions returns the job's latest failures (at most
// ExceptionHistorySize), newest first, and whether older ones were let go.
func (j *Job) Exceptions() (entries []JobException, truncated bool) {
	h := &j.exceptions
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.entries)
	slices.Reverse(out)
	return out, h.dropped > 0
}

// noteFailure records the failure that ended attempt number (task is the
// task that failed first, if any).
func (j *Job) noteFailure(number int, task string, err error) {
	j.exceptions.add(JobException{Time: time.Now(), Task: task, Err: err, Attempt: number})
}
