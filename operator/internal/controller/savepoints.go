package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
	"github.com/sluicehq/sluice/operator/internal/jobapi"
)

// Savepoint triggers, in status.savepoints.history.
const (
	TriggerPeriodic = "periodic"
	TriggerManual   = "manual"
	TriggerUpgrade  = "upgrade"
)

// maxUpgradeSavepoints bounds the upgrade savepoints the history lists;
// they are never disposed of by the operator (a rollback may need one).
const maxUpgradeSavepoints = 10

// savepoints takes the savepoints the spec asks for on a running job:
// one pending at a time, on demand (a new trigger nonce) before the
// schedule, and applies the retention once one completes.
func (r *Reconciler) savepoints(ctx context.Context, job *sluicev1.SluiceJob, api *jobapi.Client, id string) error {
	sp := &job.Status.Savepoints
	spec := job.Spec.Savepoints
	if sp.PendingTriggerID != "" {
		res, err := api.Savepoint(ctx, id, sp.PendingTriggerID)
		switch {
		case errors.Is(err, jobapi.ErrNotFound):
			// The coordinator that took it is gone (restarted): it is lost.
			r.event(job, corev1.EventTypeWarning, "SavepointLost", "Savepoint", "savepoint %s was lost: %v", sp.PendingTriggerID, err)
		case err != nil:
			return fmt.Errorf("poll savepoint %s: %w", sp.PendingTriggerID, err)
		case !res.Done:
			return nil
		case res.Failure != "":
			r.event(job, corev1.EventTypeWarning, "SavepointFailed", "Savepoint", "the %s savepoint failed: %s", sp.PendingTrigger, res.Failure)
		default:
			r.recordSavepoint(job, res.Location, sp.PendingTrigger)
			r.event(job, corev1.EventTypeNormal, "SavepointCompleted", "Savepoint", "%s savepoint %s", sp.PendingTrigger, res.Location)
			r.retain(ctx, job, api)
		}
		sp.PendingTriggerID, sp.PendingTrigger = "", ""
		return nil
	}
	trigger := ""
	switch {
	case spec.TriggerNonce != sp.LastTriggerNonce:
		trigger = TriggerManual
	case spec.Interval != nil && spec.Interval.Duration > 0 &&
		(sp.LastPeriodic == nil || r.now().Sub(sp.LastPeriodic.Time) >= spec.Interval.Duration):
		trigger = TriggerPeriodic
	default:
		return nil
	}
	tid, err := api.TriggerSavepoint(ctx, id, job.Status.Deployed.SavepointDir)
	if err != nil {
		return fmt.Errorf("trigger a %s savepoint: %w", trigger, err)
	}
	if trigger == TriggerManual {
		sp.LastTriggerNonce = spec.TriggerNonce
	} else {
		sp.LastPeriodic = r.metaNow()
	}
	sp.PendingTriggerID, sp.PendingTrigger = tid, trigger
	r.event(job, corev1.EventTypeNormal, "SavepointTriggered", "Savepoint", "%s savepoint triggered (%s)", trigger, tid)
	return nil
}

// recordSavepoint adds a completed savepoint to the history.
func (r *Reconciler) recordSavepoint(job *sluicev1.SluiceJob, location, trigger string) {
	sp := &job.Status.Savepoints
	sp.History = append(sp.History, sluicev1.SavepointInfo{Location: location, Time: metav1.NewTime(r.now()), Trigger: trigger})
	var upgrades int
	for i := len(sp.History) - 1; i >= 0; i-- {
		if sp.History[i].Trigger != TriggerUpgrade {
			continue
		}
		if upgrades++; upgrades > maxUpgradeSavepoints {
			sp.History = append(sp.History[:i], sp.History[i+1:]...)
		}
	}
}

// retain disposes of the oldest periodic and manual savepoints past
// spec.savepoints.maxCount; the one the job restored from is kept besides.
func (r *Reconciler) retain(ctx context.Context, job *sluicev1.SluiceJob, api *jobapi.Client) {
	keep := int(job.Spec.Savepoints.MaxCount)
	if keep <= 0 {
		return
	}
	sp := &job.Status.Savepoints
	count := 0
	for _, s := range sp.History {
		if s.Trigger != TriggerUpgrade && s.Location != job.Status.RestorePath {
			count++
		}
	}
	kept := sp.History[:0]
	for _, s := range sp.History {
		if count > keep && s.Trigger != TriggerUpgrade && s.Location != job.Status.RestorePath {
			if err := api.DisposeSavepoint(ctx, s.Location); err != nil {
				r.event(job, corev1.EventTypeWarning, "SavepointDisposalFailed", "Savepoint", "dispose of %s: %v", s.Location, err)
				kept = append(kept, s)
				continue
			}
			count--
			r.event(job, corev1.EventTypeNormal, "SavepointDisposed", "Savepoint", "disposed of %s savepoint %s (maxCount %d)", s.Trigger, s.Location, keep)
			continue
		}
		kept = append(kept, s)
	}
	sp.History = kept
}

// equalJSON compares two values by their JSON.
func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
