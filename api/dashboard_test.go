package api_test

import (
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testjob"
)

// chromium finds Debian's chromium (or another Chromium build). Without
// one the dashboard test skips, except on CI (CI=true), where it fails:
// CI installs chromium.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: CI must install it (apt-get install -y chromium) to test the dashboard")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium): skipping the headless dashboard test")
	return ""
}

// headless loads url in headless Chromium, lets the page run for budget
// of virtual time (network waits do not count), and returns the DOM; with
// a screenshot path it also writes a PNG. The page's console goes to
// Chromium's log: a violation of the dashboard's content security policy
// (an inline script or style, something from elsewhere) fails the test.
func headless(t *testing.T, bin, url string, budget time.Duration, screenshot string) string {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400,1100", "--enable-logging=stderr", "--v=0",
		fmt.Sprintf("--virtual-time-budget=%d", budget.Milliseconds())}
	if screenshot != "" {
		args = append(args, "--screenshot="+screenshot)
	} else {
		args = append(args, "--dump-dom")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "Content Security Policy") {
			t.Errorf("the dashboard broke its content security policy: %s", line)
		}
	}
	return string(out)
}

var attrRE = regexp.MustCompile(`([\w:-]+)="([^"]*)"`)

// tags returns the attributes of every start tag of the DOM that matches
// the pattern (a regexp for the whole tag).
func tags(dom, pattern string) []map[string]string {
	var out []map[string]string
	for _, tag := range regexp.MustCompile(pattern).FindAllString(dom, -1) {
		m := map[string]string{}
		for _, a := range attrRE.FindAllStringSubmatch(tag, -1) {
			m[a[1]] = html.UnescapeString(a[2])
		}
		out = append(out, m)
	}
	return out
}

// The dashboard, loaded in headless Chromium while a job runs, draws the
// job's graph with every vertex coloured by its backpressure level, the
// chart of the checkpoints the job completed, and the subtask table of the
// latest one: all from live data.
func TestDashboardInChromium(t *testing.T) {
	bin := chromium(t)
	e := start(t, testjob.Options{Name: "dashboard", Rate: 4000, Interval: 100 * time.Millisecond, Unaligned: true,
		Slow: 300 * time.Microsecond, Payload: 1024}, api.Options{RefreshInterval: 250 * time.Millisecond})
	before := e.run.AwaitCompleted(t, 3)
	lastBefore := before[len(before)-1].ID

	url := e.srv.URL() + "/#token=" + token
	dom := headless(t, bin, url, 3*time.Second, "")

	if b := tags(dom, `<body[^>]*>`); len(b) != 1 || b[0]["data-live"] != "true" {
		t.Fatalf("the page did not render live data (body %v):\n%.3000s", b, dom)
	}
	graph := tags(dom, `<svg[^>]*id="graph"[^>]*>`)
	if len(graph) != 1 || graph[0]["data-rendered"] != "true" || graph[0]["data-vertex-count"] != "2" || graph[0]["data-job"] != e.jobID {
		t.Errorf("graph %v", graph)
	}
	vertices := tags(dom, `<g[^>]*class="vertex[^"]*"[^>]*>`)
	job, err := e.client.Job(context.Background(), e.jobID)
	if err != nil {
		t.Fatal(err)
	}
	if len(vertices) != len(job.Vertices) {
		t.Fatalf("%d vertices drawn, the job has %d", len(vertices), len(job.Vertices))
	}
	for i, v := range vertices {
		level := v["data-backpressure-level"]
		if v["data-vertex-id"] != job.Vertices[i].ID || v["data-name"] != job.Vertices[i].Name ||
			!strings.Contains(v["class"], "level-"+level) || (level != "ok" && level != "low" && level != "high") {
			t.Errorf("vertex %d drawn as %v, want %s (%s)", i, v, job.Vertices[i].Name, job.Vertices[i].ID)
		}
		if r, err := strconv.ParseFloat(v["data-backpressure-ratio"], 64); err != nil || r < 0 || r > 1 {
			t.Errorf("vertex %d ratio %q", i, v["data-backpressure-ratio"])
		}
	}
	if edges := tags(dom, `<path[^>]*class="edge"[^>]*>`); len(edges) != 1 || edges[0]["data-ship-strategy"] != "HASH" ||
		edges[0]["data-from"] != job.Vertices[0].ID || edges[0]["data-to"] != job.Vertices[1].ID {
		t.Errorf("edges %v", edges)
	}

	chart := tags(dom, `<svg[^>]*id="chart"[^>]*>`)
	if len(chart) != 1 || chart[0]["data-rendered"] != "true" {
		t.Fatalf("chart %v", chart)
	}
	points, _ := strconv.Atoi(chart[0]["data-points"])
	last, _ := strconv.ParseInt(chart[0]["data-last-checkpoint"], 10, 64)
	if points < len(before) || last < lastBefore {
		t.Errorf("chart of %d points up to checkpoint %d; before the page loaded %d had completed, the last %d",
			points, last, len(before), lastBefore)
	}
	if n := len(tags(dom, `<circle[^>]*class="point duration"[^>]*>`)); n != points {
		t.Errorf("%d duration points drawn, data-points %d", n, points)
	}
	if n := len(tags(dom, `<polyline[^>]*class="series (duration|size|persisted)"[^>]*>`)); n != 3 {
		t.Errorf("%d series drawn, want duration, size and persisted", n)
	}

	table := tags(dom, `<table[^>]*id="subtasks"[^>]*>`)
	if len(table) != 1 || table[0]["data-rows"] != "4" {
		t.Fatalf("subtask table %v", table)
	}
	shown, _ := strconv.ParseInt(table[0]["data-checkpoint"], 10, 64)
	if shown < lastBefore {
		t.Errorf("table of checkpoint %d, older than %d which completed before the page loaded", shown, lastBefore)
	}
	rows := tags(dom, `<tr[^>]*data-vertex="[^"]*"[^>]*>`)
	if len(rows) != 4 || rows[0]["data-vertex"] != job.Vertices[0].Name || rows[3]["data-vertex"] != job.Vertices[1].Name {
		t.Errorf("table rows %v", rows)
	}

	// The watermarks of every subtask, as the vertex endpoint gives them
	// (the test job has none: Long.MIN_VALUE, shown as such).
	wms := tags(dom, `<tr[^>]*data-input-watermark="[^"]*"[^>]*>`)
	if w := tags(dom, `<table[^>]*id="watermarks"[^>]*>`); len(w) != 1 || w[0]["data-rows"] != "4" || len(wms) != 4 {
		t.Fatalf("watermark table %v, rows %v", w, wms)
	}
	for _, r := range wms {
		in, err1 := strconv.ParseFloat(r["data-input-watermark"], 64)
		out, err2 := strconv.ParseFloat(r["data-output-watermark"], 64)
		if err1 != nil || err2 != nil || in > -9.2e18 || out > -9.2e18 {
			t.Errorf("watermark row %v: want no watermark yet (the job has none)", r)
		}
	}
	if !strings.Contains(dom, "no watermark") {
		t.Error("the watermark table does not say there is no watermark yet")
	}

	// A screenshot for people to look at (kept with -args -screenshot DIR).
	if dir := os.Getenv("SLUICE_DASHBOARD_SCREENSHOT"); dir != "" {
		path := filepath.Join(dir, "dashboard.png")
		headless(t, bin, url, 3*time.Second, path)
		if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
			t.Errorf("screenshot: %v", err)
		}
		t.Logf("screenshot in %s", path)
	}
}
