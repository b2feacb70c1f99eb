package controller

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
)

// A SluiceSavepoint waits for its job to run, fails with the job's
// reason when the savepoint fails (not triggered again), and a deleted
// completed one whose job is gone lets go of its finalizer (its files
// cannot be disposed of without the job's API). The happy path, a savepoint
// written and disposed of by a real job, is in TestJobRunsExactlyOnce.
func TestSluiceSavepointFailsAndLetsGo(t *testing.T) {
	triggers := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/jobs/j/savepoints":
			triggers++
			fmt.Fprint(w, `{"request-id":"t1"}`)
		case r.URL.Path == "/jobs/j/savepoints/t1":
			fmt.Fprint(w, `{"status":{"id":"COMPLETED"},"operation":{"failure-cause":{"class":"java.io.IOException","stack-trace":"disk full"}}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	scheme := k8sruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = sluicev1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&sluicev1.SluiceJob{}, &sluicev1.SluiceSavepoint{}).Build()
	job := testJob()
	job.Spec.HA = nil
	job.Status.Phase = PhaseDeploying
	if err := c.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	sp := &sluicev1.SluiceSavepoint{ObjectMeta: metav1.ObjectMeta{Name: "sp", Namespace: "ns"}, Spec: sluicev1.SluiceSavepointSpec{JobName: "wc"}}
	if err := c.Create(t.Context(), sp); err != nil {
		t.Fatal(err)
	}
	r := &SavepointReconciler{Jobs: &Reconciler{Client: c, Scheme: scheme, PollInterval: time.Millisecond,
		ServiceAddress: func(string) string { return srv.Listener.Addr().String() }}}
	key := client.ObjectKeyFromObject(sp)
	step := func(want sluicev1.SavepointState) *sluicev1.SluiceSavepoint {
		t.Helper()
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		var got sluicev1.SluiceSavepoint
		if err := c.Get(t.Context(), key, &got); err != nil {
			t.Fatal(err)
		}
		if got.Status.State != want {
			t.Fatalf("state %s, want %s: %+v", got.Status.State, want, got.Status)
		}
		return &got
	}
	got := step(sluicev1.SavepointPending)
	if triggers != 0 || !strings.Contains(got.Status.Error, "waiting for the SluiceJob wc") {
		t.Fatalf("a job that does not run yet: %d triggers, error %q", triggers, got.Status.Error)
	}
	job.Status.Phase, job.Status.Job.ID = PhaseRunning, "j"
	if err := c.Status().Update(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	step(sluicev1.SavepointInProgress)
	got = step(sluicev1.SavepointFailed)
	if !strings.Contains(got.Status.Error, "disk full") || got.Status.ResultTime == nil {
		t.Errorf("failed: error %q, result time %v", got.Status.Error, got.Status.ResultTime)
	}
	step(sluicev1.SavepointFailed)
	if triggers != 1 {
		t.Errorf("%d triggers, want 1: a failed SluiceSavepoint is not triggered again", triggers)
	}

	// A completed one deleted once its job is gone: its files cannot be
	// disposed of, the finalizer goes, the resource too.
	got.Status.State, got.Status.Path = sluicev1.SavepointCompleted, "/sp/savepoint-x"
	if err := c.Status().Update(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), key, got); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted SluiceSavepoint is still there (%v): finalizers %v", err, got.Finalizers)
	}
}
