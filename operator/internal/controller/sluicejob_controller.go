// Package controller reconciles SluiceJobs: it owns a job's ConfigMap,
// coordinator Deployment and Service, workers' StatefulSet and headless
// Service, and PodDisruptionBudget, and runs upgrades, rescales and
// savepoints through the job's REST API (package jobapi). Every step of
// an upgrade is recorded in the status before it is taken, so that an
// operator restarted mid-upgrade goes on from where it was.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
	"github.com/sluicehq/sluice/operator/internal/jobapi"
)

// Condition types of a SluiceJob.
const (
	// ConditionReady: the job runs the spec in status.deployed.
	ConditionReady = "Ready"
	// ConditionProgressing: an upgrade or a rescale is under way.
	ConditionProgressing = "Progressing"
	// ConditionUpgradeFailed: the last upgrade failed (and was rolled
	// back, or left the old version running); cleared by the next one
	// that succeeds.
	ConditionUpgradeFailed = "UpgradeFailed"
)

// Outcomes of an upgrade (status.upgrade.outcome).
const (
	OutcomeSucceeded  = "Succeeded"
	OutcomeRolledBack = "RolledBack"
	OutcomeFailed     = "Failed"
)

// The phases, short.
const (
	PhaseDeploying   = sluicev1.PhaseDeploying
	PhaseRunning     = sluicev1.PhaseRunning
	PhaseUpgrading   = sluicev1.PhaseUpgrading
	PhaseRollingBack = sluicev1.PhaseRollingBack
	PhaseFailed      = sluicev1.PhaseFailed
)

// DefaultUpgradeTimeout bounds each step of an upgrade.
const DefaultUpgradeTimeout = 5 * time.Minute

// Reconciler reconciles SluiceJobs.
type Reconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	Logger   *slog.Logger
	// APIReader reads the SluiceJob at the start of each reconcile and the
	// REST token's Secret; nil: the Client. The manager's API reader
	// (uncached): a step of an upgrade is never taken again on a cached
	// job older than the status the last reconcile wrote (two versions
	// would then run at once), and the operator does not watch every
	// Secret of the cluster, which it may not list.
	APIReader client.Reader
	// ServiceAddress maps a Service's address
	// (<name>.<namespace>.svc:<port>) to the one the operator dials; nil:
	// as it is (the cluster's DNS). A pod's IP is dialled as it is. TLS
	// verifies the Service's name whatever is dialled.
	ServiceAddress func(hostPort string) string
	// PollInterval is how often a job is looked at while something is
	// under way; 0: 5 s.
	PollInterval time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// The operator's permissions, from which deploy/operator/rbac is generated.
// +kubebuilder:rbac:groups=sluice.sluicehq.dev,resources=sluicejobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sluice.sluicehq.dev,resources=sluicejobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// The owned objects wake the job when they change (deleted, edited by
	// hand), not on each status write of their controllers: the job is
	// polled while something is under way.
	changed := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).
		For(&sluicev1.SluiceJob{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}, changed).
		Owns(&appsv1.StatefulSet{}, changed).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}, changed).
		Owns(&policyv1.PodDisruptionBudget{}, changed).
		Named("sluicejob").
		Complete(r)
}

func (r *Reconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) poll() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return 5 * time.Second
}

func (r *Reconciler) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// Reconcile moves one SluiceJob a step towards its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var job sluicev1.SluiceJob
	if err := r.reader().Get(ctx, req.NamespacedName, &job); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !job.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the objects go with it (owner references)
	}
	before := job.Status.DeepCopy()
	res, err := r.reconcile(ctx, &job)
	job.Status.ObservedGeneration = job.Generation
	if !equalStatus(before, &job.Status) {
		if uerr := r.Status().Update(ctx, &job); uerr != nil {
			if apierrors.IsConflict(uerr) {
				return ctrl.Result{RequeueAfter: r.poll()}, nil
			}
			return ctrl.Result{}, errors.Join(err, fmt.Errorf("update the status of %s: %w", req.NamespacedName, uerr))
		}
	}
	return res, err
}

