package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "s3cret"

// Flink's documented field names of each response object (REST API,
// flink-runtime's rest.messages); optional ones appear only in some
// states.
var (
	jobIDWithStatusKeys = []string{"id", "status"}
	jobDetailsKeys      = []string{"jid", "name", "state", "start-time", "end-time", "duration", "last-modification", "tasks"}
	jobDetailsInfoKeys  = []string{"jid", "name", "isStoppable", "state", "job-type", "start-time", "end-time", "duration",
		"maxParallelism", "now", "timestamps", "vertices", "status-counts", "plan"}
	vertexInfoKeys = []string{"id", "name", "maxParallelism", "parallelism", "status", "start-time", "end-time",
		"duration", "tasks", "metrics"}
	ioMetricsKeys = []string{"read-bytes", "read-bytes-complete", "write-bytes", "write-bytes-complete", "read-records",
		"read-records-complete", "write-records", "write-records-complete", "accumulated-backpressured-time",
		"accumulated-idle-time", "accumulated-busy-time"}
	planKeys         = []string{"jid", "name", "type", "nodes"}
	planNodeKeys     = []string{"id", "parallelism", "operator", "operator_strategy", "description", "optimizer_properties"}
	planInputKeys    = []string{"num", "id", "ship_strategy", "exchange"}
	checkpointingKey = []string{"counts", "summary", "latest", "history"}
	countsKeys       = []string{"restored", "total", "in_progress", "completed", "failed"}
	summaryKeys      = []string{"checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered",
		"processed_data", "persisted_data"}
	statsSummaryKeys = []string{"min", "max", "avg", "p50", "p90", "p95", "p99", "p999"}
	latestKeys       = []string{"completed", "savepoint", "failed", "restored"}
	checkpointKeys   = []string{"className", "id", "status", "is_savepoint", "savepointFormat", "trigger_timestamp",
		"latest_ack_timestamp", "checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered",
		"processed_data", "persisted_data", "num_subtasks", "num_acknowledged_subtasks", "checkpoint_type", "tasks"}
	// phases is a Sluice addition.
	completedExtraKeys = []string{"external_path", "discarded", "phases"}
	phasesKeys         = []string{"last_subtask", "trigger_to_source_us", "barrier_to_last_us", "alignment_us", "sync_us",
		"async_us", "ack_us", "metadata_us", "notify_us", "completion_us"}
	taskCheckpointKeys = []string{"id", "status", "latest_ack_timestamp", "checkpointed_size", "state_size",
		"end_to_end_duration", "alignment_buffered", "processed_data", "persisted_data", "num_subtasks",
		"num_acknowledged_subtasks"}
	subtaskSummaryKeys   = []string{"checkpointed_size", "state_size", "end_to_end_duration", "checkpoint_duration", "alignment", "start_delay"}
	completedSubtaskKeys = []string{"index", "status", "ack_timestamp", "end_to_end_duration", "state_size",
		"checkpointed_size", "checkpoint", "alignment", "start_delay", "unaligned_checkpoint", "aborted"}
	backpressureKeys        = []string{"status", "backpressureLevel", "end-timestamp", "subtasks"}
	subtaskBackpressureKeys = []string{"subtask", "attempt-number", "backpressureLevel", "ratio", "idleRatio", "busyRatio"}
	checkpointConfigKeys    = []string{"mode", "interval", "timeout", "min_pause", "max_concurrent", "externalization",
		"checkpoint_storage", "unaligned_checkpoints", "tolerable_failed_checkpoints", "aligned_checkpoint_timeout"}
)

// object is a decoded JSON object.
type object = map[string]any

// checkKeys fails unless obj has exactly the keys of want (plus those of
// optional it may have).
func checkKeys(t *testing.T, what string, obj any, want []string, optional ...string) object {
	t.Helper()
	o, ok := obj.(object)
	if !ok {
		t.Fatalf("%s: %T, want an object", what, obj)
	}
	for _, k := range want {
		if _, ok := o[k]; !ok {
			t.Errorf("%s: no field %q", what, k)
		}
	}
	for k := range o {
		if !slices.Contains(want, k) && !slices.Contains(optional, k) {
			t.Errorf("%s: field %q is not Flink's", what, k)
		}
	}
	return o
}

