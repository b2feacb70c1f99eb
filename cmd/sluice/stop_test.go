package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testcerts"
	"github.com/sluicehq/sluice/internal/testjob"
)

// runCLI runs the command line against the server at addr and returns
// its exit code and output.
func runCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	code := run(ctx, args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

// The flow examples/observability and deploy/README.md document: the
// example runs (as a process, as a user starts it), `sluice stop
// observability-demo` stops it with a savepoint and exits 0 saying where
// the savepoint is, the example exits 0, and `sluice inspect` reads the
// savepoint. The example ends when its job does, so it must keep serving
// until the CLI has read the savepoint's location.
func TestDocumentedStopFlow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "observability")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../examples/observability").CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/observability: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "-address", "127.0.0.1:0", "-dir", dir, "-interval", "200ms")
	cmd.Env = append(os.Environ(), "SLUICE_TOKEN=", "OTEL_TRACES_EXPORTER=none", "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=")
	var logs syncBuffer
	cmd.Stderr = &logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := regexp.MustCompile(`^api\s+(http://\S+)/jobs$`).FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var url string
	select {
	case url = <-urls:
	case err := <-exited:
		t.Fatalf("the example exited (%v) before serving:\n%s", err, logs.String())
	case <-ctx.Done():
		t.Fatalf("the example printed no API address:\n%s", logs.String())
	}
	c := api.NewClient(url, "")
	testjob.Await(t, "a completed checkpoint of observability-demo", func() bool {
		st, err := c.Checkpoints(ctx, "observability-demo")
		return err == nil && st.Counts.Completed > 0
	})

	env := map[string]string{"SLUICE_ADDRESS": url}
	code, out, errs := runCLI(t, env, "stop", "observability-demo")
	if code != 0 {
		t.Fatalf("sluice stop observability-demo: exit %d: %s%s\nthe example's log:\n%s", code, out, errs, logs.String())
	}
	m := regexp.MustCompile(`^job observability-demo stopped; savepoint stored in (\S+)\n$`).FindStringSubmatch(out)
	if m == nil || filepath.Dir(m[1]) != filepath.Join(dir, "savepoints") {
		t.Fatalf("sluice stop printed %q, want a savepoint under %s", out, filepath.Join(dir, "savepoints"))
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the example: %v\n%s", err, logs.String())
		}
	case <-ctx.Done():
		t.Fatalf("the example did not exit after the stop:\n%s", logs.String())
	}
	code, out, errs = runCLI(t, env, "inspect", m[1])
	if code != 0 || !regexp.MustCompile(`^savepoint \d+ of job "observability-demo"\n`).MatchString(out) {
		t.Fatalf("sluice inspect %s: exit %d %q %s", m[1], code, out, errs)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// fakeStop is a server whose stop operation's outcome is lost (it says
// the savepoint failed, as when a server abandons the wait) while the
// job's recorded result is result.
func fakeStop(t *testing.T, result *api.JobResultInfo) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /jobs/demo", func(w http.ResponseWriter, r *http.Request) {
		reply(w, api.JobDetailsInfo{JID: "0123456789abcdef0123456789abcdef", Name: "demo", State: "RUNNING"})
	})
	mux.HandleFunc("POST /jobs/0123456789abcdef0123456789abcdef/stop", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		reply(w, api.TriggerResponse{RequestID: "t1"})
	})
	mux.HandleFunc("GET /jobs/0123456789abcdef0123456789abcdef/savepoints/t1", func(w http.ResponseWriter, r *http.Request) {
		reply(w, api.AsynchronousOperationResult{Status: api.QueueStatus{ID: api.StatusCompleted},
			Operation: &api.SavepointInfo{FailureCause: &api.FailureCause{Class: "*errors.errorString", StackTrace: "context canceled"}}})
	})
	mux.HandleFunc("GET /jobs/0123456789abcdef0123456789abcdef/execution-result", func(w http.ResponseWriter, r *http.Request) {
		var res api.JobExecutionResultResponse
		res.Status.ID = "COMPLETED"
		res.Result = &api.JobExecutionResult{ID: "0123456789abcdef0123456789abcdef", ApplicationStatus: "SUCCEEDED", JobResult: result}
		reply(w, res)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// A stop whose operation says it failed, but whose job the API says
// finished with a savepoint (where asked), is a success; otherwise the
// failure stands.
func TestStopTrustsTheRecordedResult(t *testing.T) {
	for _, c := range []struct {
		name   string
		result *api.JobResultInfo
		args   []string
		code   int
		want   string
	}{
		{"finished with the savepoint", &api.JobResultInfo{Status: "FINISHED", Savepoint: "/sp/savepoint-1/_metadata"},
			nil, 0, "job demo stopped; savepoint stored in /sp/savepoint-1\n"},
		{"in the directory asked for", &api.JobResultInfo{Status: "FINISHED", Savepoint: "s3://bucket/sp/savepoint-1"},
			[]string{"--dir", "s3://bucket/sp/"}, 0, "job demo stopped; savepoint stored in s3://bucket/sp/savepoint-1\n"},
		{"in another directory", &api.JobResultInfo{Status: "FINISHED", Savepoint: "/elsewhere/savepoint-1"},
			[]string{"--dir", "/sp"}, 1, "savepoint failed: context canceled"},
		{"finished without a savepoint", &api.JobResultInfo{Status: "FINISHED"}, nil, 1, "savepoint failed: context canceled"},
		{"cancelled", &api.JobResultInfo{Status: "CANCELED", Savepoint: "/sp/savepoint-1"}, nil, 1, "savepoint failed"},
		{"an earlier run's result", &api.JobResultInfo{Status: "FINISHED", Savepoint: "/sp/savepoint-1", Previous: true}, nil, 1, "savepoint failed"},
		{"no result recorded", nil, nil, 1, "savepoint failed"},
	} {
		srv := fakeStop(t, c.result)
		code, out, errs := runCLI(t, map[string]string{"SLUICE_ADDRESS": srv.URL}, append([]string{"stop", "demo"}, c.args...)...)
		if code != c.code || !strings.Contains(out+errs, c.want) {
			t.Errorf("%s: exit %d %q %q, want %d and %q", c.name, code, out, errs, c.code, c.want)
		}
	}
}

// The server went away before the CLI read the outcome: the error says
// the savepoint may be complete and how to find it.
func TestStopServerGone(t *testing.T) {
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jobs/demo", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.JobDetailsInfo{JID: "abcd", Name: "demo"})
	})
	mux.HandleFunc("POST /jobs/abcd/stop", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(api.TriggerResponse{RequestID: "t1"})
		go srv.Close() // the process exits
	})
	srv = httptest.NewServer(mux)
	addr := srv.URL
	t.Cleanup(srv.Close)
	code, _, errs := runCLI(t, map[string]string{"SLUICE_ADDRESS": addr}, "stop", "demo")
	if code != 1 || !strings.Contains(errs, "connection refused") || !strings.Contains(errs, "the savepoint may be complete") {
		t.Errorf("exit %d %q", code, errs)
	}
}

