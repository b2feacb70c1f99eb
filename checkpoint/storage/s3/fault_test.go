package s3

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/internal/faultproxy"
)

// proxied returns a backend at a fresh location that reaches the S3
// server through a fault proxy.
func proxied(t *testing.T, c Config) (*Backend, *faultproxy.Proxy) {
	t.Helper()
	loc := testLocation(t)
	target := os.Getenv("AWS_ENDPOINT_URL_S3")
	if target == "" {
		target = os.Getenv("AWS_ENDPOINT_URL")
	}
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c.Endpoint = p.URL()
	c.MaxBackoff = 50 * time.Millisecond
	return newTestBackend(t, loc, c), p
}

// 503s (SlowDown) are retried with backoff: two of them cost two more
// attempts and the PUT succeeds; past the attempts the error names the
// bucket, the key, S3's code and the status.
func TestRetriesThrottling(t *testing.T) {
	ctx := t.Context()
	b, p := proxied(t, Config{MaxAttempts: 3})
	p.FailNext(2, http.StatusServiceUnavailable)
	if err := b.Put(ctx, "chk-1/a", []byte("x")); err != nil {
		t.Fatalf("Put after two 503s: %v", err)
	}
	if n := p.Requests()["PUT"]; n != 3 {
		t.Fatalf("%d PUT requests, want 3 (two refused, one stored)", n)
	}
	p.FailNext(10, http.StatusServiceUnavailable)
	err := b.Put(ctx, "chk-1/b", []byte("x"))
	var se *Error
	if !errors.As(err, &se) || se.Code != "SlowDown" || se.Status != 503 ||
		!strings.Contains(err.Error(), b.Path("chk-1/b")) {
		t.Fatalf("Put under endless 503s = %v; want an *Error with SlowDown, 503 and %s", err, b.Path("chk-1/b"))
	}
	if n := p.Requests()["PUT"]; n != 6 {
		t.Fatalf("%d PUT requests, want 6 (3 attempts more)", n)
	}
	p.FailNext(0, 0)
	p.FailNext(1, http.StatusInternalServerError)
	if _, err := b.Stat(ctx, "chk-1/a"); err != nil {
		t.Fatalf("Stat after one 500: %v", err)
	}
}

// An answer slower than the request timeout is given up on and the
// request retried.
func TestRetriesSlowAnswers(t *testing.T) {
	ctx := t.Context()
	b, p := proxied(t, Config{MaxAttempts: 3, RequestTimeout: 200 * time.Millisecond})
	var puts atomic.Int32
	p.SetRule(func(r *http.Request) faultproxy.Fault {
		if r.Method == http.MethodPut && puts.Add(1) == 1 {
			return faultproxy.Fault{Delay: 2 * time.Second}
		}
		return faultproxy.Fault{}
	})
	if err := b.Put(ctx, "k", []byte("slow")); err != nil {
		t.Fatalf("Put with a first slow answer: %v", err)
	}
	if n := puts.Load(); n < 2 {
		t.Fatalf("%d PUT attempts, want the slow one retried", n)
	}
	o, err := b.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
}

// A torn upload of a part or of a _metadata never leaves an object: the
// multipart upload is aborted, the cut PUT refused by its Content-MD5, and
// the storage has no complete checkpoint.
func TestTornUploadsLeaveNoObject(t *testing.T) {
	ctx := t.Context()
	b, p := proxied(t, Config{PartSize: MinPartSize, MaxAttempts: 1})
	p.SetRule(func(r *http.Request) faultproxy.Fault {
		if r.Method == http.MethodPut && r.URL.Query().Has("partNumber") {
			return faultproxy.Fault{Torn: true}
		}
		return faultproxy.Fault{}
	})
	w, err := b.Create(ctx, "shared/big")
	if err != nil {
		t.Fatal(err)
	}
	_, werr := w.Write(bytes.Repeat([]byte("s"), MinPartSize+10))
	cerr := w.Commit()
	if werr == nil && cerr == nil {
		t.Fatal("a torn part was taken for uploaded")
	}
	if _, err := b.Stat(ctx, "shared/big"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after a torn part, Stat = %v, want not exist", err)
	}

	st, err := storage.NewOnBackend(b, nil, "job", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.SetRule(func(r *http.Request) faultproxy.Fault {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/_metadata") {
			return faultproxy.Fault{Torn: true}
		}
		return faultproxy.Fault{}
	})
	loc, err := st.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	md := &storage.Metadata{Version: storage.MetadataVersion, Job: "job", CheckpointID: 1, Kind: storage.KindCheckpoint,
		Subtasks: []storage.SubtaskState{{OperatorUID: "op", Parallelism: 1, MaxParallelism: 128, Committables: [][]byte{bytes.Repeat([]byte("t"), 64<<10)}}}}
	if _, err := loc.WriteMetadata(md); err == nil {
		t.Fatal("a torn _metadata PUT reported success")
	}
	p.SetRule(nil)
	rec, err := st.Recover()
	if !errors.Is(err, storage.ErrNoCheckpoint) || len(rec.Unusable) != 0 {
		t.Fatalf("after a torn _metadata: Recover = %v, unusable %v; want no checkpoint at all", err, rec.Unusable)
	}
	// The same location can then be committed.
	if _, err := loc.WriteMetadata(md); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recover(); err != nil {
		t.Fatal(err)
	}
}

// The server gone: requests fail with an error naming the object, after
// the attempts; back, they succeed.
func TestServerAwayAndBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b, p := proxied(t, Config{MaxAttempts: 2})
	p.Stop()
	err := b.Put(ctx, "chk-2/_metadata", []byte("m"))
	if err == nil || !strings.Contains(err.Error(), b.Path("chk-2/_metadata")) {
		t.Fatalf("Put with the server away = %v, want an error naming %s", err, b.Path("chk-2/_metadata"))
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "chk-2/_metadata", []byte("m")); err != nil {
		t.Fatal(err)
	}
}