// env is a running job served by a server with a token.
type env struct {
	run    *testjob.Run // nil for a job started by the test itself (serve)
	srv    *api.Server
	client *api.Client
	jobID  string
}

func start(t *testing.T, o testjob.Options, opts api.Options) *env {
	t.Helper()
	run := testjob.Start(t, o)
	e := serve(t, run.Job, opts)
	e.run = run
	return e
}

// serve serves job (started by the caller) with a token; the test's
// cleanup cancels the job, waits for its end and closes the server.
func serve(t *testing.T, job *sluice.Job, opts api.Options) *env {
	t.Helper()
	opts.Addr, opts.Token, opts.PollInterval = "127.0.0.1:0", token, 10*time.Millisecond
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := api.New(opts)
	id := srv.AddJob(job)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		job.Cancel()
		<-job.Done()
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &env{srv: srv, client: api.NewClient(srv.Addr(), token), jobID: id}
}

// raw GETs path with the token and decodes the JSON answer.
func (e *env) raw(t *testing.T, method, path string, wantStatus int) any {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, body, wantStatus)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: content type %q", method, path, ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, body)
	}
	return v
}

func num(v any) int64 { return int64(v.(float64)) }

func TestJobsAndVertices(t *testing.T) {
	e := start(t, testjob.Options{Name: "shapes", Rate: 20000, Interval: 20 * time.Millisecond}, api.Options{})
	e.run.AwaitCompleted(t, 1)

	jobs := checkKeys(t, "/jobs", e.raw(t, "GET", "/jobs", 200), []string{"jobs"})
	list := jobs["jobs"].([]any)
	if len(list) != 1 {
		t.Fatalf("/jobs lists %d jobs", len(list))
	}
	j := checkKeys(t, "/jobs entry", list[0], jobIDWithStatusKeys)
	if j["id"] != e.jobID || j["status"] != "RUNNING" || len(e.jobID) != 32 {
		t.Errorf("/jobs entry %v, want id %s RUNNING", j, e.jobID)
	}

	ov := checkKeys(t, "/jobs/overview", e.raw(t, "GET", "/jobs/overview", 200), []string{"jobs"})
	jd := checkKeys(t, "overview entry", ov["jobs"].([]any)[0], jobDetailsKeys)
	if jd["name"] != "shapes" || jd["end-time"].(float64) != -1 || jd["tasks"].(object)["running"].(float64) != 4 ||
		jd["tasks"].(object)["total"].(float64) != 4 {
		t.Errorf("overview entry %v", jd)
	}

	d := checkKeys(t, "/jobs/:id", e.raw(t, "GET", "/jobs/"+e.jobID, 200), jobDetailsInfoKeys)
	if d["state"] != "RUNNING" || d["job-type"] != "STREAMING" || d["isStoppable"] != true || d["maxParallelism"].(float64) != 128 {
		t.Errorf("job details %v", d)
	}
	vs := d["vertices"].([]any)
	if len(vs) != 2 {
		t.Fatalf("%d vertices, want 2", len(vs))
	}
	var ids []string
	for i, v := range vs {
		vo := checkKeys(t, "vertex", v, vertexInfoKeys)
		checkKeys(t, "vertex metrics", vo["metrics"], ioMetricsKeys)
		ids = append(ids, vo["id"].(string))
		want := []string{testjob.SourceVertex, testjob.CountVertex}[i]
		if vo["name"] != want || vo["parallelism"].(float64) != 2 || vo["status"] != "RUNNING" ||
			vo["tasks"].(object)["RUNNING"].(float64) != 2 {
			t.Errorf("vertex %d: %v", i, vo)
		}
	}
	// The plan's count node reads the source through a hash exchange.
	plan := checkKeys(t, "plan", d["plan"], planKeys)
	nodes := plan["nodes"].([]any)
	src := checkKeys(t, "plan node", nodes[0], planNodeKeys)
	cnt := checkKeys(t, "plan node", nodes[1], planNodeKeys, "inputs")
	if src["id"] != ids[0] || cnt["id"] != ids[1] {
		t.Errorf("plan node ids %v %v, vertex ids %v", src["id"], cnt["id"], ids)
	}
	in := checkKeys(t, "plan input", cnt["inputs"].([]any)[0], planInputKeys)
	if in["id"] != ids[0] || in["ship_strategy"] != "HASH" {
		t.Errorf("count's input %v, want HASH from %s", in, ids[0])
	}

	// Records flow: the vertex metrics add up what the tasks did.
	testjob.Await(t, "records to be counted", func() bool {
		d := e.raw(t, "GET", "/jobs/"+e.jobID, 200).(object)
		m := d["vertices"].([]any)[1].(object)["metrics"].(object)
		return m["read-records"].(float64) > 100 && m["read-bytes"].(float64) > 100*64
	})

	bp := checkKeys(t, "backpressure", e.raw(t, "GET", "/jobs/"+e.jobID+"/vertices/"+ids[0]+"/backpressure", 200), backpressureKeys)
	if bp["status"] != "ok" || !slices.Contains([]any{"ok", "low", "high"}, bp["backpressureLevel"]) {
		t.Errorf("backpressure %v", bp)
	}
	subs := bp["subtasks"].([]any)
	if len(subs) != 2 {
		t.Fatalf("%d backpressure subtasks, want 2", len(subs))
	}
	for i, s := range subs {
		so := checkKeys(t, "subtask backpressure", s, subtaskBackpressureKeys)
		sum := so["ratio"].(float64) + so["idleRatio"].(float64) + so["busyRatio"].(float64)
		if num(so["subtask"]) != int64(i) || sum < 0.995 || sum > 1.005 {
			t.Errorf("subtask backpressure %v (ratios add up to %v)", so, sum)
		}
	}
}

