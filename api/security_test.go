package api_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testcerts"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/internal/testutil"
)

// startOpen is start without a token: the default, where the server's
// own checks keep web pages out.
func startOpen(t *testing.T, o testjob.Options, opts api.Options) *env {
	t.Helper()
	run := testjob.Start(t, o)
	opts.Addr, opts.PollInterval = "127.0.0.1:0", 10*time.Millisecond
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv := api.New(opts)
	id := srv.AddJob(run.Job)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		run.Job.Cancel()
		<-run.Job.Done()
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	c := api.NewClient(srv.URL(), opts.Token)
	c.HTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return &env{run: run, srv: srv, client: c, jobID: id}
}

// request is a raw request to the server, with the headers a browser (or
// an attacker's page in one) would send.
type request struct {
	method, path string
	host         string // "" for the server's own address
	headers      map[string]string
	body         string
}

// answer is what the server said.
type answer struct {
	status int
	header http.Header
	errors []string
	body   string
}

func (e *env) send(t *testing.T, r request) answer {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, e.srv.URL()+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
	var er api.ErrorResponse
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &er); err != nil || len(er.Errors) == 0 {
			t.Errorf("%s %s: %d answered %q, not Flink's {\"errors\": [...]}", r.method, r.path, resp.StatusCode, b)
		}
		a.errors = er.Errors
	}
	return a
}

func (a answer) says(s string) bool { return strings.Contains(strings.Join(a.errors, "; "), s) }

