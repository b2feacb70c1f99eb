package api_test

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testjob"
)

// TestNewOperationsAreGuarded: the checkpoint trigger and the savepoint
// disposal go through the same checks as the other operations: a
// cross-site text/plain POST is refused by a server without a token and
// the savepoint stays; a server with a token refuses them without it,
// while the probes answer without it.
func TestNewOperationsAreGuarded(t *testing.T) {
	e := startOpen(t, testjob.Options{Name: "victim", Rate: 5000, Interval: 20 * time.Millisecond}, api.Options{})
	e.run.AwaitCompleted(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	trig, err := e.client.TriggerSavepoint(ctx, "victim", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	loc, err := e.client.WaitSavepoint(ctx, e.jobID, trig, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	evil := map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
	for _, r := range []request{
		{method: "POST", path: "/savepoint-disposal", body: `{"savepoint-path": "` + loc + `"}`, headers: evil},
		{method: "POST", path: "/jobs/victim/checkpoints", body: `{}`, headers: evil},
		{method: "POST", path: "/savepoint-disposal", body: `{"savepoint-path": "` + loc + `"}`, headers: map[string]string{"Content-Type": "text/plain"}},
	} {
		if a := e.send(t, r); a.status != http.StatusForbidden && a.status != http.StatusUnsupportedMediaType {
			t.Errorf("%s %s %v: %d %v, want it refused", r.method, r.path, r.headers, a.status, a.errors)
		}
	}
	if _, err := os.Stat(loc); err != nil {
		t.Fatalf("the savepoint went after refused disposals: %v", err)
	}
	// The CLI's way disposes of it.
	if err := e.client.DisposeSavepoint(ctx, loc, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(loc); !os.IsNotExist(err) {
		t.Fatalf("savepoint %s after disposal: %v", loc, err)
	}
	// A checkpoint is not a savepoint: disposal refuses it, saying so.
	latest := e.run.AwaitCompleted(t, 1)
	if err := e.client.DisposeSavepoint(ctx, latest[len(latest)-1].Path, 5*time.Millisecond); err == nil {
		t.Fatal("a checkpoint was disposed of as a savepoint")
	}

	tok := start(t, testjob.Options{Name: "guarded", Rate: 1000}, api.Options{})
	for _, path := range []string{"/savepoint-disposal", "/jobs/guarded/checkpoints"} {
		req, _ := http.NewRequest(http.MethodPost, tok.srv.URL()+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s without the token: %d, want 401", path, resp.StatusCode)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
		resp, err := http.Get(tok.srv.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound {
			t.Errorf("GET %s without the token: %d", path, resp.StatusCode)
		}
	}
}