func equalStatus(a, b *sluicev1.SluiceJobStatus) bool {
	return equalJSON(a, b)
}

// reconcile decides on the job's next step and records it in its status.
func (r *Reconciler) reconcile(ctx context.Context, job *sluicev1.SluiceJob) (ctrl.Result, error) {
	st := &job.Status
	if st.Deployed == nil {
		// The first deployment.
		spec := job.Spec.DeepCopy()
		st.Deployed, st.DeployedHash = spec, versionHash(spec)
		st.RestorePath = spec.InitialSavepointPath
		st.Phase = PhaseDeploying
		if err := r.apply(ctx, job, r.current(job, true)); err != nil {
			return ctrl.Result{}, err
		}
		r.event(job, corev1.EventTypeNormal, "Deploying", "Deploy", "deploying %s at parallelism %d", spec.Image, spec.Parallelism)
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	if u := st.Upgrade; u != nil && u.Step != "" {
		return r.upgrade(ctx, job)
	}
	// Keep the objects as the deployed spec says (a deleted Service or a
	// hand-edited Deployment comes back).
	if err := r.apply(ctx, job, r.steady(job)); err != nil {
		return ctrl.Result{}, err
	}
	api, err := r.api(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	details, jerr := r.observe(ctx, job, api)
	switch {
	case jerr != nil:
		setCondition(job, ConditionReady, metav1.ConditionFalse, "Unreachable", jerr.Error())
		if st.Phase == PhaseRunning {
			st.Phase = PhaseDeploying
		}
	case details.Running():
		setCondition(job, ConditionReady, metav1.ConditionTrue, "Running", "the job runs the deployed spec")
		if st.Phase != PhaseRunning {
			st.Phase = PhaseRunning
			st.LastStable = st.Deployed.DeepCopy()
			r.event(job, corev1.EventTypeNormal, "Running", "Deploy", "the job %s is RUNNING", details.ID)
		}
	case details.State == "FAILED":
		setCondition(job, ConditionReady, metav1.ConditionFalse, "JobFailed", "the job FAILED")
		st.Phase = PhaseFailed
	default:
		setCondition(job, ConditionReady, metav1.ConditionFalse, "Job"+details.State, "the job is "+details.State)
	}

	// A new version: an upgrade in the spec's mode, unless this very spec
	// failed before: it is tried again once the spec changes.
	hash := versionHash(&job.Spec)
	if hash != st.DeployedHash {
		if u := st.Upgrade; u != nil && u.TargetHash == hash && u.Outcome != OutcomeSucceeded {
			return ctrl.Result{RequeueAfter: r.poll()}, nil
		}
		return r.startUpgrade(ctx, job, upgradeMode(&job.Spec), job.Spec.DeepCopy(), details)
	}
	// A new parallelism: the rescale call, else a savepoint rescale.
	if job.Spec.Parallelism != st.Deployed.Parallelism || workers(&job.Spec) != workers(st.Deployed) {
		if u := st.Upgrade; u != nil && u.Target != nil && u.Target.Parallelism == job.Spec.Parallelism &&
			u.Outcome != OutcomeSucceeded {
			return ctrl.Result{RequeueAfter: r.poll()}, nil
		}
		if jerr == nil && details.Running() {
			return r.rescale(ctx, job, api, details)
		}
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	if jerr == nil && details.Running() {
		if err := r.savepoints(ctx, job, api, details.ID); err != nil {
			r.logger().Warn("savepoints", "sluicejob", client.ObjectKeyFromObject(job), "err", err)
		}
	}
	return ctrl.Result{RequeueAfter: r.requeue(job)}, nil
}

func upgradeMode(s *sluicev1.SluiceJobSpec) sluicev1.UpgradeMode {
	if s.Upgrade.Mode == "" {
		return sluicev1.UpgradeSavepoint
	}
	return s.Upgrade.Mode
}

func (r *Reconciler) requeue(job *sluicev1.SluiceJob) time.Duration {
	d := 30 * time.Second
	if job.Status.Phase != PhaseRunning || job.Status.Savepoints.PendingTriggerID != "" {
		d = r.poll()
	}
	if iv := job.Spec.Savepoints.Interval; iv != nil && iv.Duration > 0 {
		next := iv.Duration
		if last := job.Status.Savepoints.LastPeriodic; last != nil {
			next = time.Until(last.Add(iv.Duration))
		}
		d = min(d, max(next, r.poll()))
	}
	return d
}

// current is the deployment the status says runs.
func (r *Reconciler) current(job *sluicev1.SluiceJob, running bool) deployment {
	return deployment{spec: job.Status.Deployed, restorePath: job.Status.RestorePath, epoch: job.Status.Epoch, running: running}
}

// steady is what runs between upgrades: the current deployment, with the
// workers a pending rescale needs (added before the job's rescale call,
// and kept until it is made: not taken away by the next reconcile).
func (r *Reconciler) steady(job *sluicev1.SluiceJob) deployment {
	d := r.current(job, true)
	if versionHash(&job.Spec) == job.Status.DeployedHash &&
		(job.Spec.Parallelism != d.spec.Parallelism || workers(&job.Spec) != workers(d.spec)) {
		grown := d.spec.DeepCopy()
		grown.Workers = ptr(max(workers(&job.Spec), workers(d.spec)))
		d.spec = grown
	}
	return d
}

// observe reads the job's state into the status.
func (r *Reconciler) observe(ctx context.Context, job *sluicev1.SluiceJob, api *jobapi.Client) (*jobapi.Details, error) {
	id, err := api.JobID(ctx)
	if err != nil {
		return nil, err
	}
	d, err := api.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	info := &job.Status.Job
	info.ID, info.State, info.Parallelism = d.ID, d.State, d.Parallelism()
	if cp, err := api.LatestCheckpoint(ctx, id); err == nil && cp != nil {
		info.LatestCheckpoint, info.LatestCheckpointID = cp.ExternalPath, cp.ID
	}
	if as, err := api.Autoscaler(ctx, id); err == nil {
		r.observeAutoscaler(job, as)
	}
	return d, nil
}

// observeAutoscaler reflects the job's autoscaler in the status, with an
// event for each new decision.
func (r *Reconciler) observeAutoscaler(job *sluicev1.SluiceJob, as *jobapi.Autoscaler) {
	prev := job.Status.Autoscaler
	st := &sluicev1.AutoscalerStatus{Enabled: as.Enabled, Rescales: as.Rescales}
	if ev := as.Last; ev != nil {
		t := metav1.NewTime(ev.Time)
		st.LastEvaluation, st.LastOutcome = &t, ev.Outcome
	}
	if ev := as.LastDecision; ev != nil {
		d := &sluicev1.AutoscalerDecision{Time: metav1.NewTime(ev.Time), Outcome: ev.Outcome}
		for _, v := range ev.Vertices {
			if v.NewParallelism != v.Parallelism {
				d.Vertices = append(d.Vertices, sluicev1.VertexDecision{Name: v.Name, Parallelism: v.Parallelism,
					NewParallelism: v.NewParallelism, Reason: v.Reason})
			}
		}
		st.LastDecision = d
		if prev == nil || prev.LastDecision == nil || !prev.LastDecision.Time.Equal(&d.Time) {
			r.event(job, corev1.EventTypeNormal, "Autoscaler", "Autoscale", "the job's autoscaler decided %s: %s", d.Outcome, decisionString(d))
		}
	}
	job.Status.Autoscaler = st
}

func decisionString(d *sluicev1.AutoscalerDecision) string {
	var b strings.Builder
	for i, v := range d.Vertices {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d -> %d", v.Name, v.Parallelism, v.NewParallelism)
	}
	if b.Len() == 0 {
		return "no vertex changes"
	}
	return b.String()
}

// apply creates or updates the job's objects for d.
func (r *Reconciler) apply(ctx context.Context, job *sluicev1.SluiceJob, d deployment) error {
	objs := []client.Object{configMap(job, d), coordinatorSvc(job), workersSvc(job), workerPDB(job),
		coordinatorDeployment(job, d), workerStatefulSet(job, d)}
	for _, want := range objs {
		if err := r.applyOne(ctx, job, want); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reconciler) applyOne(ctx context.Context, job *sluicev1.SluiceJob, want client.Object) error {
	have := want.DeepCopyObject().(client.Object)
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, have, func() error {
		copyInto(have, want)
		return controllerutil.SetControllerReference(job, have, r.Scheme)
	})
	if err != nil {
		return fmt.Errorf("apply %T %s/%s: %w", want, want.GetNamespace(), want.GetName(), err)
	}
	if op != controllerutil.OperationResultNone {
		r.logger().Debug("applied", "object", fmt.Sprintf("%T %s", want, want.GetName()), "op", op)
	}
	return nil
}

// copyInto sets the fields the operator owns of have from want, keeping
// what the API server and other controllers set.
func copyInto(have, want client.Object) {
	have.SetLabels(want.GetLabels())
	switch h := have.(type) {
	case *corev1.ConfigMap:
		h.Data = want.(*corev1.ConfigMap).Data
	case *corev1.Service:
		w := want.(*corev1.Service)
		h.Spec.Selector, h.Spec.Ports, h.Spec.PublishNotReadyAddresses = w.Spec.Selector, w.Spec.Ports, w.Spec.PublishNotReadyAddresses
		if h.Spec.ClusterIP == "" {
			h.Spec.ClusterIP = w.Spec.ClusterIP
		}
	case *policyv1.PodDisruptionBudget:
		h.Spec = want.(*policyv1.PodDisruptionBudget).Spec
	case *appsv1.Deployment:
		w := want.(*appsv1.Deployment)
		h.Spec.Replicas, h.Spec.Strategy, h.Spec.RevisionHistoryLimit = w.Spec.Replicas, w.Spec.Strategy, w.Spec.RevisionHistoryLimit
		if h.Spec.Selector == nil {
			h.Spec.Selector = w.Spec.Selector
		}
		h.Spec.Template = w.Spec.Template
	case *appsv1.StatefulSet:
		w := want.(*appsv1.StatefulSet)
		h.Spec.Replicas, h.Spec.UpdateStrategy, h.Spec.RevisionHistoryLimit = w.Spec.Replicas, w.Spec.UpdateStrategy, w.Spec.RevisionHistoryLimit
		if h.Spec.Selector == nil {
			h.Spec.Selector, h.Spec.ServiceName, h.Spec.PodManagementPolicy = w.Spec.Selector, w.Spec.ServiceName, w.Spec.PodManagementPolicy
		}
		h.Spec.Template = w.Spec.Template
	}
}

// drained reports whether none of the job's processes is left: both
// controllers report no replica at the current generation, and no pod
// of the job exists, not even a terminating one.
func (r *Reconciler) drained(ctx context.Context, job *sluicev1.SluiceJob) (bool, error) {
	var dep appsv1.Deployment
	if err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: coordinatorName(job)}, &dep); client.IgnoreNotFound(err) != nil {
		return false, err
	} else if err == nil && (dep.Status.ObservedGeneration < dep.Generation || dep.Status.Replicas > 0) {
		return false, nil
	}
	var sts appsv1.StatefulSet
	if err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: workerName(job)}, &sts); client.IgnoreNotFound(err) != nil {
		return false, err
	} else if err == nil && (sts.Status.ObservedGeneration < sts.Generation || sts.Status.Replicas > 0) {
		return false, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{LabelName: "sluice", LabelInstance: job.Name}); err != nil {
		return false, err
	}
	return len(pods.Items) == 0, nil
}

func setCondition(job *sluicev1.SluiceJob, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&job.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: job.Generation,
	})
}

// event records a Kubernetes event on a SluiceJob or a SluiceSavepoint.
func (r *Reconciler) event(obj client.Object, typ, reason, action, format string, args ...any) {
	kind := "sluicejob"
	if _, ok := obj.(*sluicev1.SluiceSavepoint); ok {
		kind = "sluicesavepoint"
	}
	r.logger().Info(fmt.Sprintf(format, args...), kind, client.ObjectKeyFromObject(obj), "reason", reason)
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, action, format, args...)
	}
}
