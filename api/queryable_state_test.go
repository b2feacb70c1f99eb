package api_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testjob"
)

// TestQueryStateOverREST reads the test job's counts while it runs,
// through the client: the names, each key's value (never going back),
// and the refusals with their statuses.
func TestQueryStateOverREST(t *testing.T) {
	e := start(t, testjob.Options{Rate: 2000, Keys: 4}, api.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	names, err := e.client.QueryableStates(ctx, e.jobID)
	if err != nil || !slices.Equal(names, []string{testjob.QueryableCount}) {
		t.Fatalf("queryable states %v, %v", names, err)
	}
	last := map[string]int64{}
	testjob.Await(t, "every key counted past 20, read over REST", func() bool {
		done := true
		for _, k := range []string{"0", "1", "2", "3"} {
			v, found, err := api.QueryValue[int64](ctx, e.client, e.jobID, testjob.QueryableCount, k)
			if err != nil {
				t.Fatalf("key %s: %v", k, err)
			}
			if found && v < last[k] {
				t.Fatalf("key %s: %d after %d", k, v, last[k])
			}
			last[k] = v
			done = done && v > 20
		}
		return done
	})
	res, err := e.client.QueryState(ctx, e.jobID, testjob.QueryableCount, "7")
	if err != nil || res.Found || res.Value != nil {
		t.Fatalf("a key without a value: %+v, %v", res, err)
	}
	for _, c := range []struct {
		name, key string
		status    int
	}{
		{"no-such-state", "1", http.StatusNotFound},
		{testjob.QueryableCount, "one", http.StatusBadRequest},
	} {
		_, err := e.client.QueryState(ctx, e.jobID, c.name, c.key)
		var ae *api.APIError
		if !errors.As(err, &ae) || ae.Status != c.status {
			t.Errorf("query %s[%s]: %v, want %d", c.name, c.key, err, c.status)
		}
	}
	e.run.Job.Cancel()
	<-e.run.Job.Done()
	_, err = e.client.QueryState(ctx, e.jobID, testjob.QueryableCount, "1")
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Errorf("query of an ended job: %v, want 503", err)
	}
}
