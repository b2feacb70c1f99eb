package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/metrics"
)

// With Flink's names, every figure of a finished job is exported under
// Flink's reporter's name and labels with the value Sluice's name has:
// the two collectors read the same job.
func TestFlinkNames(t *testing.T) {
	const name = "flink-names"
	plain, flink := metrics.NewCollector(), metrics.NewCollector(metrics.WithFlinkNames())
	regPlain, regFlink := prometheus.NewRegistry(), prometheus.NewRegistry()
	regPlain.MustRegister(plain)
	regFlink.MustRegister(flink)
	run := testjob.Start(t, testjob.Options{Name: name, Records: 500, Rate: 5000, Interval: 20 * time.Millisecond})
	plain.AddJob(run.Job)
	flink.AddJob(run.Job)
	if err := run.Wait(t); err != nil {
		t.Fatal(err)
	}
	sl, fl := gather(t, regPlain), gather(t, regFlink)
	for n := range fl {
		if !strings.HasPrefix(n, "flink_") && !strings.HasPrefix(n, "sluice_user_") && n != "sluice_job_checkpoint_duration_seconds" {
			t.Errorf("Flink-named collector exports %s", n)
		}
	}
	for n := range sl {
		if strings.HasPrefix(n, "sluice_task_") || strings.HasPrefix(n, "sluice_job_number") {
			if _, ok := fl[strings.NewReplacer("sluice_task_", "flink_taskmanager_job_task_", "sluice_job_", "flink_jobmanager_job_").Replace(n)]; !ok &&
				!strings.Contains(n, "accumulated") {
				t.Errorf("%s has no Flink-named counterpart", n)
			}
		}
	}
	// Task scope and operator scope: the same records, by Flink's labels.
	tasks := 0
	for _, s := range sl["sluice_task_numRecordsIn"] {
		want := map[string]string{"job_name": name, "task_name": s.labels["vertex"], "subtask_index": s.labels["subtask"]}
		for _, metric := range []string{"flink_taskmanager_job_task_numRecordsIn", "flink_taskmanager_job_task_operator_numRecordsIn"} {
			v, ok := value(fl, metric, want)
			if !ok || v != s.value {
				t.Errorf("%s%v = %v (found %t), want %v as sluice_task_numRecordsIn%v", metric, want, v, ok, s.value, s.labels)
			}
		}
		tasks++
	}
	if tasks == 0 {
		t.Fatal("no task figures")
	}
	for _, s := range fl["flink_taskmanager_job_task_operator_numRecordsIn"] {
		for _, l := range []string{"job_id", "job_name", "task_id", "task_name", "subtask_index", "operator_id", "operator_name"} {
			if s.labels[l] == "" {
				t.Errorf("operator series %v lacks label %s", s.labels, l)
			}
		}
		if len(s.labels["job_id"]) != 32 {
			t.Errorf("job_id %q: want 32 hex digits as Flink's", s.labels["job_id"])
		}
	}
	job := map[string]string{"job_name": name}
	for sluiceName, flinkName := range map[string]string{
		"sluice_job_numberOfCompletedCheckpoints": "flink_jobmanager_job_numberOfCompletedCheckpoints",
		"sluice_job_lastCompletedCheckpointId":    "flink_jobmanager_job_lastCompletedCheckpointId",
		"sluice_job_numRestarts":                  "flink_jobmanager_job_numRestarts",
	} {
		a, okA := value(sl, sluiceName, job)
		b, okB := value(fl, flinkName, job)
		if !okA || !okB || a != b {
			t.Errorf("%s = %v (%t), %s = %v (%t)", sluiceName, a, okA, flinkName, b, okB)
		}
	}
	if v, ok := value(fl, "flink_jobmanager_job_finishedState", job); !ok || v != 1 {
		t.Errorf("flink_jobmanager_job_finishedState = %v (%t), want 1 after the job finished", v, ok)
	}
	if v, ok := value(fl, "flink_jobmanager_job_runningState", job); !ok || v != 0 {
		t.Errorf("flink_jobmanager_job_runningState = %v (%t), want 0 after the job finished", v, ok)
	}
}
