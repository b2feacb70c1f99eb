package jobapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// rescaleServer answers PUT /jobs/j/resource-requirements with code and
// records the body it got.
func rescaleServer(t *testing.T, code int, msg string, got *map[string]any) *Client {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /jobs/j/resource-requirements", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("Authorization %q", r.Header.Get("Authorization"))
		}
		if err := json.NewDecoder(r.Body).Decode(got); err != nil {
			t.Error(err)
		}
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string][]string{"errors": {msg}})
	})
	// What the coordinators on main answer for a path they do not have.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string][]string{"errors": {"Not found: " + r.Method + " " + r.URL.Path}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &Client{Base: srv.URL, Token: "tok"}
}

func TestRescaleBodyInFlinksShape(t *testing.T) {
	var got map[string]any
	c := rescaleServer(t, http.StatusAccepted, "", &got)
	if err := c.Rescale(t.Context(), "j", map[string]int32{"v1": 4, "v2": 4}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	want := `{"v1":{"parallelism":{"lowerBound":4,"upperBound":4}},"v2":{"parallelism":{"lowerBound":4,"upperBound":4}}}`
	if string(b) != want {
		t.Errorf("body %s, want %s", b, want)
	}
}

func TestRescaleErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
		msg  string
		want error
	}{
		{"conflict", http.StatusConflict, "the job is RESTARTING", ErrConflict},
		{"method not allowed", http.StatusMethodNotAllowed, "", ErrNotSupported},
		{"unknown job", http.StatusNotFound, `job not found: "j"`, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got map[string]any
			err := rescaleServer(t, tc.code, tc.msg, &got).Rescale(t.Context(), "j", map[string]int32{"v": 2})
			if !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
			if tc.want == ErrNotFound && errors.Is(err, ErrNotSupported) {
				t.Errorf("an unknown job taken for a missing call: %v", err)
			}
		})
	}
	// A coordinator without the call: its catch-all 404.
	var got map[string]any
	c := rescaleServer(t, 0, "", &got)
	if err := c.Rescale(t.Context(), "other", map[string]int32{"v": 2}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("no such path: err %v, want ErrNotSupported", err)
	}
}

func TestSavepointPoll(t *testing.T) {
	answers := []string{
		`{"status":{"id":"IN_PROGRESS"}}`,
		`{"status":{"id":"COMPLETED"},"operation":{"location":"file:///sp/savepoint-1"}}`,
		`{"status":{"id":"COMPLETED"},"operation":{"failure-cause":{"class":"java.lang.Exception","stack-trace":"checkpoint declined","serialized-throwable":""}}}`,
	}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jobs/j/savepoints/t1" {
			t.Errorf("path %s", r.URL.Path)
		}
		_, _ = w.Write([]byte(answers[n]))
		n++
	}))
	defer srv.Close()
	c := &Client{Base: srv.URL}
	want := []SavepointResult{{}, {Done: true, Location: "file:///sp/savepoint-1"}, {Done: true, Failure: "java.lang.Exception: checkpoint declined"}}
	for i, w := range want {
		got, err := c.Savepoint(t.Context(), "j", "t1")
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("answer %d: %+v, want %+v", i, got, w)
		}
	}
}
