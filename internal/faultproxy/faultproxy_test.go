package faultproxy_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/faultproxy"
)

// server is the S3 server of the environment scripts/with-s3 exports.
type server struct {
	endpoint, bucket, key, secret, region string
}

// s3Server reads the S3 server from the environment. Without one the test
// is skipped, except under CI=true, where it fails: CI runs every test
// under scripts/with-s3.
func s3Server(t *testing.T) server {
	t.Helper()
	s := server{
		endpoint: os.Getenv("AWS_ENDPOINT_URL_S3"),
		bucket:   os.Getenv("S3_BUCKET"),
		key:      os.Getenv("AWS_ACCESS_KEY_ID"),
		secret:   os.Getenv("AWS_SECRET_ACCESS_KEY"),
		region:   os.Getenv("AWS_REGION"),
	}
	if s.endpoint == "" {
		s.endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if s.region == "" {
		s.region = "us-east-1"
	}
	if s.endpoint == "" || s.bucket == "" || s.key == "" || s.secret == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no S3 server: AWS_ENDPOINT_URL_S3, S3_BUCKET, AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY is unset (CI runs the tests under scripts/with-s3)")
		}
		t.Skip("no S3 server: run the test under scripts/with-s3 (AWS_ENDPOINT_URL_S3, S3_BUCKET and the keys are unset)")
	}
	s.endpoint = strings.TrimSuffix(s.endpoint, "/")
	return s
}

// newProxy starts a proxy in front of the environment's S3 server.
func newProxy(t *testing.T) (*faultproxy.Proxy, server) {
	t.Helper()
	s := s3Server(t)
	p, err := faultproxy.New(s.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, s
}

// prefix is a key prefix of the test's own in the shared bucket.
func prefix(t *testing.T) string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	return "faultproxy-test/" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + hex.EncodeToString(r[:]) + "/"
}

// client is one that keeps no connection between requests, so that every
// request sees the proxy as it is now (Stop, Start).
func client() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
}

// do sends a request to base+path, path unescaped and followed by its
// query (escaped), signed for the server s when s is not nil, and returns
// the status and body. The path is sent escaped as SigV4 escapes it.
func do(t *testing.T, c *http.Client, s *server, method, base, path string, body []byte, hdr http.Header) (int, []byte, error) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path, u.RawQuery, _ = strings.Cut(path, "?")
	segs := strings.Split(u.Path, "/")
	for i, seg := range segs {
		segs[i] = uriEncode(seg)
	}
	u.RawPath = strings.Join(segs, "/")
	req, err := http.NewRequest(method, u.String(), rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if s != nil {
		sign(req, body, s.key, s.secret, s.region, time.Now())
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// sign signs req, whose body is body, with AWS Signature Version 4 for S3:
// the host (the address the request is sent to, here the proxy's), the
// x-amz-* headers, If-None-Match and the payload's SHA-256 are signed, as
// AWS SDKs do over plain HTTP.
func sign(req *http.Request, body []byte, key, secret, region string, now time.Time) {
	amzDate := now.UTC().Format("20060102T150405Z")
	day := amzDate[:8]
	payload := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(payload[:])
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)

	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	headers := map[string]string{"host": host}
	for k, vs := range req.Header {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-") || lk == "if-none-match" {
			headers[lk] = strings.TrimSpace(strings.Join(vs, ","))
		}
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var canonHeaders strings.Builder
	for _, k := range names {
		canonHeaders.WriteString(k + ":" + headers[k] + "\n")
	}
	signedHeaders := strings.Join(names, ";")

	q := req.URL.Query()
	qkeys := make([]string, 0, len(q))
	for k := range q {
		qkeys = append(qkeys, k)
	}
	sort.Strings(qkeys)
	var query []string
	for _, k := range qkeys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			query = append(query, uriEncode(k)+"="+uriEncode(v))
		}
	}
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	canonical := strings.Join([]string{
		req.Method, path, strings.Join(query, "&"),
		canonHeaders.String(), signedHeaders, payloadHash,
	}, "\n")
	scope := day + "/" + region + "/s3/aws4_request"
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	k := mac([]byte("AWS4"+secret), day)
	k = mac(k, region)
	k = mac(k, "s3")
	k = mac(k, "aws4_request")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/"+scope+
		", SignedHeaders="+signedHeaders+", Signature="+hex.EncodeToString(mac(k, toSign)))
}

