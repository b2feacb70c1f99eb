package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func boundsServer(t *testing.T, opts Options) *Server {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	opts.Logger = slog.New(slog.DiscardHandler)
	s := New(opts)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func post(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

func (s *Server) keptOperations() int {
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	return len(s.ops.byID)
}

// Completed operations are let go after the store duration, and no more
// than MaxOperations are kept: a client triggering without end does not
// grow the server.
func TestOperationsBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{{"store duration", Options{AsyncStoreDuration: 100 * time.Millisecond}}, {"maximum", Options{MaxOperations: 4}}} {
		t.Run(tc.name, func(t *testing.T) {
			s := boundsServer(t, tc.opts)
			dispose := func() string {
				code, v := post(t, s.URL()+"/savepoint-disposal", map[string]string{"savepoint-path": t.TempDir() + "/absent"})
				if code != http.StatusAccepted {
					t.Fatalf("disposal: %d %v", code, v)
				}
				return v["request-id"].(string)
			}
			first := dispose()
			deadline := time.Now().Add(20 * time.Second)
			for op := s.operationAt(disposalKey, first); op == nil || !op.isDone(); op = s.operationAt(disposalKey, first) {
				if time.Now().After(deadline) {
					t.Fatal("the first disposal never completed")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if tc.opts.AsyncStoreDuration > 0 {
				time.Sleep(2 * tc.opts.AsyncStoreDuration)
				if s.operationAt(disposalKey, first) != nil {
					t.Error("a completed operation outlived the store duration")
				}
				return
			}
			for range 50 {
				dispose()
				if n := s.keptOperations(); n > tc.opts.MaxOperations {
					t.Fatalf("%d operations kept, at most %d", n, tc.opts.MaxOperations)
				}
			}
		})
	}
}

func (o *operation) isDone() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done
}

// A trigger id a client chooses is bounded and plain.
func TestTriggerIDBounded(t *testing.T) {
	for id, ok := range map[string]bool{
		strings.Repeat("a", MaxTriggerIDLen):   true,
		strings.Repeat("a", MaxTriggerIDLen+1): false,
		strings.Repeat("a", 1<<20):             false,
		"a/b":                                  false,
		"0a1b2c3d-e4f5":                        true,
	} {
		if err := checkTriggerID(id); (err == nil) != ok {
			t.Errorf("checkTriggerID(%.20q... of %d bytes) = %v", id, len(id), err)
		}
	}
}

// A client that sends a header and then stops, or stays idle, does not
// keep its connection: the server's timeouts close it.
func TestHTTPTimeouts(t *testing.T) {
	s := boundsServer(t, Options{Timeouts: HTTPTimeouts{ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond, Idle: 300 * time.Millisecond}})
	for name, req := range map[string]string{
		"a body that never comes":  "POST /savepoint-disposal HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
		"a header that never ends": "GET /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n",
		"an idle keep-alive":       "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	} {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err = io.ReadAll(nc)
		if err != nil {
			t.Errorf("%s: %v, want the server to close the connection", name, err)
		}
		nc.Close()
	}
	if d := DefaultHTTPTimeouts; d.Read == 0 || d.Write == 0 || d.Idle == 0 || d.MaxHeaderBytes == 0 {
		t.Errorf("default timeouts %+v leave one unbounded", d)
	}
}

// A coordinator standing by for its job's leadership is ready: /readyz
// answers 200 "standby" (a second replica passes its probe), and 503 "no
// job yet" once it no longer stands by without a job.
func TestStandbyIsReady(t *testing.T) {
	s := boundsServer(t, Options{})
	readyz := func() (int, string) {
		resp, err := http.Get(s.URL() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h HealthStatus
		_ = json.NewDecoder(resp.Body).Decode(&h)
		return resp.StatusCode, h.Status
	}
	if code, _ := readyz(); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz without a job: %d, want 503", code)
	}
	s.ObserveStandby(true)
	if code, status := readyz(); code != http.StatusOK || status != "standby" {
		t.Errorf("/readyz of a standby: %d %q, want 200 standby", code, status)
	}
	s.ObserveStandby(false)
	if code, _ := readyz(); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after the standby led: %d, want 503 until the job runs", code)
	}
}