func TestCheckpointShapesAndFigures(t *testing.T) {
	e := start(t, testjob.Options{Name: "checkpoints", Rate: 20000, Interval: 20 * time.Millisecond, Unaligned: true}, api.Options{})
	e.run.AwaitCompleted(t, 3)
	ctx := context.Background()

	cp := checkKeys(t, "/checkpoints", e.raw(t, "GET", "/jobs/"+e.jobID+"/checkpoints", 200), checkpointingKey)
	counts := checkKeys(t, "counts", cp["counts"], countsKeys)
	if counts["completed"].(float64) < 3 || counts["failed"].(float64) != 0 {
		t.Errorf("counts %v", counts)
	}
	sum := checkKeys(t, "summary", cp["summary"], summaryKeys)
	for _, k := range summaryKeys {
		s := checkKeys(t, "summary "+k, sum[k], statsSummaryKeys)
		if s["min"].(float64) > s["max"].(float64) || s["p50"].(float64) < s["min"].(float64) || s["p99"].(float64) > s["max"].(float64) {
			t.Errorf("summary %s: %v", k, s)
		}
	}
	if sum["checkpointed_size"].(object)["min"].(float64) <= 0 {
		t.Errorf("checkpointed size summary %v, want sizes > 0", sum["checkpointed_size"])
	}
	latest := checkKeys(t, "latest", cp["latest"], latestKeys)
	lc := checkKeys(t, "latest completed", latest["completed"], append(slices.Clone(checkpointKeys), completedExtraKeys...))
	if lc["className"] != "completed" || lc["status"] != "COMPLETED" || lc["checkpoint_type"] != "UNALIGNED_CHECKPOINT" ||
		lc["savepointFormat"] != nil {
		t.Errorf("latest completed %v", lc)
	}
	for _, h := range cp["history"].([]any) {
		ho := h.(object)
		extra := map[any][]string{"completed": completedExtraKeys, "failed": {"failure_timestamp", "failure_message"}}[ho["className"]]
		checkKeys(t, "history entry", h, append(slices.Clone(checkpointKeys), extra...))
	}

	// Details of one completed checkpoint equal what the listener got.
	cs := e.run.Completed()[1]
	d := checkKeys(t, "details", e.raw(t, "GET", "/jobs/"+e.jobID+"/checkpoints/details/"+strconv.FormatInt(cs.ID, 10), 200),
		append(slices.Clone(checkpointKeys), completedExtraKeys...))
	for k, want := range map[string]int64{
		"id": cs.ID, "checkpointed_size": cs.CheckpointedSize, "state_size": cs.StateSize, "persisted_data": cs.PersistedData,
		"processed_data": cs.ProcessedData, "end_to_end_duration": cs.EndToEndDuration.Milliseconds(),
		"trigger_timestamp": cs.TriggerTime.UnixMilli(), "latest_ack_timestamp": cs.LatestAck.UnixMilli(),
		"num_subtasks": 4, "num_acknowledged_subtasks": 4,
	} {
		if got := num(d[k]); got != want {
			t.Errorf("details %s = %d, want %d", k, got, want)
		}
	}
	ph := checkKeys(t, "phases", d["phases"], phasesKeys)
	for k, want := range map[string]time.Duration{
		"trigger_to_source_us": cs.Phases.TriggerToSource, "barrier_to_last_us": cs.Phases.BarrierToLast,
		"alignment_us": cs.Phases.Alignment, "sync_us": cs.Phases.Sync, "async_us": cs.Phases.Async, "ack_us": cs.Phases.Ack,
		"metadata_us": cs.Phases.Metadata, "notify_us": cs.Phases.Notify, "completion_us": cs.Phases.Completion,
	} {
		// The listener runs before the notifications are sent: notify
		// (and completion) grow after it.
		later := (k == "notify_us" || k == "completion_us") && num(ph[k]) >= want.Microseconds()
		if got := num(ph[k]); (got != want.Microseconds() && !later) || got < 0 {
			t.Errorf("details phases %s = %d, want %d", k, got, want.Microseconds())
		}
	}
	if cs.Phases.Completion <= 0 || cs.Phases.Completion < cs.EndToEndDuration {
		t.Errorf("phases %+v of a checkpoint taking %v end to end", cs.Phases, cs.EndToEndDuration)
	}
	if d["external_path"] != filepath.Dir(cs.Path) || filepath.Base(cs.Path) != "_metadata" || d["is_savepoint"] != false {
		t.Errorf("details path %v, want %s", d["external_path"], cs.Path)
	}
	job, err := e.client.Job(ctx, e.jobID)
	if err != nil {
		t.Fatal(err)
	}
	tasks := d["tasks"].(object)
	if len(tasks) != 2 {
		t.Fatalf("details tasks %v, want one per vertex", tasks)
	}
	var persisted int64
	for vi, v := range job.Vertices {
		to := checkKeys(t, "task checkpoint", tasks[v.ID], taskCheckpointKeys)
		persisted += num(to["persisted_data"])
		if num(to["num_subtasks"]) != 2 || num(to["num_acknowledged_subtasks"]) != 2 {
			t.Errorf("vertex %s: %v", v.Name, to)
		}
		sub := checkKeys(t, "subtask details", e.raw(t, "GET",
			"/jobs/"+e.jobID+"/checkpoints/details/"+strconv.FormatInt(cs.ID, 10)+"/subtasks/"+v.ID, 200),
			append(slices.Clone(taskCheckpointKeys), "summary", "subtasks"))
		ss := checkKeys(t, "subtask summary", sub["summary"], subtaskSummaryKeys)
		checkKeys(t, "checkpoint_duration", ss["checkpoint_duration"], []string{"sync", "async"})
		checkKeys(t, "alignment summary", ss["alignment"], []string{"buffered", "processed", "persisted", "duration"})
		var want []checkpoint.TaskStats
		for _, ts := range cs.Tasks {
			if ts.Vertex == v.Name {
				want = append(want, ts)
			}
		}
		sort.Slice(want, func(i, j int) bool { return want[i].Subtask < want[j].Subtask })
		list := sub["subtasks"].([]any)
		if len(list) != len(want) || len(want) != 2 {
			t.Fatalf("vertex %d: %d subtasks, want %d", vi, len(list), len(want))
		}
		for i, s := range list {
			so := checkKeys(t, "subtask", s, completedSubtaskKeys)
			f := want[i].Figures
			checkKeys(t, "subtask checkpoint", so["checkpoint"], []string{"sync", "async"})
			al := checkKeys(t, "subtask alignment", so["alignment"], []string{"buffered", "processed", "persisted", "duration"})
			if num(so["index"]) != int64(want[i].Subtask) || so["status"] != "completed" ||
				num(so["start_delay"]) != f.StartDelay.Milliseconds() || num(al["duration"]) != f.Alignment.Milliseconds() ||
				num(al["persisted"]) != f.PersistedData || num(so["checkpoint"].(object)["sync"]) != f.Sync.Milliseconds() ||
				num(so["checkpoint"].(object)["async"]) != f.Async.Milliseconds() || so["unaligned_checkpoint"] != f.Unaligned ||
				num(so["ack_timestamp"]) != want[i].AckTime.UnixMilli() || num(so["checkpointed_size"]) != f.CheckpointedSize {
				t.Errorf("vertex %s subtask %d: %v, want figures %+v", v.Name, i, so, f)
			}
		}
	}
	if persisted != cs.PersistedData {
		t.Errorf("vertices persisted %d bytes in all, the checkpoint %d", persisted, cs.PersistedData)
	}

	cfg := checkKeys(t, "checkpoint config", e.raw(t, "GET", "/jobs/"+e.jobID+"/checkpoints/config", 200), checkpointConfigKeys)
	if cfg["mode"] != "exactly_once" || cfg["interval"].(float64) != 20 || cfg["unaligned_checkpoints"] != true {
		t.Errorf("checkpoint config %v", cfg)
	}
	tl := e.raw(t, "GET", "/jobs/"+e.jobID+"/checkpoints/timeline", 200).(object)["checkpoints"].([]any)
	if len(tl) < 3 || num(tl[0].(object)["id"]) >= num(tl[len(tl)-1].(object)["id"]) {
		t.Errorf("timeline of %d checkpoints, oldest first: %v", len(tl), tl)
	}
	latestDetails := e.raw(t, "GET", "/jobs/"+e.jobID+"/checkpoints/details/latest", 200).(object)
	if latestDetails["status"] != "COMPLETED" {
		t.Errorf("details/latest %v", latestDetails)
	}

	for _, c := range []struct{ path, want string }{
		{"/jobs/" + e.jobID + "/checkpoints/details/99999", "Could not find checkpointing statistics for checkpoint 99999"},
		{"/jobs/nope/checkpoints", "job not found"},
		{"/jobs/" + e.jobID + "/vertices/nope/backpressure", "No vertex"},
		{"/nothing/here", "Not found"},
	} {
		er := checkKeys(t, c.path, e.raw(t, "GET", c.path, 404), []string{"errors"})
		if msgs := er["errors"].([]any); len(msgs) != 1 || !strings.Contains(msgs[0].(string), c.want) {
			t.Errorf("%s: errors %v, want %q", c.path, msgs, c.want)
		}
	}
}