// A web page on another site posts to /jobs/<name>/stop with a text/plain
// body (what a plain HTML form or a no-cors fetch can send without a
// preflight): the server without a token refuses it, saying why, and the
// job runs on; no savepoint lands where the page asked. The same stop as
// JSON from a client that is not a browser stops the job.
func TestCrossSiteStopIsRefused(t *testing.T) {
	e := startOpen(t, testjob.Options{Name: "victim", Rate: 20000, Interval: 20 * time.Millisecond}, api.Options{})
	e.run.AwaitCompleted(t, 1)
	evil := t.TempDir()
	body := `{"targetDirectory": "` + evil + `", "drain": false}`
	own := strings.TrimPrefix(e.srv.URL(), "http://")
	for _, c := range []struct {
		name    string
		req     request
		status  int
		because string
	}{
		{"cross-site form post", request{method: "POST", path: "/jobs/victim/stop", body: body, headers: map[string]string{
			"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site",
			"Sec-Fetch-Mode": "no-cors"}}, 403, "cross-site request refused"},
		{"cross-origin, no Sec-Fetch-Site", request{method: "POST", path: "/jobs/victim/stop", body: body, headers: map[string]string{
			"Content-Type": "text/plain", "Origin": "http://evil.example"}}, 403, "Origin http://evil.example is not this server's"},
		{"another port of this host", request{method: "POST", path: "/jobs/victim/stop", body: body, headers: map[string]string{
			"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}}, 403, "cross-origin request refused"},
		{"opaque origin", request{method: "POST", path: "/jobs/victim/stop", body: body, headers: map[string]string{
			"Content-Type": "text/plain", "Origin": "null"}}, 403, "cross-origin request refused"},
		{"text/plain without an Origin", request{method: "POST", path: "/jobs/victim/stop", body: body, headers: map[string]string{
			"Content-Type": "text/plain"}}, 415, "Content-Type: application/json"},
		{"a form's content type", request{method: "POST", path: "/jobs/victim/stop", body: "targetDirectory=" + evil, headers: map[string]string{
			"Content-Type": "application/x-www-form-urlencoded"}}, 415, "content type application/x-www-form-urlencoded refused"},
		{"a body without a content type", request{method: "POST", path: "/jobs/victim/savepoints", body: body}, 415,
			"content type none refused"},
		{"DNS rebinding", request{method: "POST", path: "/jobs/victim/stop", body: body, host: "rebind.evil.example:" + portOf(own),
			headers: map[string]string{"Content-Type": "application/json", "Origin": "http://rebind.evil.example:" + portOf(own)}},
			403, `Host "rebind.evil.example:` + portOf(own) + `" is not a name of this server`},
		{"cross-site cancel", request{method: "PATCH", path: "/jobs/victim?mode=cancel", headers: map[string]string{
			"Origin": "http://evil.example"}}, 403, "without a token, PATCH requests must come from the same origin"},
		{"cross-site savepoint", request{method: "POST", path: "/jobs/victim/savepoints", body: `{"target-directory": "` + evil + `", "cancel-job": true}`,
			headers: map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}}, 403, "cross-origin request refused"},
		{"DELETE from another site", request{method: "DELETE", path: "/jobs/victim", headers: map[string]string{
			"Sec-Fetch-Site": "same-site"}}, 403, "Sec-Fetch-Site: same-site"},
	} {
		a := e.send(t, c.req)
		if a.status != c.status || !a.says(c.because) {
			t.Errorf("%s: %d %v, want %d saying %q", c.name, a.status, a.errors, c.status, c.because)
		}
		if v := a.header.Get("Access-Control-Allow-Origin"); v != "" {
			t.Errorf("%s: Access-Control-Allow-Origin %q", c.name, v)
		}
		if s := e.run.Job.Status().String(); s != "RUNNING" {
			t.Fatalf("%s: the job is %s after the refused request", c.name, s)
		}
	}

	// A stop the way the CLI sends it, into another directory, stops the
	// job; once it ended, nothing can land in the page's directory, and
	// nothing did.
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	good := t.TempDir()
	trig, err := e.client.Stop(ctx, "victim", good, false)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := e.client.WaitSavepoint(ctx, e.jobID, trig, 5*time.Millisecond)
	if err != nil || filepath.Dir(loc) != good {
		t.Fatalf("stop: %s, %v", loc, err)
	}
	if err := e.run.Wait(t); err != nil {
		t.Fatalf("stopped job: %v", err)
	}
	if entries, _ := os.ReadDir(evil); len(entries) != 0 {
		t.Errorf("the refused requests left %d entries in their target directory", len(entries))
	}
}

func portOf(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

// What the server without a token lets in: its own pages' requests (same
// origin), clients that are not browsers, localhost, IP addresses and the
// allowed host names.
func TestSameOriginAndAllowedHosts(t *testing.T) {
	e := startOpen(t, testjob.Options{Name: "open", Rate: 20000, Interval: 20 * time.Millisecond},
		api.Options{AllowedHosts: []string{"sluice.internal", "*.jobs.example"}})
	e.run.AwaitCompleted(t, 1)
	port := portOf(strings.TrimPrefix(e.srv.URL(), "http://"))
	dir := t.TempDir()
	sp := `{"target-directory": "` + dir + `"}`
	for _, c := range []struct {
		name   string
		req    request
		status int
	}{
		{"GET from another origin (no CORS: the page cannot read it)", request{method: "GET", path: "/jobs",
			headers: map[string]string{"Origin": "http://evil.example"}}, 200},
		{"same origin", request{method: "POST", path: "/jobs/open/savepoints", body: sp, headers: map[string]string{
			"Content-Type": "application/json", "Origin": e.srv.URL(), "Sec-Fetch-Site": "same-origin"}}, 202},
		{"same origin, default port spelled out", request{method: "POST", path: "/jobs/open/savepoints", body: sp,
			host: "localhost", headers: map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": "http://LOCALHOST:80"}}, 202},
		{"curl", request{method: "POST", path: "/jobs/open/savepoints", body: sp, headers: map[string]string{
			"Content-Type": "application/json"}}, 202},
		{"no body, no content type", request{method: "POST", path: "/jobs/open/savepoints"}, 202},
		{"localhost", request{method: "GET", path: "/jobs", host: "localhost:" + port}, 200},
		{"IPv6 loopback", request{method: "GET", path: "/jobs", host: "[::1]:" + port}, 200},
		{"an address of the host", request{method: "GET", path: "/jobs", host: "192.0.2.7:" + port}, 200},
		{"allowed host", request{method: "GET", path: "/jobs", host: "Sluice.Internal:" + port}, 200},
		{"allowed host, trailing dot", request{method: "GET", path: "/jobs", host: "sluice.internal.:" + port}, 200},
		{"under an allowed domain", request{method: "GET", path: "/jobs", host: "a.jobs.example"}, 200},
		{"the allowed domain itself is not under it", request{method: "GET", path: "/jobs", host: "jobs.example"}, 403},
		{"another name", request{method: "GET", path: "/jobs", host: "sluice.internal.evil.example:" + port}, 403},
		{"the dashboard under another name", request{method: "GET", path: "/", host: "evil.example"}, 403},
	} {
		if a := e.send(t, c.req); a.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, a.status, a.body, c.status)
		}
	}
}

// Every answer carries the security headers; the dashboard's pages a
// policy that allows nothing inline and no framing; no answer has CORS
// headers, not even a preflight.
func TestSecurityHeaders(t *testing.T) {
	e := startOpen(t, testjob.Options{Name: "headers"}, api.Options{})
	withToken := start(t, testjob.Options{Name: "headers-token"}, api.Options{})
	for _, c := range []struct {
		srv       *env
		req       request
		status    int
		dashboard bool
	}{
		{e, request{method: "GET", path: "/"}, 200, true},
		{e, request{method: "GET", path: "/static/app.js"}, 200, true},
		{e, request{method: "GET", path: "/static/style.css"}, 200, true},
		{e, request{method: "GET", path: "/jobs"}, 200, false},
		{e, request{method: "GET", path: "/jobs/nope"}, 404, false},
		{e, request{method: "GET", path: "/jobs", host: "evil.example"}, 403, false},
		{e, request{method: "POST", path: "/jobs/headers/stop", body: "{}", headers: map[string]string{"Content-Type": "text/plain"}}, 415, false},
		{e, request{method: "OPTIONS", path: "/jobs/headers/stop", headers: map[string]string{"Origin": "http://evil.example",
			"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}}, 404, false},
		{withToken, request{method: "GET", path: "/"}, 200, true},
		{withToken, request{method: "GET", path: "/jobs"}, 401, false},
		{withToken, request{method: "OPTIONS", path: "/jobs", headers: map[string]string{"Origin": "http://evil.example",
			"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"}}, 404, false},
	} {
		a := c.srv.send(t, c.req)
		what := c.req.method + " " + c.req.path
		if a.status != c.status {
			t.Errorf("%s: %d, want %d", what, a.status, c.status)
		}
		for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
			"Referrer-Policy": "no-referrer", "Cross-Origin-Resource-Policy": "same-origin"} {
			if got := a.header.Get(k); got != want {
				t.Errorf("%s: %s %q, want %q", what, k, got, want)
			}
		}
		for k := range a.header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s: CORS header %s: %s", what, k, a.header.Get(k))
			}
		}
		csp := a.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: Content-Security-Policy %q", what, csp)
		}
		if c.dashboard && !strings.Contains(csp, "default-src 'self'") || !c.dashboard && !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", what, csp)
		}
	}
}

// The dashboard works under its policy: no inline script, style or event
// handler, nothing from elsewhere (the headless Chromium test sees it
// draw and logs no violation).
func TestDashboardHasNothingInline(t *testing.T) {
	page, err := os.ReadFile("web/index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags(string(page), `<[a-zA-Z][^>]*>`) {
		for k, v := range tag {
			if strings.HasPrefix(k, "on") || k == "style" || strings.HasPrefix(strings.TrimSpace(strings.ToLower(v)), "javascript:") {
				t.Errorf("index.html: inline code %s=%q", k, v)
			}
			if (k == "src" || k == "href") && strings.Contains(v, "//") {
				t.Errorf("index.html: %s=%q is not from this server", k, v)
			}
		}
	}
	scripts := tags(string(page), `<script[^>]*>`)
	if len(scripts) == 0 || strings.Count(string(page), "<script") != len(scripts) {
		t.Fatalf("scripts %v", scripts)
	}
	for _, s := range scripts {
		if s["src"] == "" {
			t.Errorf("inline script %v", s)
		}
	}
	if strings.Contains(string(page), "<style") {
		t.Errorf("index.html has an inline style sheet")
	}
	js, err := os.ReadFile("web/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"eval(", "new Function", `setAttribute("style"`, "innerHTML", "document.write", "javascript:"} {
		if strings.Contains(string(js), bad) {
			t.Errorf("app.js uses %s, which the policy forbids or which invites injection", bad)
		}
	}
}

// With a token, every call needs it, mutating ones too; other schemes,
// wrong tokens and a prefix or an extension of the token are refused.
func TestTokenOnEveryCall(t *testing.T) {
	e := start(t, testjob.Options{Name: "guarded", Rate: 20000, Interval: 20 * time.Millisecond}, api.Options{})
	e.run.AwaitCompleted(t, 1)
	dir := t.TempDir()
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer " + token[:3], "Bearer " + token + "x", "Basic " + token, token} {
		for _, r := range []request{
			{method: "POST", path: "/jobs/guarded/stop", body: `{"targetDirectory": "` + dir + `"}`},
			{method: "POST", path: "/jobs/guarded/savepoints", body: `{"target-directory": "` + dir + `"}`},
			{method: "PATCH", path: "/jobs/guarded?mode=cancel"},
			{method: "GET", path: "/jobs/guarded/checkpoints"},
		} {
			r.headers = map[string]string{"Content-Type": "application/json"}
			if auth != "" {
				r.headers["Authorization"] = auth
			}
			if a := e.send(t, r); a.status != 401 || !a.says("bearer token is required") {
				t.Errorf("%s %s with %q: %d %v, want 401", r.method, r.path, auth, a.status, a.errors)
			}
		}
	}
	if s := e.run.Job.Status().String(); s != "RUNNING" {
		t.Fatalf("the job is %s after the refused calls", s)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused calls left %d savepoints", len(entries))
	}
	// The scheme is case-insensitive (RFC 9110); with the token, a call
	// goes through.
	a := e.send(t, request{method: "GET", path: "/jobs", headers: map[string]string{"Authorization": "bearer " + token}})
	if a.status != 200 {
		t.Errorf("lower-case scheme: %d %v", a.status, a.errors)
	}
}

// TLS from a certificate and key file: the API answers over HTTPS to a
// client that trusts the certificate, not to one that does not, nor in
// plain HTTP; the origin check knows the scheme.
func TestTLS(t *testing.T) {
	leaf := testcerts.SelfSigned(t, "sluice test")
	certFile, keyFile := leaf.Files(t)
	pool := leaf.Pool()
	e := startOpen(t, testjob.Options{Name: "tls"}, api.Options{CertFile: certFile, KeyFile: keyFile})
	url := e.srv.URL()
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("URL %s", url)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
	c := api.NewClient(url, "")
	c.HTTP = &http.Client{Transport: tr}
	ctx := context.Background()
	jobs, err := c.Jobs(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].Name != "tls" {
		t.Fatalf("jobs over TLS: %v, %v", jobs, err)
	}
	var ca x509.UnknownAuthorityError
	if _, err := api.NewClient(url, "").Jobs(ctx); !errors.As(err, &ca) {
		t.Errorf("a client that does not trust the certificate: %v", err)
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + strings.TrimPrefix(url, "https://") + "/jobs")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP to the TLS port answered 200 %s", b)
		}
	}
	// Same origin is https://host:port now: the http:// origin of the
	// same host and port is another one.
	hc := &http.Client{Transport: tr}
	for origin, want := range map[string]int{"http://" + strings.TrimPrefix(url, "https://"): 403, url: 404} {
		req, _ := http.NewRequest("POST", url+"/jobs/nope/stop", bytes.NewReader([]byte("{}")))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Origin %s: %d, want %d", origin, resp.StatusCode, want)
		}
	}

	for _, o := range []api.Options{{CertFile: certFile}, {KeyFile: keyFile}, {CertFile: keyFile, KeyFile: certFile}} {
		o.Addr = "127.0.0.1:0"
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		s := api.New(o)
		if err := s.Start(); err == nil || !strings.Contains(err.Error(), "api: TLS") {
			t.Errorf("Start with %+v: %v, want a TLS error", o, err)
		}
		s.Close()
	}
}

