package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
)

// fakeJobAPI is a coordinator's REST API whose job state the test sets.
type fakeJobAPI struct {
	mu    sync.Mutex
	state string
	stops int
}

func (f *fakeJobAPI) set(state string) { f.mu.Lock(); f.state = state; f.mu.Unlock() }

func (f *fakeJobAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.URL.Path == "/jobs":
		fmt.Fprint(w, `{"jobs":[{"id":"j","status":"`+f.state+`"}]}`)
	case r.URL.Path == "/jobs/j":
		fmt.Fprintf(w, `{"jid":"j","state":%q,"vertices":[{"id":"v","parallelism":3,"status":%q}]}`, f.state, f.state)
	case r.URL.Path == "/jobs/j/checkpoints":
		fmt.Fprint(w, `{"latest":{"completed":{"id":4,"external_path":"/cp/j/chk-4"}}}`)
	case r.URL.Path == "/jobs/j/stop":
		f.stops++
		f.state = "FINISHED"
		fmt.Fprintf(w, `{"request-id":"stop-%d"}`, f.stops)
	case strings.HasPrefix(r.URL.Path, "/jobs/j/savepoints/stop-"):
		fmt.Fprintf(w, `{"status":{"id":"COMPLETED"},"operation":{"location":"/sp/savepoint-%s"}}`, strings.TrimPrefix(r.URL.Path, "/jobs/j/savepoints/stop-"))
	default:
		http.NotFound(w, r)
	}
}

// controllers plays the Deployment and StatefulSet controllers: every
// replica asked for at once, none left when none is.
func controllers(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	var deps appsv1.DeploymentList
	var stss appsv1.StatefulSetList
	if err := c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &stss, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		d.Status.ObservedGeneration, d.Status.Replicas = d.Generation, *d.Spec.Replicas
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for i := range stss.Items {
		s := &stss.Items[i]
		s.Status.ObservedGeneration, s.Status.Replicas = s.Generation, *s.Spec.Replicas
		if err := c.Status().Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

// The steps of a savepoint upgrade whose new version FAILS, each taken by
// a new Reconciler (an operator restarted between any two): one stop with
// a savepoint, the new version deployed only once the old one is drained,
// then rolled back from the same savepoint, said in the status.
func TestUpgradeStepsRollBackAcrossRestarts(t *testing.T) {
	api := &fakeJobAPI{state: "RUNNING"}
	srv := httptest.NewServer(api)
	defer srv.Close()
	scheme := k8sruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = sluicev1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&sluicev1.SluiceJob{}, &appsv1.Deployment{}, &appsv1.StatefulSet{}).Build()
	job := testJob()
	job.Spec.HA = nil
	if err := c.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(job)
	step := func(wantPhase sluicev1.JobPhase, wantStep sluicev1.UpgradeStep) *sluicev1.SluiceJob {
		t.Helper()
		r := &Reconciler{Client: c, Scheme: scheme, ServiceAddress: func(string) string { return srv.Listener.Addr().String() }, PollInterval: time.Millisecond}
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		var j sluicev1.SluiceJob
		if err := c.Get(t.Context(), key, &j); err != nil {
			t.Fatal(err)
		}
		var s sluicev1.UpgradeStep
		if j.Status.Upgrade != nil {
			s = j.Status.Upgrade.Step
		}
		if j.Status.Phase != wantPhase || s != wantStep {
			t.Fatalf("phase %s step %q, want %s %q: %s", j.Status.Phase, s, wantPhase, wantStep, statusString(&j))
		}
		return &j
	}
	replicas := func() (int32, int32) {
		var d appsv1.Deployment
		var s appsv1.StatefulSet
		_ = c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "wc-coordinator"}, &d)
		_ = c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "wc-worker"}, &s)
		return *d.Spec.Replicas, *s.Spec.Replicas
	}
	image := func() string {
		var d appsv1.Deployment
		_ = c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "wc-coordinator"}, &d)
		return d.Spec.Template.Spec.Containers[0].Image
	}

	step(PhaseDeploying, "")
	controllers(t, c, "ns") // the first version's processes run
	step(PhaseRunning, "")
	j := step(PhaseRunning, "")
	j.Spec.Image = "img:v2"
	if err := c.Update(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	step(PhaseUpgrading, sluicev1.StepSavepointing)
	step(PhaseUpgrading, sluicev1.StepSavepointing) // stop triggered
	j = step(PhaseUpgrading, sluicev1.StepDraining)
	if j.Status.Upgrade.RestorePath != "/sp/savepoint-1" {
		t.Fatalf("upgrade restore path %q", j.Status.Upgrade.RestorePath)
	}
	// Not drained yet: the old version's processes are still reported.
	step(PhaseUpgrading, sluicev1.StepDraining)
	if c, w := replicas(); c != 0 || w != 0 || image() != "img:v1" {
		t.Fatalf("draining: %d coordinators, %d workers of %s", c, w, image())
	}
	controllers(t, c, "ns")
	api.set("FAILED")
	j = step(PhaseUpgrading, sluicev1.StepDeploying)
	if c, w := replicas(); c != 1 || w != 2 || image() != "img:v2" || j.Status.RestorePath != "/sp/savepoint-1" {
		t.Fatalf("deploying: %d coordinators, %d workers of %s from %q", c, w, image(), j.Status.RestorePath)
	}
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "wc-config"}, &cm); err != nil || !strings.Contains(cm.Data[propertiesKey], `execution.state-recovery.path: "/sp/savepoint-1"`) {
		t.Fatalf("the new version's configuration does not restore the savepoint: %v %s", err, cm.Data[propertiesKey])
	}
	controllers(t, c, "ns") // the new version's processes run
	j = step(PhaseRollingBack, sluicev1.StepDraining)
	if !j.Status.Upgrade.RollingBack || j.Status.Upgrade.Target.Image != "img:v1" {
		t.Fatalf("rolling back to %s", j.Status.Upgrade.Target.Image)
	}
	step(PhaseRollingBack, sluicev1.StepDraining) // the new version's processes are still reported
	controllers(t, c, "ns")
	api.set("RUNNING")
	step(PhaseRollingBack, sluicev1.StepDeploying)
	j = step(PhaseRunning, "")
	if j.Status.Upgrade.Outcome != OutcomeRolledBack || image() != "img:v1" || j.Status.RestorePath != "/sp/savepoint-1" || api.stops != 1 {
		t.Fatalf("after the rollback: %s, image %s, %d stops", statusString(j), image(), api.stops)
	}
	if c := condition(j, ConditionUpgradeFailed); c == nil || c.Status != "True" {
		t.Errorf("condition UpgradeFailed %+v", c)
	}
	// The failed spec is not tried again.
	step(PhaseRunning, "")
	if api.stops != 1 {
		t.Errorf("the failed spec was tried again: %d stops", api.stops)
	}
}