func TestTokenRequired(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector())
	e := start(t, testjob.Options{Name: "auth"}, api.Options{Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
	for _, path := range []string{"/jobs", "/jobs/" + e.jobID, "/metrics", "/config"} {
		for _, auth := range []string{"", "Bearer wrong", "Basic " + token} {
			req, _ := http.NewRequest("GET", e.srv.URL()+path, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 || !strings.Contains(string(body), `"errors"`) || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("GET %s with %q: %d %s, want 401", path, auth, resp.StatusCode, body)
			}
		}
	}
	req, _ := http.NewRequest("GET", e.srv.URL()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/metrics with the token: %d", resp.StatusCode)
	}
	// The dashboard's files need no token: they hold no data.
	for _, path := range []string{"/", "/static/app.js", "/static/style.css"} {
		resp, err := http.Get(e.srv.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(body) == 0 {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
}

// A savepoint, then stop-with-savepoint, through the API: both land on
// disk where the operation says.
func TestSavepointAndStop(t *testing.T) {
	e := start(t, testjob.Options{Name: "savepoints", Rate: 20000, Interval: 20 * time.Millisecond}, api.Options{})
	e.run.AwaitCompleted(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	dir := t.TempDir()
	trig, err := e.client.TriggerSavepoint(ctx, e.jobID, dir)
	if err != nil {
		t.Fatal(err)
	}
	res := e.raw(t, "GET", "/jobs/"+e.jobID+"/savepoints/"+trig, 200).(object)
	checkKeys(t, "operation", res, []string{"status"}, "operation")
	loc, err := e.client.WaitSavepoint(ctx, e.jobID, trig, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(loc) != dir {
		t.Errorf("savepoint at %s, want under %s", loc, dir)
	}
	if _, err := os.Stat(filepath.Join(loc, "_metadata")); err != nil {
		t.Errorf("savepoint location: %v", err)
	}
	done := checkKeys(t, "completed operation", e.raw(t, "GET", "/jobs/"+e.jobID+"/savepoints/"+trig, 200), []string{"status", "operation"})
	if done["status"].(object)["id"] != "COMPLETED" || done["operation"].(object)["location"] != loc {
		t.Errorf("operation %v", done)
	}
	// The savepoint shows up as the latest savepoint.
	st, err := e.client.Checkpoints(ctx, e.jobID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Latest.Savepoint == nil || st.Latest.Savepoint.ExternalPath == "" || st.Latest.Savepoint.CheckpointType != "SAVEPOINT" ||
		st.Latest.Savepoint.SavepointFormat == nil {
		t.Errorf("latest savepoint %+v", st.Latest.Savepoint)
	}

	trig, err = e.client.Stop(ctx, e.jobID, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if loc, err = e.client.WaitSavepoint(ctx, e.jobID, trig, 5*time.Millisecond); err != nil || filepath.Dir(loc) != dir {
		t.Fatalf("stop: %s, %v", loc, err)
	}
	if err := e.run.Wait(t); err != nil {
		t.Fatalf("stopped job: %v", err)
	}
	testjob.Await(t, "FINISHED in /jobs", func() bool {
		j, err := e.client.Job(ctx, e.jobID)
		return err == nil && j.State == "FINISHED" && j.EndTime > 0
	})
	_, err = e.client.SavepointStatus(ctx, e.jobID, "unknown")
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("unknown trigger: %v", err)
	}
}

func TestCancel(t *testing.T) {
	e := start(t, testjob.Options{Name: "cancel"}, api.Options{})
	res := e.raw(t, "PATCH", "/jobs/"+e.jobID+"?mode=cancel", 202)
	if len(res.(object)) != 0 {
		t.Errorf("cancel answered %v, want {}", res)
	}
	if err := e.run.Wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("job after cancel: %v", err)
	}
	testjob.Await(t, "CANCELED", func() bool {
		j, err := e.client.Jobs(context.Background())
		return err == nil && len(j) == 1 && j[0].State == "CANCELED"
	})
	// A job without checkpoints has no checkpoint statistics.
	er := e.raw(t, "GET", "/jobs/"+e.jobID+"/checkpoints", 404).(object)
	if !strings.Contains(er["errors"].([]any)[0].(string), "not enabled") {
		t.Errorf("checkpoints of a job without: %v", er)
	}
}

// Jobs are found by id, unique id prefix or name.
func TestJobReferences(t *testing.T) {
	e := start(t, testjob.Options{Name: "by-name"}, api.Options{})
	for _, ref := range []string{e.jobID, e.jobID[:8], "by-name"} {
		j, err := e.client.Job(context.Background(), ref)
		if err != nil || j.JID != e.jobID {
			t.Errorf("job %q: %v, %v", ref, j.JID, err)
		}
	}
}
