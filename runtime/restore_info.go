package runtime

import (
	"sync/atomic"
	"time"
)

// RestoreInfo says what a job attempt, or a failover region restarting
// within it, restored and how long it took, for the restore span of
// traces and the API.
type RestoreInfo struct {
	// Attempt is the attempt's number (a region restarts within one).
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

// restoreCounters collect one restore's figures from its tasks: an
// attempt's (attempt.restoreCounters), or a failover region's new
// executions' (their own).
type restoreCounters struct {
	start      time.Time
	stateDone  time.Time
	bytes      atomic.Int64
	replayMax  atomic.Int64 // nanoseconds
	replayLeft atomic.Int32 // tasks still to replay
	reported   atomic.Bool
	// restore is what a region's executions restored (nil: the
	// attempt's restore).
	restore *restoreSnapshot
}

// replayed records one task's channel-state replay; once every task of
// the restore has replayed, it is reported.
func (a *attempt) replayed(rc *restoreCounters, d time.Duration) {
	for {
		cur := rc.replayMax.Load()
		if int64(d) <= cur || rc.replayMax.CompareAndSwap(cur, int64(d)) {
			break
		}
	}
	if rc.replayLeft.Add(-1) == 0 {
		a.reportRestore(rc)
	}
}

// reportRestore tells the restore listeners what rc's restore read, once.
func (a *attempt) reportRestore(rc *restoreCounters) {
	restore := rc.restore
	if restore == nil {
		restore = a.restore
	}
	if restore == nil || !rc.reported.CompareAndSwap(false, true) {
		return
	}
	info := RestoreInfo{
		Attempt: a.number, CheckpointID: restore.id(), Path: restore.snap.Dir,
		IsSavepoint: restore.snap.Metadata.Kind == "savepoint", Start: rc.start,
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
