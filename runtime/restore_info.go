package runtime

import (
	"sync/atomic"
	"time"
)

// RestoreInfo says what a job attempt restored and how long it took, for
// the restore span of traces and the API.
type RestoreInfo struct {
	Attempt      int
	CheckpointID int64
	Path         string
	IsSavepoint  bool
	// Start is when the attempt began restoring.
	Start time.Time
	// StateRestore is the time to read every operator's state (reading the
	// files is part of it: the heap backend downloads while it restores).
	StateRestore time.Duration
	// ChannelStateReplay is the longest time a task took to put its
	// in-flight data back into its channels.
	ChannelStateReplay time.Duration
	// RestoredSize is the bytes of state read.
	RestoredSize int64
}

// restoreCounters collect an attempt's restore figures from its tasks.
type restoreCounters struct {
	start      time.Time
	stateDone  time.Time
	bytes      atomic.Int64
	replayMax  atomic.Int64 // nanoseconds
	replayLeft atomic.Int32 // tasks still to replay
	reported   atomic.Bool
}

// replayed records one task's channel-state replay; once every task has
// replayed, the attempt's restore is reported.
func (a *attempt) replayed(d time.Duration) {
	rc := &a.restoreCounters
	for {
		cur := rc.replayMax.Load()
		if int64(d) <= cur || rc.replayMax.CompareAndSwap(cur, int64(d)) {
			break
		}
	}
	if rc.replayLeft.Add(-1) == 0 {
		a.reportRestore()
	}
}

func (a *attempt) reportRestore() {
	if a.restore == nil || !a.restoreCounters.reported.CompareAndSwap(false, true) {
		return
	}
	rc := &a.restoreCounters
	info := RestoreInfo{
		Attempt: a.number, CheckpointID: a.restore.id(), Path: a.restore.snap.Dir,
		IsSavepoint: a.restore.snap.Metadata.Kind == "savepoint", Start: rc.start,
		StateRestore: rc.stateDone.Sub(rc.start), ChannelStateReplay: time.Duration(rc.replayMax.Load()),
		RestoredSize: rc.bytes.Load(),
	}
	a.job.lastRestore.Store(&info)
	for _, l := range a.job.cfg.RestoreListeners {
		l(info)
	}
}

// LastRestore returns what the latest attempt restored, if it restored.
func (j *Job) LastRestore() (RestoreInfo, bool) {
	if r := j.lastRestore.Load(); r != nil {
		return *r, true
	}
	return RestoreInfo{}, false
}