func mac(key []byte, s string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(s))
	return h.Sum(nil)
}

// uriEncode is SigV4's encoding of a query key or value: everything but
// A-Z a-z 0-9 - _ . ~ percent-encoded.
func uriEncode(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// TestForwardsSignedRequests: requests signed for the proxy's address
// reach the server with valid signatures (the Host header, path and query
// are kept), objects go through both ways, and unsigned requests get the
// server's own answer.
func TestForwardsSignedRequests(t *testing.T) {
	p, s := newProxy(t)
	c := client()
	// A key that S3 clients and Go escape differently ('+'): the proxy
	// must send the path as the client did.
	obj := "/" + s.bucket + "/" + prefix(t) + "a b+c/_metadata"

	direct, _, err := do(t, c, nil, http.MethodGet, s.endpoint, "/"+s.bucket+"/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	proxied, _, err := do(t, c, nil, http.MethodGet, p.URL(), "/"+s.bucket+"/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if proxied != direct || direct < 400 {
		t.Fatalf("unsigned GET: %d through the proxy, %d direct; want the server's refusal both ways", proxied, direct)
	}

	data := bytes.Repeat([]byte("sluice "), 1000)
	if st, b, err := do(t, c, &s, http.MethodPut, p.URL(), obj, data, nil); err != nil || st != http.StatusOK {
		t.Fatalf("signed PUT through the proxy: %d %v %s", st, err, b)
	}
	t.Cleanup(func() { _, _, _ = do(t, c, &s, http.MethodDelete, s.endpoint, obj, nil, nil) })
	st, b, err := do(t, c, &s, http.MethodGet, p.URL(), obj, nil, nil)
	if err != nil || st != http.StatusOK || !bytes.Equal(b, data) {
		t.Fatalf("signed GET through the proxy: %d %v, %d bytes (want %d)", st, err, len(b), len(data))
	}
	list := "/" + s.bucket + "?list-type=2&prefix=" + uriEncode(strings.TrimPrefix(obj, "/"+s.bucket+"/"))
	st, b, err = do(t, c, &s, http.MethodGet, p.URL(), list, nil, nil)
	if err != nil || st != http.StatusOK || !bytes.Contains(b, []byte("<KeyCount>1</KeyCount>")) {
		t.Fatalf("signed list through the proxy: %d %v %s", st, err, b)
	}
	// A conditional create of an object that exists fails: S3's
	// If-None-Match: * on PUT, which a checkpoint's commit relies on.
	st, b, err = do(t, c, &s, http.MethodPut, p.URL(), obj, []byte("other"), http.Header{"If-None-Match": {"*"}})
	if err != nil || st != http.StatusPreconditionFailed {
		t.Fatalf("PUT If-None-Match: * of an existing object: %d %v %s; want 412", st, err, b)
	}
	if got := p.Requests(); got[http.MethodGet] != 3 || got[http.MethodPut] != 2 {
		t.Fatalf("Requests() = %v; want 3 GET and 2 PUT", got)
	}
}

func TestFailNext(t *testing.T) {
	p, s := newProxy(t)
	c := client()
	upstream, _, err := do(t, c, nil, http.MethodGet, p.URL(), "/"+s.bucket+"/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.FailNext(2, http.StatusServiceUnavailable)
	for i := range 2 {
		st, b, err := do(t, c, nil, http.MethodGet, p.URL(), "/"+s.bucket+"/", nil, nil)
		if err != nil || st != http.StatusServiceUnavailable || !bytes.Contains(b, []byte("<Error><Code>SlowDown</Code>")) {
			t.Fatalf("request %d after FailNext(2, 503): %d %v %s", i, st, err, b)
		}
	}
	if st, _, err := do(t, c, nil, http.MethodGet, p.URL(), "/"+s.bucket+"/", nil, nil); err != nil || st != upstream {
		t.Fatalf("third request after FailNext(2, 503): %d %v; want the server's %d", st, err, upstream)
	}
	p.FailNext(1, http.StatusInternalServerError)
	if st, b, err := do(t, c, nil, http.MethodGet, p.URL(), "/"+s.bucket+"/", nil, nil); err != nil || st != 500 || !bytes.Contains(b, []byte("<Code>InternalError</Code>")) {
		t.Fatalf("after FailNext(1, 500): %d %v %s", st, err, b)
	}
	if got := p.Requests()[http.MethodGet]; got != 5 {
		t.Fatalf("Requests()[GET] = %d; want 5", got)
	}
}

func TestDelay(t *testing.T) {
	p, s := newProxy(t)
	c := client()
	const d = 200 * time.Millisecond
	p.SetDelay(d)
	start := time.Now()
	if _, _, err := do(t, c, nil, http.MethodGet, p.URL(), "/"+s.bucket+"/", nil, nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("a request with SetDelay(%v) took %v", d, took)
	}
	p.SetDelay(0)
	p.SetRule(func(r *http.Request) faultproxy.Fault { return faultproxy.Fault{Delay: d} })
	start = time.Now()
	if _, _, err := do(t, c, nil, http.MethodGet, p.URL(), "/"+s.bucket+"/", nil, nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("a request with a rule's Delay %v took %v", d, took)
	}
}

// TestRule: a rule that fails the PUTs of _metadata fails those only.
func TestRule(t *testing.T) {
	p, s := newProxy(t)
	c := client()
	p.SetRule(func(r *http.Request) faultproxy.Fault {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "_metadata") {
			return faultproxy.Fault{Status: http.StatusInternalServerError}
		}
		return faultproxy.Fault{}
	})
	base := "/" + s.bucket + "/" + prefix(t)
	st, b, err := do(t, c, &s, http.MethodPut, p.URL(), base+"chk-1/_metadata", []byte("m"), nil)
	if err != nil || st != http.StatusInternalServerError || !bytes.Contains(b, []byte("<Code>InternalError</Code>")) {
		t.Fatalf("PUT of _metadata: %d %v %s; want the injected 500", st, err, b)
	}
	st, b, err = do(t, c, &s, http.MethodPut, p.URL(), base+"chk-1/state", []byte("s"), nil)
	if err != nil || st != http.StatusOK {
		t.Fatalf("PUT of another key: %d %v %s; want it forwarded", st, err, b)
	}
	t.Cleanup(func() { _, _, _ = do(t, c, &s, http.MethodDelete, s.endpoint, base+"chk-1/state", nil, nil) })
	if st, _, _ := do(t, c, &s, http.MethodHead, s.endpoint, base+"chk-1/_metadata", nil, nil); st != http.StatusNotFound {
		t.Fatalf("HEAD of the failed _metadata on the server: %d; want 404", st)
	}
	p.SetRule(nil)
	if st, _, err := do(t, c, &s, http.MethodGet, p.URL(), base+"chk-1/state", nil, nil); err != nil || st != http.StatusOK {
		t.Fatalf("GET after SetRule(nil): %d %v", st, err)
	}
}

func TestDrop(t *testing.T) {
	p, s := newProxy(t)
	c := client()
	p.SetRule(func(r *http.Request) faultproxy.Fault { return faultproxy.Fault{Drop: true} })
	if st, _, err := do(t, c, nil, http.MethodGet, p.URL(), "/"+s.bucket+"/", nil, nil); err == nil {
		t.Fatalf("a dropped request got an answer: %d", st)
	}
	if _, _, err := do(t, c, &s, http.MethodPut, p.URL(), "/"+s.bucket+"/"+prefix(t)+"x", bytes.Repeat([]byte("x"), 1<<20), nil); err == nil {
		t.Fatal("a dropped PUT got an answer")
	}
}

// TestTorn: an upload torn half way fails for the client and leaves no
// object on the server.
func TestTorn(t *testing.T) {
	p, s := newProxy(t)
	c := client()
	p.SetRule(func(r *http.Request) faultproxy.Fault {
		return faultproxy.Fault{Torn: r.Method == http.MethodPut}
	})
	obj := "/" + s.bucket + "/" + prefix(t) + "torn"
	if st, b, err := do(t, c, &s, http.MethodPut, p.URL(), obj, bytes.Repeat([]byte("t"), 1<<20), nil); err == nil {
		t.Fatalf("a torn PUT got an answer: %d %s", st, b)
	}
	// The client's request fails once the server is done with the torn
	// one, so there is nothing to wait for. (The payload's signed hash is
	// what lets the server tell: versitygw stores a torn body sent with
	// UNSIGNED-PAYLOAD and no checksum.)
	if st, _, err := do(t, c, &s, http.MethodHead, s.endpoint, obj, nil, nil); err != nil || st != http.StatusNotFound {
		_, _, _ = do(t, c, &s, http.MethodDelete, s.endpoint, obj, nil, nil)
		t.Fatalf("HEAD of the torn object: %d %v; want 404, no object", st, err)
	}
	if got := p.Requests()[http.MethodPut]; got != 1 {
		t.Fatalf("Requests()[PUT] = %d; want 1", got)
	}
}

func TestStopStart(t *testing.T) {
	p, s := newProxy(t)
	c := client()
	upstream, _, err := do(t, c, nil, http.MethodGet, p.URL(), "/"+s.bucket+"/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := p.URL()
	p.Stop()
	p.Stop() // a no-op
	_, _, err = do(t, c, nil, http.MethodGet, u, "/"+s.bucket+"/", nil, nil)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("request to a stopped proxy: %v; want connection refused", err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil { // a no-op
		t.Fatal(err)
	}
	if p.URL() != u {
		t.Fatalf("URL() after Start = %s; want %s", p.URL(), u)
	}
	if st, _, err := do(t, c, nil, http.MethodGet, u, "/"+s.bucket+"/", nil, nil); err != nil || st != upstream {
		t.Fatalf("request after Start: %d %v; want the server's %d", st, err, upstream)
	}
	p.Close()
	if err := p.Start(); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

// TestStopEndsRequestsInFlight: Stop cuts off a request waiting in a delay
// and returns without waiting for the delay.
func TestStopEndsRequestsInFlight(t *testing.T) {
	p, s := newProxy(t)
	c := client()
	p.SetDelay(time.Hour)
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Go(func() {
		_, _, err := do(t, c, nil, http.MethodGet, p.URL(), "/"+s.bucket+"/", nil, nil)
		errc <- err
	})
	deadline := time.Now().Add(10 * time.Second)
	for p.Requests()[http.MethodGet] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the request did not reach the proxy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop()
	wg.Wait()
	if err := <-errc; err == nil {
		t.Fatal("a request in flight at Stop got an answer")
	}
}

func TestNewRejectsTargets(t *testing.T) {
	for _, target := range []string{"https://127.0.0.1:1", "127.0.0.1:1", "http://127.0.0.1:1/bucket", "http://127.0.0.1:1?x=1", "ftp://x"} {
		if p, err := faultproxy.New(target); err == nil {
			p.Close()
			t.Errorf("New(%q) succeeded", target)
		}
	}
}

func TestErrorCode(t *testing.T) {
	for status, want := range map[int]string{500: "InternalError", 503: "SlowDown", 412: "PreconditionFailed", 418: "InjectedFault"} {
		if got := faultproxy.ErrorCode(status); got != want {
			t.Errorf("ErrorCode(%d) = %s; want %s", status, got, want)
		}
	}
}

// TestUpstreamDown: a request the server does not answer gets 502, as from
// a load balancer in front of it. It needs no S3 server.
func TestUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := "http://" + ln.Addr().String()
	_ = ln.Close()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	st, _, err := do(t, client(), nil, http.MethodGet, p.URL(), "/bucket/key", nil, nil)
	if err != nil || st != http.StatusBadGateway {
		t.Fatalf("GET with the server down: %d %v; want 502", st, err)
	}
}
