// Package faultproxy is an HTTP reverse proxy for tests that puts faults
// between a client and a real server (the S3 server of scripts/s3, say):
// error answers, delays, connections dropped without an answer, uploads
// torn half way, and the server going away and coming back. Faults are set
// while the proxy runs, from any goroutine.
//
// The proxy forwards every request as it came: method, path (as the client
// encoded it), query, headers and Host header. A client that signs its
// requests (AWS SigV4 signs the Host header, the path and the query) is
// configured with the proxy's URL as its endpoint and signs for the
// proxy's address; the server sees the same Host, so the signatures stay
// valid. Only plain HTTP is spoken on both sides.
package faultproxy

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// Fault is what the proxy does with one request, instead of forwarding it
// as it is. The zero Fault forwards it.
type Fault struct {
	// Status, when not zero, answers the request with this status and an
	// S3-style XML error body (see ErrorCode) without forwarding it.
	Status int
	// Delay is waited before the request is handled (added to the delay of
	// SetDelay).
	Delay time.Duration
	// Drop closes the client's connection without an answer: the client
	// sees a connection reset or an unexpected EOF. Nothing is forwarded.
	Drop bool
	// Torn forwards the request with only the first half of its body (the
	// whole length announced), then ends the connection to the server: the
	// server sees an upload cut off half way. Once the server has handled
	// what it got (answered or closed, within 10 s), the client's
	// connection is dropped as with Drop, so that what the server made of
	// the torn upload is there to see when the client's request fails.
	Torn bool
}

// Proxy is a running fault-injecting reverse proxy on 127.0.0.1. Its
// methods are safe for concurrent use.
type Proxy struct {
	target *url.URL
	addr   string // host:port, the same across Stop and Start
	rp     *httputil.ReverseProxy
	tr     *http.Transport

	mu         sync.Mutex
	run        *run // nil while stopped
	closed     bool
	failLeft   int
	failStatus int
	delay      time.Duration
	rule       func(*http.Request) Fault
	requests   map[string]int
}

// run is one span of serving, from New or Start to Stop.
type run struct {
	srv      *http.Server
	served   chan struct{}   // closed when Serve has returned
	ctx      context.Context // canceled by Stop: the run's requests end
	cancel   context.CancelFunc
	handlers sync.WaitGroup // the run's requests being handled
}

// New starts a proxy on a free port of 127.0.0.1 that forwards to target,
// an http:// URL with no path ("http://127.0.0.1:7070"). Close it when
// done.
func New(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("faultproxy: target %q: want http://host:port with no path or query", target)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Never through an HTTP proxy of the environment, and byte for byte:
	// no transparent gzip.
	tr.Proxy = nil
	tr.DisableCompression = true
	p := &Proxy{
		target:   &url.URL{Scheme: u.Scheme, Host: u.Host},
		tr:       tr,
		requests: map[string]int{},
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// Only where the request goes changes: the path, the query and
			// the Host header stay the client's, which is what it signed.
			pr.Out.URL.Scheme = p.target.Scheme
			pr.Out.URL.Host = p.target.Host
			pr.Out.Host = pr.In.Host
		},
		Transport:    tr,
		ErrorHandler: p.upstreamFailed,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p.addr = ln.Addr().String()
	p.mu.Lock()
	p.serve(ln)
	p.mu.Unlock()
	return p, nil
}

// URL is the proxy's base URL, http://127.0.0.1:port: the endpoint to
// give the client. It stays the same across Stop and Start.
func (p *Proxy) URL() string { return "http://" + p.addr }

// FailNext answers the next n requests with status (usually 500 or 503)
// and an S3-style error body, whatever SetRule says; n <= 0 cancels what
// is left of an earlier FailNext. Delays still apply.
func (p *Proxy) FailNext(n, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failLeft, p.failStatus = max(n, 0), status
}

// SetDelay delays every request by d before it is handled (0: no delay).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// SetRule sets the function that picks the Fault of each request, by its
// method, path, query or headers (nil: forward every request). It is
// called on the request's goroutine, concurrently for concurrent
// requests, and must not read the request's body or call Stop or Close.
// FailNext, while it lasts, takes precedence over the rule's Status, Drop
// and Torn.
func (p *Proxy) SetRule(rule func(r *http.Request) Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule = rule
}

// Requests returns how many requests the proxy has received, by method,
// faulted or not.
func (p *Proxy) Requests() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.requests))
	for k, v := range p.requests {
		m[k] = v
	}
	return m
}

// Stop makes the server go away: the proxy stops listening, so that new
// connections are refused, closes the connections it has, and cancels the
// requests in flight; it returns when they have ended. A request cut off
// this way may or may not have reached the server, as with a server that
// dies. Stopping a stopped proxy does nothing.
func (p *Proxy) Stop() {
	p.mu.Lock()
	rn := p.run
	p.run = nil
	p.mu.Unlock()
	if rn == nil {
		return
	}
	rn.cancel()
	_ = rn.srv.Close()
	<-rn.served
	rn.handlers.Wait()
	p.tr.CloseIdleConnections()
}

