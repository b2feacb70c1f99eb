package runtime

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/checkpoint"
)

// Messages of another job, another attempt or an unknown task are refused
// by both gateways with ErrStaleMessage, and deliver nothing.
func TestGatewaysRefuseStaleMessages(t *testing.T) {
	a := &attempt{job: &Job{id: "job-a"}, number: 2, tasks: []*Task{{}, {}}}
	tg := localTaskGateway{a: a}
	cg := localCoordinatorGateway{d: &checkpointDriver{a: a}}
	for _, ref := range []TaskRef{
		{JobID: "job-b", Attempt: 2, Task: 0},
		{JobID: "job-a", Attempt: 1, Task: 0},
		{JobID: "job-a", Attempt: 2, Task: 2},
		{JobID: "job-a", Attempt: 2, Task: -1},
	} {
		checkStale(t, tg, cg, ref)
	}
}

// checkStale sends every message to and from ref through the gateways
// and fails t unless each is refused with ErrStaleMessage.
func checkStale(t *testing.T, tg localTaskGateway, cg localCoordinatorGateway, ref TaskRef) {
	t.Helper()
	for name, err := range map[string]error{
		"trigger":     tg.TriggerCheckpoint(TriggerCheckpoint{To: ref, Barrier: checkpoint.Barrier{ID: 1}}),
		"notify":      tg.NotifyCheckpoint(CheckpointNotification{To: ref, CheckpointID: 1, Complete: true}),
		"allowFinish": tg.AllowFinish(ref),
		"ack":         cg.Acknowledge(AcknowledgeCheckpoint{From: ref, CheckpointID: 1}),
		"decline":     cg.Decline(DeclineCheckpoint{From: ref, CheckpointID: 1}),
		"report":      cg.Report(TaskEvent{From: ref, Kind: ReportFinished}),
		"failed":      cg.Report(TaskEvent{From: ref, Kind: ReportFailed, Err: errors.New("boom")}),
	} {
		if !errors.Is(err, ErrStaleMessage) {
			t.Errorf("%s to %v: %v, want ErrStaleMessage", name, ref, err)
		}
	}
}

// After its failover region restarted, a task's messages of the execution
// before are refused by both gateways, and messages to it too.
func TestGatewaysRefuseStoppedExecution(t *testing.T) {
	a := &attempt{job: &Job{id: "job-a"}, number: 2, specs: make([]TaskSpec, 2),
		byID: []*Task{{execution: 1}, {}}, executions: []int{1, 0}}
	tg := localTaskGateway{a: a}
	cg := localCoordinatorGateway{d: &checkpointDriver{a: a}}
	checkStale(t, tg, cg, TaskRef{JobID: "job-a", Attempt: 2, Task: 0, Execution: 0})
}
