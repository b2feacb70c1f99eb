package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
)

func testJob() *sluicev1.SluiceJob {
	return &sluicev1.SluiceJob{
		ObjectMeta: metav1.ObjectMeta{Name: "wc", Namespace: "ns"},
		Spec: sluicev1.SluiceJobSpec{Image: "img:v1", Parallelism: 3, Slots: 2, CheckpointDir: "s3://b/cp",
			HA: &sluicev1.HASpec{EtcdEndpoints: []string{"etcd:2379"}, Standbys: 1}},
	}
}

// A standby coordinator does not serve the control plane until it is
// elected: its probes must not be on it, or it is restarted for ever.
func TestStandbyCoordinatorIsNotRestarted(t *testing.T) {
	j := testJob()
	d := coordinatorDeployment(j, deployment{spec: &j.Spec, running: true})
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas %d, want the leader and one standby", *d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	for name, p := range map[string]string{"liveness": c.LivenessProbe.HTTPGet.Port.StrVal, "readiness": c.ReadinessProbe.HTTPGet.Port.StrVal} {
		if p != "rest" {
			t.Errorf("%s probe on port %q, want rest (the API, which a standby serves)", name, p)
		}
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probe paths %s %s", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	if d.Spec.Strategy.Type != "Recreate" {
		t.Errorf("strategy %s: two versions' coordinators would run at once", d.Spec.Strategy.Type)
	}
}

// The workers reach the coordinator through its Service before the job
// runs, while its /readyz says 503.
func TestCoordinatorServicePublishesNotReady(t *testing.T) {
	if !coordinatorSvc(testJob()).Spec.PublishNotReadyAddresses {
		t.Error("the coordinator Service hides a coordinator that is not ready: the workers never reach it and the job never runs")
	}
}

func TestWorkersFromParallelismAndSlots(t *testing.T) {
	j := testJob()
	for _, tc := range []struct{ par, slots, want int32 }{{1, 1, 1}, {2, 2, 1}, {3, 2, 2}, {4, 2, 2}, {5, 2, 3}} {
		j.Spec.Parallelism, j.Spec.Slots = tc.par, tc.slots
		if got := *workerStatefulSet(j, deployment{spec: &j.Spec, running: true}).Spec.Replicas; got != tc.want {
			t.Errorf("parallelism %d slots %d: %d workers, want %d", tc.par, tc.slots, got, tc.want)
		}
	}
	if got := *workerStatefulSet(j, deployment{spec: &j.Spec}).Spec.Replicas; got != 0 {
		t.Errorf("drained: %d workers", got)
	}
}

// A rescale or a savepoint schedule is not a new version; an image is.
func TestVersionHash(t *testing.T) {
	a := testJob().Spec
	b := *a.DeepCopy()
	b.Parallelism, b.Savepoints.TriggerNonce = 7, 3
	if versionHash(&a) != versionHash(&b) {
		t.Error("a new parallelism or savepoint nonce is taken for a new version")
	}
	b.Image = "img:v2"
	if versionHash(&a) == versionHash(&b) {
		t.Error("a new image is not a new version")
	}
}

func TestPropertiesCarryTheRestorePathAndEpoch(t *testing.T) {
	j := testJob()
	j.Spec.Configuration = map[string]string{"execution.checkpointing.interval": "10 s"}
	p := properties(deployment{spec: &j.Spec, restorePath: "s3://b/sp/savepoint-1", epoch: 2})
	for _, want := range []string{`execution.state-recovery.path: "s3://b/sp/savepoint-1"`, `execution.checkpointing.dir: "s3://b/cp/epoch-2"`,
		`parallelism.default: "3"`, `execution.checkpointing.interval: "10 s"`} {
		if !strings.Contains(p, want+"\n") {
			t.Errorf("properties lack %s:\n%s", want, p)
		}
	}
}
