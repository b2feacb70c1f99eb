package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/runtime"
)

// exceptionSource is a job that keeps its failures (*runtime.Job).
type exceptionSource interface {
	Exceptions() ([]runtime.JobException, bool)
}

// errorName is the name of an error's type: the innermost one of its
// chain that is not a plain wrapper, as Flink names the exception class.
func errorName(err error) string {
	name := fmt.Sprintf("%T", err)
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch n := fmt.Sprintf("%T", e); n {
		case "*fmt.wrapError", "*fmt.wrapErrors", "*errors.joinError":
		default:
			name = n
		}
	}
	return name
}

// handleExceptions is GET /jobs/:jobid/exceptions (?maxExceptions=N).
func (s *Server) handleExceptions(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	out := JobExceptionsInfoWithHistory{AllExceptions: []any{},
		ExceptionHistory: JobExceptionHistory{Entries: []RootExceptionInfo{}}}
	src, ok := e.job.(exceptionSource)
	if !ok {
		writeJSON(w, http.StatusOK, out)
		return
	}
	limit := -1
	if q := r.URL.Query().Get("maxExceptions"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "maxExceptions %q: want a number, 0 or more", q)
			return
		}
		limit = n
	}
	exs, truncated := src.Exceptions()
	if limit >= 0 && len(exs) > limit {
		exs, truncated = exs[:limit], true
	}
	out.Truncated, out.ExceptionHistory.Truncated = truncated, truncated
	for i, x := range exs {
		info := RootExceptionInfo{ExceptionName: errorName(x.Err), Stacktrace: x.Err.Error(), Timestamp: x.Time.UnixMilli(),
			FailureLabels: map[string]string{}, ConcurrentExceptions: []any{}}
		if x.Task != "" {
			task := x.Task
			info.TaskName = &task
			host := hostname
			if x.Worker != "" {
				host = x.Worker
			}
			info.Endpoint, info.TaskManagerID = &host, &host
		}
		if i == 0 {
			msg, ts := info.Stacktrace, info.Timestamp
			out.RootException, out.Timestamp = &msg, &ts
		}
		out.ExceptionHistory.Entries = append(out.ExceptionHistory.Entries, info)
	}
	writeJSON(w, http.StatusOK, out)
}