// logWatch is a slog handler that signals each message it sees.
type logWatch struct {
	mu   sync.Mutex
	seen map[string]chan struct{}
}

func (l *logWatch) ch(msg string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]chan struct{}{}
	}
	if l.seen[msg] == nil {
		l.seen[msg] = make(chan struct{})
	}
	return l.seen[msg]
}

func (l *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (l *logWatch) Handle(_ context.Context, r slog.Record) error {
	ch := l.ch(r.Message)
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
	return nil
}
func (l *logWatch) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logWatch) WithGroup(string) slog.Handler      { return l }

// Shutdown keeps serving after the job stopped until the client that
// stopped it has read where the savepoint is; then it closes.
func TestShutdownWaitsForTheStopOutcome(t *testing.T) {
	logs := &logWatch{}
	e := startOpen(t, testjob.Options{Name: "stopped", Rate: 20000, Interval: 20 * time.Millisecond},
		api.Options{Logger: slog.New(logs)})
	e.run.AwaitCompleted(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	dir := t.TempDir()
	trig, err := e.client.Stop(ctx, e.jobID, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.run.Wait(t); err != nil { // the job ended: what its program does next is Shutdown
		t.Fatalf("stopped job: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.srv.Shutdown(ctx) }()
	testutil.AwaitClosed(t, "Shutdown to wait for the outcome to be read", logs.ch("waiting for the client that stopped the job to read the savepoint's outcome"))
	loc, err := e.client.WaitSavepoint(ctx, e.jobID, trig, 5*time.Millisecond)
	if err != nil || filepath.Dir(loc) != dir {
		t.Fatalf("the stop's outcome after the job ended: %s, %v", loc, err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("shutdown: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Shutdown did not return once the outcome was read")
	}
	if _, err := e.client.Jobs(ctx); err == nil {
		t.Error("the server still answers after Shutdown")
	}
}

// Shutdown waits no longer than its context when nobody reads the
// outcome, and not at all without a stop.
func TestShutdownBounded(t *testing.T) {
	logs := &logWatch{}
	e := startOpen(t, testjob.Options{Name: "unread", Rate: 20000, Interval: 20 * time.Millisecond}, api.Options{Logger: slog.New(logs)})
	e.run.AwaitCompleted(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	if _, err := e.client.Stop(ctx, e.jobID, t.TempDir(), false); err != nil {
		t.Fatal(err)
	}
	if err := e.run.Wait(t); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(ctx)
	closed := make(chan error, 1)
	go func() { closed <- e.srv.Shutdown(sctx) }()
	testutil.AwaitClosed(t, "Shutdown to wait", logs.ch("waiting for the client that stopped the job to read the savepoint's outcome"))
	scancel() // the grace period is over
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Shutdown did not return when its context ended")
	}
	testutil.AwaitClosed(t, "the warning", logs.ch("closing before the outcome of a stop-with-savepoint was read"))

	idle := startOpen(t, testjob.Options{Name: "idle"}, api.Options{})
	if err := idle.srv.Shutdown(ctx); err != nil { // returns at once: nothing to wait for
		t.Fatal(err)
	}
}

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8081": true, "127.0.0.2:0": true, "[::1]:8081": true, "localhost:8081": true, "LOCALHOST:1": true,
		":8081": false, "0.0.0.0:8081": false, "[::]:8081": false, "192.0.2.7:8081": false, "example.com:8081": false,
		"localhost.example.com:8081": false, "": false,
	} {
		if got := api.LoopbackAddr(addr); got != want {
			t.Errorf("LoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}