// Start brings the server back after Stop: the proxy listens on the same
// address again. Starting a running proxy does nothing. It fails if the
// port has been taken in the meantime, or after Close.
func (p *Proxy) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("faultproxy: Start after Close")
	}
	if p.run != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("faultproxy: listen on %s again: %w", p.addr, err)
	}
	p.serve(ln)
	return nil
}

// Close stops the proxy for good and releases its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Stop()
}

// serve starts a run on ln; p.mu is held.
func (p *Proxy) serve(ln net.Listener) {
	rn := &run{served: make(chan struct{})}
	rn.ctx, rn.cancel = context.WithCancel(context.Background())
	rn.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.handle(rn, w, r)
		}),
		ReadHeaderTimeout: time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	p.run = rn
	go func() {
		defer close(rn.served)
		_ = rn.srv.Serve(ln)
	}()
}

// handle is the proxy's handler in run rn: count, pick the fault, apply
// it.
func (p *Proxy) handle(rn *run, w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.run != rn { // stopped while the request was read
		p.mu.Unlock()
		drop(w)
		return
	}
	rn.handlers.Add(1)
	defer rn.handlers.Done()
	p.requests[r.Method]++
	delay, rule := p.delay, p.rule
	failStatus := 0
	if p.failLeft > 0 {
		p.failLeft--
		failStatus = p.failStatus
	}
	p.mu.Unlock()
	// The request ends with the client's connection or with Stop.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(rn.ctx, cancel)()
	r = r.WithContext(ctx)

	var f Fault
	if rule != nil {
		f = rule(r)
	}
	if failStatus != 0 {
		f = Fault{Status: failStatus, Delay: f.Delay}
	}
	if d := delay + f.Delay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			drop(w)
			return
		}
	}
	if ctx.Err() != nil {
		drop(w)
		return
	}
	switch {
	case f.Drop:
		drop(w)
	case f.Status != 0:
		writeError(w, r, f.Status)
	case f.Torn:
		p.tear(ctx, w, r)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// tornWait bounds how long a torn request waits for the server's answer.
const tornWait = 10 * time.Second

// tear sends the request to the target with half its body, ends that
// connection, waits for the server to be done with it, and drops the
// client's connection.
func (p *Proxy) tear(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		drop(w)
		return
	}
	out := r.Clone(ctx)
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host
	out.RequestURI = ""
	// The whole length is announced, so that the server waits for the rest
	// and sees the connection close instead.
	out.TransferEncoding = nil
	out.ContentLength = int64(len(body))
	out.Body = io.NopCloser(bytes.NewReader(body))
	for _, h := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Upgrade"} {
		out.Header.Del(h)
	}
	var wire bytes.Buffer
	if err := out.Write(&wire); err != nil {
		drop(w)
		return
	}
	head := bytes.Index(wire.Bytes(), []byte("\r\n\r\n")) + len("\r\n\r\n")
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", p.target.Host)
	if err != nil {
		drop(w)
		return
	}
	defer context.AfterFunc(ctx, func() { _ = conn.Close() })()
	if _, err := conn.Write(wire.Bytes()[:head+len(body)/2]); err == nil {
		// The end of the stream is where the body stops: the server reads
		// it as the client's connection going away mid-body. Its answer,
		// if any, and its close are waited for and thrown away.
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
			_ = conn.SetReadDeadline(time.Now().Add(tornWait))
			_, _ = io.Copy(io.Discard, conn)
		}
	}
	_ = conn.Close()
	drop(w)
}

// upstreamFailed answers a request the target did not answer (refused,
// reset, canceled) with 502, as a load balancer in front of S3 would.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		drop(w)
		return
	}
	http.Error(w, "faultproxy: upstream: "+err.Error(), http.StatusBadGateway)
}

// drop closes the client's connection without an answer.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// The server closes the connection of a handler that panics with
	// ErrAbortHandler, and logs nothing.
	panic(http.ErrAbortHandler)
}

// ErrorCode is the S3 error code the proxy answers an injected status
// with: InternalError for 500, SlowDown for 503, and so on; InjectedFault
// for a status S3 has no usual code for.
func ErrorCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "InvalidRequest"
	case http.StatusForbidden:
		return "AccessDenied"
	case http.StatusNotFound:
		return "NoSuchKey"
	case http.StatusConflict:
		return "OperationAborted"
	case http.StatusPreconditionFailed:
		return "PreconditionFailed"
	case http.StatusInternalServerError:
		return "InternalError"
	case http.StatusNotImplemented:
		return "NotImplemented"
	case http.StatusServiceUnavailable:
		return "SlowDown"
	}
	return "InjectedFault"
}

// writeError answers with status and an S3 error document.
func writeError(w http.ResponseWriter, r *http.Request, status int) {
	code := ErrorCode(status)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("X-Amz-Request-Id", "faultproxy")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"+
		"<Error><Code>%s</Code><Message>injected by faultproxy: %d %s</Message>"+
		"<Resource>%s</Resource><RequestId>faultproxy</RequestId></Error>",
		code, status, http.StatusText(status), xmlEscape(r.URL.Path))
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