// A server with TLS and a self-signed certificate: the CLI reaches it at
// https:// with --ca-cert (or SLUICE_CA_CERT), and refuses it without.
func TestTLSWithCACert(t *testing.T) {
	certFile, keyFile := testcerts.SelfSigned(t, "sluice test").Files(t)
	run := testjob.Start(t, testjob.Options{Name: "secure"})
	a := api.New(api.Options{Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	id := a.AddJob(run.Job)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		run.Job.Cancel()
		<-run.Job.Done()
		a.Close()
	})
	env := map[string]string{"SLUICE_ADDRESS": a.URL()}
	if code, out, errs := runCLI(t, env, "--ca-cert", certFile, "jobs"); code != 0 || !strings.Contains(out, id) {
		t.Errorf("jobs with --ca-cert: exit %d %q %s", code, out, errs)
	}
	env["SLUICE_CA_CERT"] = certFile
	if code, out, errs := runCLI(t, env, "jobs"); code != 0 || !strings.Contains(out, id) {
		t.Errorf("jobs with SLUICE_CA_CERT: exit %d %q %s", code, out, errs)
	}
	delete(env, "SLUICE_CA_CERT")
	if code, _, errs := runCLI(t, env, "jobs"); code != 1 || !strings.Contains(errs, "certificate") {
		t.Errorf("jobs without the certificate: exit %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, env, "--ca-cert", keyFile, "jobs"); code != 2 || !strings.Contains(errs, "no PEM certificate") {
		t.Errorf("--ca-cert of a key: exit %d %s", code, errs)
	}
}
