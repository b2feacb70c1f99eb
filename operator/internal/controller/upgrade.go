package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
	"github.com/sluicehq/sluice/operator/internal/jobapi"
)

// An upgrade runs in steps, each recorded in status.upgrade before it is
// taken:
//
//	savepoint:   Savepointing (stop with a savepoint) -> Draining -> Deploying (from the savepoint)
//	last-state:  Draining (SIGTERM: the job suspends, its checkpoints kept) -> Deploying (from the latest checkpoint)
//	stateless:   Draining -> Deploying (a new checkpoint epoch, no state)
//
// Draining scales the old version to no process and waits until none is
// left, pods included, before the new version's objects are written: two
// versions never write at once. A new version that does not reach RUNNING
// within the step's timeout, or FAILS, is rolled back: Draining and
// Deploying again with the last good spec, from the same savepoint (or
// the latest checkpoint), said in the status and an event.

func (r *Reconciler) timeout(job *sluicev1.SluiceJob) time.Duration {
	if t := job.Spec.Upgrade.Timeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return DefaultUpgradeTimeout
}

func (r *Reconciler) metaNow() *metav1.Time {
	t := metav1.NewTime(r.now())
	return &t
}

// startUpgrade records a new upgrade of the job to target; the next
// reconcile takes its first step.
func (r *Reconciler) startUpgrade(_ context.Context, job *sluicev1.SluiceJob, mode sluicev1.UpgradeMode, target *sluicev1.SluiceJobSpec, details *jobapi.Details) (ctrl.Result, error) {
	st := &job.Status
	u := &sluicev1.UpgradeStatus{Mode: mode, Target: target, TargetHash: versionHash(target),
		Started: r.metaNow(), StepStarted: r.metaNow(), Step: sluicev1.StepDraining}
	if mode == sluicev1.UpgradeSavepoint {
		u.Step = sluicev1.StepSavepointing
	}
	st.Upgrade, st.Phase = u, PhaseUpgrading
	setCondition(job, ConditionProgressing, metav1.ConditionTrue, "Upgrading", fmt.Sprintf("upgrading in mode %s", mode))
	state := "unreachable"
	if details != nil {
		state = details.State
	}
	r.event(job, corev1.EventTypeNormal, "UpgradeStarted", "Upgrade", "upgrading to %s (mode %s, parallelism %d); the job is %s",
		target.Image, mode, target.Parallelism, state)
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

// upgrade takes the step the status records.
func (r *Reconciler) upgrade(ctx context.Context, job *sluicev1.SluiceJob) (ctrl.Result, error) {
	st := &job.Status
	u := st.Upgrade
	expired := u.StepStarted != nil && r.now().Sub(u.StepStarted.Time) > r.timeout(job)
	again := ctrl.Result{RequeueAfter: r.poll()}
	switch u.Step {
	case sluicev1.StepRescaling:
		return r.rescaling(ctx, job, expired)

	case sluicev1.StepSavepointing:
		// The stopped job's API serves its savepoint's location for
		// rest.shutdown-grace (10 s) only: poll well within it.
		again.RequeueAfter = min(again.RequeueAfter, time.Second)
		api, err := r.api(ctx, job)
		if err != nil {
			return again, err
		}
		id, err := api.JobID(ctx)
		if err == nil && u.TriggerID == "" {
			u.TriggerID, err = api.StopWithSavepoint(ctx, id, st.Deployed.SavepointDir)
			if err == nil {
				r.event(job, corev1.EventTypeNormal, "Savepointing", "Upgrade", "stopping the job with a savepoint (trigger %s)", u.TriggerID)
				return again, nil
			}
		}
		var res jobapi.SavepointResult
		if err == nil {
			res, err = api.Savepoint(ctx, id, u.TriggerID)
		}
		switch {
		case err != nil || !res.Done:
			if expired {
				// Nothing was stopped for good: the old version runs on.
				return r.endUpgrade(job, OutcomeFailed, fmt.Sprintf("no savepoint within %v: %v", r.timeout(job), errOr(err, "still in progress")))
			}
			return again, nil
		case res.Failure != "":
			return r.endUpgrade(job, OutcomeFailed, "stop with a savepoint failed: "+res.Failure)
		}
		u.RestorePath = res.Location
		r.recordSavepoint(job, res.Location, "upgrade")
		r.event(job, corev1.EventTypeNormal, "SavepointCompleted", "Upgrade", "the job stopped with savepoint %s", res.Location)
		r.step(u, sluicev1.StepDraining)
		return again, nil

	case sluicev1.StepDraining:
		if err := r.apply(ctx, job, r.current(job, false)); err != nil {
			return again, err
		}
		done, err := r.drained(ctx, job)
		if err != nil || !done {
			if expired {
				u.Message = fmt.Sprintf("the old version's processes are still there after %v: waiting for them (two versions never run at once)", r.timeout(job))
			}
			return again, err
		}
		switch {
		case u.Mode == sluicev1.UpgradeStateless && !u.RollingBack:
			st.Epoch++
			st.RestorePath = ""
		case u.Mode == sluicev1.UpgradeStateless:
			st.Epoch = max(st.Epoch-1, 0) // the old version's checkpoints
		case u.RestorePath != "":
			st.RestorePath = u.RestorePath
		}
		st.Deployed, st.DeployedHash = u.Target.DeepCopy(), versionHash(u.Target)
		if err := r.apply(ctx, job, r.current(job, true)); err != nil {
			return again, err
		}
		r.event(job, corev1.EventTypeNormal, "Deploying", "Upgrade", "the old version is gone; deploying %s at parallelism %d from %s",
			u.Target.Image, u.Target.Parallelism, orLatest(st.RestorePath, u.Mode))
		r.step(u, sluicev1.StepDeploying)
		return again, nil

	case sluicev1.StepDeploying:
		if err := r.apply(ctx, job, r.current(job, true)); err != nil {
			return again, err
		}
		api, err := r.api(ctx, job)
		if err != nil {
			return again, err
		}
		details, err := r.observe(ctx, job, api)
		switch {
		case err == nil && details.Running():
			outcome := OutcomeSucceeded
			if u.RollingBack {
				outcome = OutcomeRolledBack
			}
			return r.endUpgrade(job, outcome, "")
		case err == nil && details.State == "FAILED":
			return r.failDeploy(job, "the new version's job FAILED")
		case expired:
			return r.failDeploy(job, fmt.Sprintf("the new version did not reach RUNNING within %v (%s)", r.timeout(job), jobState(details, err)))
		}
		return again, nil
	}
	return ctrl.Result{}, fmt.Errorf("unknown upgrade step %q in the status of %s/%s", u.Step, job.Namespace, job.Name)
}

func (r *Reconciler) step(u *sluicev1.UpgradeStatus, s sluicev1.UpgradeStep) {
	u.Step, u.StepStarted = s, r.metaNow()
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// jobState says what the API said: its error, or the job's state.
func jobState(d *jobapi.Details, err error) string {
	if err != nil || d == nil {
		return errOr(err, "no answer")
	}
	return "job " + d.State
}

func orLatest(path string, mode sluicev1.UpgradeMode) string {
	switch {
	case path != "" && mode != sluicev1.UpgradeLastState:
		return path
	case mode == sluicev1.UpgradeStateless:
		return "no state"
	}
	return "its latest checkpoint"
}

// failDeploy rolls the upgrade back to the last good spec, or ends it
// failed when it was the rollback that failed, or there is none.
func (r *Reconciler) failDeploy(job *sluicev1.SluiceJob, why string) (ctrl.Result, error) {
	st := &job.Status
	u := st.Upgrade
	if u.RollingBack || st.LastStable == nil {
		st.Phase = PhaseFailed
		return r.endUpgrade(job, OutcomeFailed, why)
	}
	u.RollingBack, u.Message, u.Target = true, why, st.LastStable.DeepCopy()
	r.step(u, sluicev1.StepDraining)
	st.Phase = PhaseRollingBack
	setCondition(job, ConditionUpgradeFailed, metav1.ConditionTrue, "RollingBack", why)
	r.event(job, corev1.EventTypeWarning, "UpgradeFailed", "Upgrade", "%s: rolling back to %s", why, st.LastStable.Image)
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

// endUpgrade closes the upgrade with its outcome.
func (r *Reconciler) endUpgrade(job *sluicev1.SluiceJob, outcome, why string) (ctrl.Result, error) {
	st := &job.Status
	u := st.Upgrade
	u.Step, u.Finished, u.Outcome = "", r.metaNow(), outcome
	if why != "" {
		u.Message = why
	}
	setCondition(job, ConditionProgressing, metav1.ConditionFalse, outcome, "no upgrade under way")
	switch outcome {
	case OutcomeSucceeded:
		st.Phase, st.LastStable = PhaseRunning, st.Deployed.DeepCopy()
		setCondition(job, ConditionUpgradeFailed, metav1.ConditionFalse, outcome, "the last upgrade succeeded")
		setCondition(job, ConditionReady, metav1.ConditionTrue, "Running", "the job runs the deployed spec")
		r.event(job, corev1.EventTypeNormal, "UpgradeSucceeded", "Upgrade", "the job runs %s at parallelism %d", st.Deployed.Image, st.Deployed.Parallelism)
	case OutcomeRolledBack:
		st.Phase, st.LastStable = PhaseRunning, st.Deployed.DeepCopy()
		setCondition(job, ConditionUpgradeFailed, metav1.ConditionTrue, outcome, u.Message)
		setCondition(job, ConditionReady, metav1.ConditionTrue, "Running", "the job runs the last good spec")
		r.event(job, corev1.EventTypeWarning, "UpgradeRolledBack", "Upgrade", "rolled back to %s: %s", st.Deployed.Image, u.Message)
	default:
		if st.Phase != PhaseFailed {
			st.Phase = PhaseRunning
		}
		setCondition(job, ConditionUpgradeFailed, metav1.ConditionTrue, outcome, u.Message)
		r.event(job, corev1.EventTypeWarning, "UpgradeFailed", "Upgrade", "%s", u.Message)
	}
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

// rescale asks a running job for the spec's parallelism through its
// rescale call, after adding the workers it needs; a coordinator without
// the call is rescaled with a savepoint instead.
func (r *Reconciler) rescale(ctx context.Context, job *sluicev1.SluiceJob, api *jobapi.Client, details *jobapi.Details) (ctrl.Result, error) {
	st := &job.Status
	target := job.Spec.DeepCopy()
	// The workers first, when more are needed: the template does not
	// change, so the running ones stay.
	d := r.steady(job)
	if err := r.apply(ctx, job, d); err != nil {
		return ctrl.Result{}, err
	}
	// The call only once those workers run (registered: ready), or the
	// job refuses it for want of slots.
	var sts appsv1.StatefulSet
	if err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: workerName(job)}, &sts); err != nil {
		return ctrl.Result{}, err
	}
	if want := workers(d.spec); sts.Status.ObservedGeneration < sts.Generation || sts.Status.ReadyReplicas < want {
		r.logger().Info("rescale: waiting for the workers", "sluicejob", job.Namespace+"/"+job.Name,
			"ready", sts.Status.ReadyReplicas, "want", want)
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	vertices := map[string]int32{}
	for _, v := range details.Vertices {
		if v.Parallelism == st.Deployed.Parallelism {
			vertices[v.ID] = target.Parallelism
		}
	}
	err := api.Rescale(ctx, details.ID, vertices)
	switch {
	case errors.Is(err, jobapi.ErrNotSupported):
		r.event(job, corev1.EventTypeNormal, "Rescaling", "Rescale", "the job's API has no rescale call: rescaling %d -> %d with a savepoint",
			st.Deployed.Parallelism, target.Parallelism)
		return r.startUpgrade(ctx, job, sluicev1.UpgradeSavepoint, target, details)
	case errors.Is(err, jobapi.ErrConflict):
		r.logger().Info("the job cannot rescale now; trying again", "sluicejob", job.Namespace+"/"+job.Name, "err", err)
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	case err != nil:
		return ctrl.Result{RequeueAfter: r.poll()}, err
	}
	st.Upgrade = &sluicev1.UpgradeStatus{Target: target, TargetHash: versionHash(target), Started: r.metaNow(),
		StepStarted: r.metaNow(), Step: sluicev1.StepRescaling}
	st.Phase = PhaseUpgrading
	setCondition(job, ConditionProgressing, metav1.ConditionTrue, "Rescaling", fmt.Sprintf("rescaling to %d", target.Parallelism))
	r.event(job, corev1.EventTypeNormal, "Rescaling", "Rescale", "rescaling %d -> %d through the job's rescale call", st.Deployed.Parallelism, target.Parallelism)
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

// rescaling waits for the job to run at the new parallelism, then lets
// the workers it no longer needs go.
func (r *Reconciler) rescaling(ctx context.Context, job *sluicev1.SluiceJob, expired bool) (ctrl.Result, error) {
	st := &job.Status
	u := st.Upgrade
	api, err := r.api(ctx, job)
	if err != nil {
		return ctrl.Result{RequeueAfter: r.poll()}, err
	}
	details, err := r.observe(ctx, job, api)
	if err == nil && details.Running() && details.Parallelism() == u.Target.Parallelism {
		st.Deployed, st.DeployedHash = u.Target.DeepCopy(), versionHash(u.Target)
		if err := r.apply(ctx, job, r.current(job, true)); err != nil {
			return ctrl.Result{RequeueAfter: r.poll()}, err
		}
		return r.endUpgrade(job, OutcomeSucceeded, "")
	}
	if expired {
		return r.endUpgrade(job, OutcomeFailed, fmt.Sprintf("the job did not run at parallelism %d within %v (%s)",
			u.Target.Parallelism, r.timeout(job), jobState(details, err)))
	}
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}
