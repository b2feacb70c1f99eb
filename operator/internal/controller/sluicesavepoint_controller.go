package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
	"github.com/sluicehq/sluice/operator/internal/jobapi"
)

// FinalizerDispose holds a SluiceSavepoint whose files are disposed of on
// its deletion (spec.disposeOnDelete) until they are.
const FinalizerDispose = "sluice.sluicehq.dev/dispose-savepoint"

// SavepointReconciler reconciles SluiceSavepoints: it triggers the
// savepoint on the job's leading coordinator once the job runs its
// deployed spec, polls it to its end, and disposes of its files when the
// resource is deleted. It calls the job's API as the SluiceJob reconciler
// does (its Jobs: the client, TLS, token, the leader under HA).
type SavepointReconciler struct {
	Jobs *Reconciler
}

// +kubebuilder:rbac:groups=sluice.sluicehq.dev,resources=sluicesavepoints,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sluice.sluicehq.dev,resources=sluicesavepoints/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sluice.sluicehq.dev,resources=sluicesavepoints/finalizers,verbs=update

// SetupWithManager registers the reconciler with mgr.
func (r *SavepointReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&sluicev1.SluiceSavepoint{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			// a deletion sets deletionTimestamp, not the generation
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() }}))).
		Named("sluicesavepoint").
		Complete(r)
}

