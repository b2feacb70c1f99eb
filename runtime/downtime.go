package runtime

import (
	"slices"
	"sync"
	"time"
)

// FailoverDowntime is how long one failure kept the job from running:
// from when the job learned of it (a task's failure, a worker whose
// connections broke) to the tasks of the attempt that followed running,
// and to that attempt's first completed checkpoint (a failure during the
// restart continues the same outage). Zero durations: not yet.
type FailoverDowntime struct {
	Failed       time.Time
	Cause        string
	Running      time.Duration
	Checkpointed time.Duration
}

// maxDowntimes bounds the outages kept (Flink's exception history's
// default size).
const maxDowntimes = 16

// downtimes records the job's outages.
type downtimes struct {
	mu   sync.Mutex
	list []FailoverDowntime
	open bool // the latest has no checkpoint yet
}

// failed starts an outage, unless one is open (the restart failed too).
func (d *downtimes) failed(now time.Time, cause error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.open {
		return
	}
	msg := ""
	if cause != nil {
		msg = cause.Error()
	}
	d.list = append(d.list, FailoverDowntime{Failed: now, Cause: msg})
	if len(d.list) > maxDowntimes {
		d.list = slices.Delete(d.list, 0, len(d.list)-maxDowntimes)
	}
	d.open = true
}

// running: an attempt's tasks run.
func (d *downtimes) running(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.open {
		if l := &d.list[len(d.list)-1]; l.Running == 0 {
			l.Running = max(now.Sub(l.Failed), time.Nanosecond)
		}
	}
}

// checkpointed: an attempt running since the outage completed a
// checkpoint; the outage is over.
func (d *downtimes) checkpointed(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.open {
		l := &d.list[len(d.list)-1]
		if l.Running == 0 {
			return // a checkpoint of the failed attempt, completing late
		}
		l.Checkpointed = max(now.Sub(l.Failed), time.Nanosecond)
		d.open = false
	}
}

// Downtimes are the job's latest outages after failures, oldest first
// (at most 16): the REST job details and the metrics show them.
func (j *Job) Downtimes() []FailoverDowntime {
	j.outages.mu.Lock()
	defer j.outages.mu.Unlock()
	return slices.Clone(j.outages.list)
}

// Downtime is the current outage (Flink's downtime gauge): how long the
// job has not been running since a failure, 0 while it runs.
func (j *Job) Downtime() time.Duration {
	j.outages.mu.Lock()
	defer j.outages.mu.Unlock()
	if !j.outages.open {
		return 0
	}
	if l := j.outages.list[len(j.outages.list)-1]; l.Running == 0 {
		return time.Since(l.Failed)
	}
	return 0
}
