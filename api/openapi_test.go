package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testjob"
)

// openAPIDoc is the part of an OpenAPI 3 document the test reads.
type openAPIDoc struct {
	OpenAPI    string                              `json:"openapi"`
	Paths      map[string]map[string]openAPIOp     `json:"paths"`
	Components struct{ Schemas map[string]schema } `json:"components"`
}

type openAPIOp struct {
	Responses map[string]struct {
		Content map[string]struct {
			Schema schema `json:"schema"`
		} `json:"content"`
	} `json:"responses"`
}

// schema is the subset of a JSON schema the documents use.
type schema struct {
	Ref                  string            `json:"$ref"`
	Type                 string            `json:"type"`
	Nullable             bool              `json:"nullable"`
	Required             []string          `json:"required"`
	Properties           map[string]schema `json:"properties"`
	Items                *schema           `json:"items"`
	AdditionalProperties *schema           `json:"additionalProperties"`
	Enum                 []string          `json:"enum"`
	AllOf                []schema          `json:"allOf"`
}

func loadOpenAPI(t *testing.T, data []byte) *openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("the OpenAPI document is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q, want 3.x", doc.OpenAPI)
	}
	return &doc
}

// validate checks v against s: types, enums, and that every required
// field is there, all the way down.
func (d *openAPIDoc) validate(s schema, v any, at string) []string {
	if s.Ref != "" {
		name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
		rs, ok := d.Components.Schemas[name]
		if !ok {
			return []string{fmt.Sprintf("%s: $ref %s is not defined", at, s.Ref)}
		}
		return d.validate(rs, v, at)
	}
	if v == nil {
		if s.Nullable || (s.Type == "" && len(s.AllOf) == 0) {
			return nil
		}
		return []string{at + ": null, but the schema is not nullable"}
	}
	var errs []string
	for _, sub := range s.AllOf {
		errs = append(errs, d.validate(sub, v, at)...)
	}
	bad := func(want string) []string { return []string{fmt.Sprintf("%s: %T %v, want %s", at, v, v, want)} }
	switch s.Type {
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		for _, k := range s.Required {
			if _, ok := o[k]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required field %q missing", at, k))
			}
		}
		for k, fv := range o {
			if ps, ok := s.Properties[k]; ok {
				errs = append(errs, d.validate(ps, fv, at+"."+k)...)
			} else if s.AdditionalProperties != nil {
				errs = append(errs, d.validate(*s.AdditionalProperties, fv, at+"."+k)...)
			} else if s.Properties != nil {
				errs = append(errs, fmt.Sprintf("%s: field %q is not documented", at, k))
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return bad("an array")
		}
		if s.Items != nil {
			for i, x := range a {
				errs = append(errs, d.validate(*s.Items, x, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return bad("a string")
		}
		if len(s.Enum) > 0 && !slices.Contains(s.Enum, str) {
			errs = append(errs, fmt.Sprintf("%s: %q is not one of %v", at, str, s.Enum))
		}
	case "integer":
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) {
			return bad("an integer")
		}
	case "number":
		if _, ok := v.(float64); !ok {
			return bad("a number")
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return bad("a boolean")
		}
	}
	return errs
}

// docPath turns a ServeMux pattern into its method and OpenAPI path.
func docPath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	return strings.ToLower(method), path
}

// TestOpenAPIMatchesHandlers: every route the server registers is in the
// document and every documented operation is a route; each answers (not
// 404) for a running job, and each JSON answer validates against the
// schema documented for its status, required fields included.
func TestOpenAPIMatchesHandlers(t *testing.T) {
	e := start(t, testjob.Options{Rate: 2000, Interval: 20 * time.Millisecond, Options: nil},
		api.Options{Metrics: promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{})})
	served := e.rawBytes(t, http.MethodGet, "/openapi.json", nil, http.StatusOK)
	if !bytes.Equal(served, api.OpenAPI()) {
		t.Fatal("/openapi.json is not the embedded document")
	}
	doc := loadOpenAPI(t, served)

	routes := map[string]bool{}
	for _, r := range e.srv.Routes() {
		m, p := docPath(r)
		routes[m+" "+p] = true
		if _, ok := doc.Paths[p][m]; !ok {
			t.Errorf("route %s is not in the OpenAPI document", r)
		}
	}
	for p, ops := range doc.Paths {
		for m := range ops {
			if !routes[m+" "+p] {
				t.Errorf("documented %s %s is not a route of the server", strings.ToUpper(m), p)
			}
		}
	}

	e.run.AwaitCompleted(t, 1)
	var details struct {
		Vertices []struct{ ID string } `json:"vertices"`
	}
	if err := json.Unmarshal(e.rawBytes(t, http.MethodGet, "/jobs/"+e.jobID, nil, http.StatusOK), &details); err != nil || len(details.Vertices) == 0 {
		t.Fatalf("job details: %v %+v", err, details)
	}
	// The operations first: their trigger ids fill the status paths.
	// docOf finds the documented path of a concrete one.
	docOf := func(method, concrete string) (openAPIOp, bool) {
		for p, ops := range doc.Paths {
			re := "^" + regexp.MustCompile(`\\\{[a-z]+\\\}`).ReplaceAllString(regexp.QuoteMeta(p), "[^/]+") + "$"
			if op, ok := ops[method]; ok && regexp.MustCompile(re).MatchString(concrete) {
				return op, true
			}
		}
		return openAPIOp{}, false
	}
	trigger := func(path string, body any) string {
		data := e.rawBytes(t, http.MethodPost, path, body, http.StatusAccepted)
		var tr api.TriggerResponse
		if err := json.Unmarshal(data, &tr); err != nil || tr.RequestID == "" {
			t.Fatalf("POST %s: %v %+v", path, err, tr)
		}
		op, ok := docOf("post", path)
		if !ok {
			t.Fatalf("POST %s is not documented", path)
		}
		var v any
		_ = json.Unmarshal(data, &v)
		for _, msg := range doc.validate(op.Responses["202"].Content["application/json"].Schema, v, "POST "+path) {
			t.Error(msg)
		}
		return tr.RequestID
	}
	completed := func(path string) map[string]any {
		var res map[string]any
		testjob.Await(t, "GET "+path+" says COMPLETED", func() bool {
			res = nil
			_ = json.Unmarshal(e.rawBytes(t, http.MethodGet, path, nil, http.StatusOK), &res)
			st, _ := res["status"].(map[string]any)
			return st["id"] == api.StatusCompleted
		})
		return res
	}
	chkTrigger := trigger("/jobs/"+e.jobID+"/checkpoints", api.CheckpointTriggerRequest{CheckpointType: "FULL"})
	chk := completed("/jobs/" + e.jobID + "/checkpoints/" + chkTrigger)
	if op, _ := chk["operation"].(map[string]any); op["checkpointId"] == nil {
		t.Fatalf("triggered checkpoint: %v", chk)
	}
	spTrigger := trigger("/jobs/"+e.jobID+"/savepoints", api.SavepointTriggerRequest{TargetDirectory: t.TempDir()})
	sp := completed("/jobs/" + e.jobID + "/savepoints/" + spTrigger)
	location, _ := sp["operation"].(map[string]any)["location"].(string)
	if location == "" {
		t.Fatalf("savepoint: %v", sp)
	}
	dispTrigger := trigger("/savepoint-disposal", api.SavepointDisposalRequest{SavepointPath: location})
	disp := completed("/savepoint-disposal/" + dispTrigger)
	if op, _ := disp["operation"].(map[string]any); op["failure-cause"] != nil {
		t.Fatalf("disposal failed: %v", disp)
	}
	if _, err := os.Stat(location); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("disposed savepoint %s is still there: %v", location, err)
	}

	fill := strings.NewReplacer("{jobid}", e.jobID, "{vertexid}", details.Vertices[0].ID, "{checkpointid}", "latest")
	triggers := map[string]string{
		"/jobs/{jobid}/checkpoints/{triggerid}": chkTrigger, "/jobs/{jobid}/savepoints/{triggerid}": spTrigger,
		"/savepoint-disposal/{triggerid}": dispTrigger,
	}
	paths := make([]string, 0, len(doc.Paths))
	for p := range doc.Paths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		op, ok := doc.Paths[p]["get"]
		if !ok {
			continue
		}
		url := fill.Replace(strings.ReplaceAll(p, "{triggerid}", triggers[p]))
		if strings.Contains(p, "{name}") {
			url = strings.ReplaceAll(url, "{name}", testjob.QueryableCount) + "?key=1"
		}
		status, ct, body := e.request(t, http.MethodGet, url, nil)
		if status == http.StatusNotFound {
			t.Errorf("GET %s (%s): 404 %s", url, p, body)
			continue
		}
		resp, ok := op.Responses[fmt.Sprint(status)]
		if !ok {
			t.Errorf("GET %s: status %d is not documented", url, status)
			continue
		}
		mt, _, _ := strings.Cut(ct, ";")
		c, ok := resp.Content[mt]
		if !ok {
			t.Errorf("GET %s: %d answered %s, documented %v", url, status, ct, resp.Content)
			continue
		}
		if mt != "application/json" {
			continue
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Errorf("GET %s: %v", url, err)
			continue
		}
		for _, msg := range doc.validate(c.Schema, v, "GET "+p) {
			t.Error(msg)
		}
	}
	// The probes: ready while every task runs.
	if status, _, body := e.request(t, http.MethodGet, "/readyz", nil); status != http.StatusOK {
		t.Errorf("GET /readyz of a running job: %d %s", status, body)
	}
	// Last, what ends the job.
	stopTrigger := trigger("/jobs/"+e.jobID+"/stop", api.StopWithSavepointRequest{TargetDirectory: t.TempDir()})
	completed("/jobs/" + e.jobID + "/savepoints/" + stopTrigger)
	<-e.run.Job.Done()
	if status, _, body := e.request(t, http.MethodPatch, "/jobs/"+e.jobID, nil); status != http.StatusAccepted {
		t.Errorf("PATCH /jobs/%s: %d %s", e.jobID, status, body)
	}
	status, _, body := e.request(t, http.MethodGet, "/readyz", nil)
	if status != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz of a stopped job: %d %s, want 503", status, body)
	}
	var v any
	_ = json.Unmarshal(body, &v)
	for _, msg := range doc.validate(doc.Paths["/readyz"]["get"].Responses["503"].Content["application/json"].Schema, v, "GET /readyz 503") {
		t.Error(msg)
	}
}

// request sends method path (with a JSON body when body is not nil) with
// the token and returns the answer.
func (e *env) request(t *testing.T, method, path string, body any) (int, string, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), data
}

// rawBytes is request, failing unless the answer has wantStatus.
func (e *env) rawBytes(t *testing.T, method, path string, body any, wantStatus int) []byte {
	t.Helper()
	status, _, data := e.request(t, method, path, body)
	if status != wantStatus {
		t.Fatalf("%s %s: %d %s, want %d", method, path, status, data, wantStatus)
	}
	return data
}