// Reconcile moves one SluiceSavepoint a step.
func (r *SavepointReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sp sluicev1.SluiceSavepoint
	if err := r.Jobs.reader().Get(ctx, req.NamespacedName, &sp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sp.DeletionTimestamp.IsZero() {
		return r.dispose(ctx, &sp)
	}
	if disposeOnDelete(&sp) && !controllerutil.ContainsFinalizer(&sp, FinalizerDispose) {
		controllerutil.AddFinalizer(&sp, FinalizerDispose)
		if err := r.Jobs.Update(ctx, &sp); err != nil {
			return ctrl.Result{}, fmt.Errorf("add the finalizer to SluiceSavepoint %s: %w", req.NamespacedName, err)
		}
	}
	before := sp.Status.DeepCopy()
	res, err := r.step(ctx, &sp)
	if !equalJSON(before, &sp.Status) {
		if uerr := r.Jobs.Status().Update(ctx, &sp); uerr != nil {
			if apierrors.IsConflict(uerr) {
				return ctrl.Result{RequeueAfter: r.Jobs.poll()}, nil
			}
			return ctrl.Result{}, errors.Join(err, fmt.Errorf("update the status of SluiceSavepoint %s: %w", req.NamespacedName, uerr))
		}
	}
	return res, err
}

func disposeOnDelete(sp *sluicev1.SluiceSavepoint) bool {
	return sp.Spec.DisposeOnDelete == nil || *sp.Spec.DisposeOnDelete
}

// step triggers the savepoint, or polls it.
func (r *SavepointReconciler) step(ctx context.Context, sp *sluicev1.SluiceSavepoint) (ctrl.Result, error) {
	st := &sp.Status
	again := ctrl.Result{RequeueAfter: r.Jobs.poll()}
	switch st.State {
	case sluicev1.SavepointCompleted, sluicev1.SavepointFailed:
		return ctrl.Result{}, nil
	case "":
		st.State = sluicev1.SavepointPending
	}
	var job sluicev1.SluiceJob
	if err := r.Jobs.reader().Get(ctx, client.ObjectKey{Namespace: sp.Namespace, Name: sp.Spec.JobName}, &job); err != nil {
		if apierrors.IsNotFound(err) {
			if st.State == sluicev1.SavepointInProgress {
				r.fail(sp, fmt.Sprintf("the SluiceJob %s was deleted while the savepoint was in progress", sp.Spec.JobName))
				return ctrl.Result{}, nil
			}
			st.Error = fmt.Sprintf("no SluiceJob %s in namespace %s (spec.jobName)", sp.Spec.JobName, sp.Namespace)
			return ctrl.Result{RequeueAfter: 30 * r.Jobs.poll()}, nil
		}
		return again, err
	}
	api, err := r.Jobs.api(ctx, &job)
	if err != nil {
		st.Error = err.Error()
		return again, nil
	}
	if st.State == sluicev1.SavepointPending {
		// Only a job running its deployed spec takes it: not one that
		// deploys, upgrades (its stop-with-savepoint) or rescales.
		if job.Status.Phase != sluicev1.PhaseRunning || (job.Status.Upgrade != nil && job.Status.Upgrade.Step != "") || job.Status.Job.ID == "" {
			st.Error = fmt.Sprintf("waiting for the SluiceJob %s to run (phase %s)", job.Name, job.Status.Phase)
			return again, nil
		}
		dir := sp.Spec.Directory
		if dir == "" && job.Status.Deployed != nil {
			dir = job.Status.Deployed.SavepointDir
		}
		tid, err := api.TriggerSavepoint(ctx, job.Status.Job.ID, dir)
		if err != nil {
			// A conflict (another savepoint runs), a restart: later.
			st.Error = fmt.Sprintf("trigger: %v", err)
			return again, nil
		}
		st.State, st.JobID, st.TriggerID, st.TriggerTime, st.Error = sluicev1.SavepointInProgress, job.Status.Job.ID, tid, r.Jobs.metaNow(), ""
		r.Jobs.event(sp, corev1.EventTypeNormal, "SavepointTriggered", "Savepoint", "savepoint of %s triggered (%s)", job.Name, tid)
		return again, nil
	}
	res, err := api.Savepoint(ctx, st.JobID, st.TriggerID)
	switch {
	case errors.Is(err, jobapi.ErrNotFound):
		// The coordinator that took it is gone (a failover, a restart).
		r.fail(sp, fmt.Sprintf("savepoint %s was lost: the coordinator that took it is gone: %v", st.TriggerID, err))
		return ctrl.Result{}, nil
	case err != nil:
		st.Error = fmt.Sprintf("poll: %v", err)
		return again, nil
	case !res.Done:
		return again, nil
	case res.Failure != "":
		r.fail(sp, res.Failure)
		return ctrl.Result{}, nil
	}
	st.State, st.Path, st.ResultTime, st.Error = sluicev1.SavepointCompleted, res.Location, r.Jobs.metaNow(), ""
	r.Jobs.event(sp, corev1.EventTypeNormal, "SavepointCompleted", "Savepoint", "savepoint of %s at %s", job.Name, res.Location)
	return ctrl.Result{}, nil
}

func (r *SavepointReconciler) fail(sp *sluicev1.SluiceSavepoint, msg string) {
	sp.Status.State, sp.Status.Error, sp.Status.ResultTime = sluicev1.SavepointFailed, msg, r.Jobs.metaNow()
	r.Jobs.event(sp, corev1.EventTypeWarning, "SavepointFailed", "Savepoint", "savepoint of %s failed: %s", sp.Spec.JobName, msg)
}

// dispose deletes the savepoint's files through the job's API, then
// lets the resource go. A job that is gone cannot dispose of them: the
// resource goes, and a warning event names the files left.
func (r *SavepointReconciler) dispose(ctx context.Context, sp *sluicev1.SluiceSavepoint) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sp, FinalizerDispose) {
		return ctrl.Result{}, nil
	}
	if sp.Status.State == sluicev1.SavepointCompleted && sp.Status.Path != "" && !sp.Status.Disposed {
		var job sluicev1.SluiceJob
		err := r.Jobs.reader().Get(ctx, client.ObjectKey{Namespace: sp.Namespace, Name: sp.Spec.JobName}, &job)
		switch {
		case apierrors.IsNotFound(err):
			r.Jobs.event(sp, corev1.EventTypeWarning, "SavepointNotDisposed", "Dispose",
				"the SluiceJob %s is gone, so is its API: the savepoint's files at %s are left", sp.Spec.JobName, sp.Status.Path)
		case err != nil:
			return ctrl.Result{}, err
		default:
			api, err := r.Jobs.api(ctx, &job)
			if err == nil {
				err = api.DisposeSavepoint(ctx, sp.Status.Path)
			}
			if err != nil {
				r.Jobs.event(sp, corev1.EventTypeWarning, "SavepointDisposalFailed", "Dispose", "dispose of %s: %v (tried again)", sp.Status.Path, err)
				return ctrl.Result{RequeueAfter: r.Jobs.poll()}, nil
			}
			r.Jobs.event(sp, corev1.EventTypeNormal, "SavepointDisposed", "Dispose", "disposed of savepoint %s", sp.Status.Path)
		}
	}
	controllerutil.RemoveFinalizer(sp, FinalizerDispose)
	if err := r.Jobs.Update(ctx, sp); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("remove the finalizer of SluiceSavepoint %s/%s: %w", sp.Namespace, sp.Name, err)
	}
	return ctrl.Result{}, nil
}
