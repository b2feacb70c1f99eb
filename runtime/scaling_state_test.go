package runtime

import "testing"

// A run that starts from a snapshot the user gave (RestoreFrom, at the
// plan's parallelism: a savepoint restored at another one) does not take
// the scaling state an earlier leader of the job left in the HA store;
// only a run resuming the job's own checkpoint does.
func TestResumeScalingOnlyForTheJobsOwnCheckpoint(t *testing.T) {
	read := 0
	j := &Job{cfg: Config{PublishedScaling: func() (ScalingState, bool, error) {
		read++
		return ScalingState{}, false, nil
	}}}
	if req, auto := j.resumeScaling(&startPlan{restore: &restoreSnapshot{}, resumed: false}); req != nil || auto != nil || read != 0 {
		t.Fatalf("a run from a given snapshot read the stored scaling state %d times (got %v, %v)", read, req, auto)
	}
	j.resumeScaling(&startPlan{restore: &restoreSnapshot{}, resumed: true})
	if read != 1 {
		t.Fatalf("a run resuming the job's own checkpoint read the stored scaling state %d times, want 1", read)
	}
}
