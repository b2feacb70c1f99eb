package network

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testcerts"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/peerauth"
)

// 2 000 requests for partitions never published, on one connection: at
// most MaxPendingRequests wait (no goroutine each), the others are
// refused naming the key; goroutines and heap stay flat.
func TestPendingRequestsBounded(t *testing.T) {
	const limit, requests = 100, 2000
	tr, err := NewTransport(TransportConfig{RequestTimeout: time.Hour, Limits: TransportLimits{MaxPendingRequests: limit}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	goroutines, heap := runtime.NumGoroutine(), int64(testutil.HeapInUse())
	nc, err := net.Dial("tcp", tr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fp := &fakePeer{t: t, nc: nc, br: bufio.NewReader(nc)}
	b := appendHello(nil)
	for i := range requests {
		b = appendRequest(b, uint64(i+1), 0, 2, 64, PartitionID(fmt.Sprintf("job/%d/0/0%s", i, strings.Repeat("x", 200))))
	}
	go func() { _, _ = nc.Write(b) }() // the refusals are read meanwhile
	refused := 0
	for refused < requests-limit {
		f := fp.read()
		if f.typ != frameError || f.code != codeInvalid || !strings.Contains(string(f.data), KeyMaxPendingRequests.Name()) {
			t.Fatalf("frame %+v (%q), want a refusal naming %s", f, f.data, KeyMaxPendingRequests.Name())
		}
		refused++
	}
	if st := tr.Stats(); st.PendingRequests != limit {
		t.Errorf("%d requests pending, want %d", st.PendingRequests, limit)
	}
	if grown := runtime.NumGoroutine() - goroutines; grown > 10 {
		t.Errorf("%d goroutines more for %d pending requests", grown, limit)
	}
	if grown := int64(testutil.HeapInUse()) - heap; grown > 8<<20 {
		t.Errorf("the heap grew by %d bytes", grown)
	}
	// Closing the connection drops them.
	_ = nc.Close()
	testutil.Await(t, "the pending requests dropped", func() bool { return tr.Stats().PendingRequests == 0 })
}

// Connections from one address past MaxConnectionsPerPeer are closed at
// once; the transport holds no more.
func TestConnectionsPerPeerBounded(t *testing.T) {
	const limit = 8
	tr, err := NewTransport(TransportConfig{Limits: TransportLimits{MaxConnectionsPerPeer: limit}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	goroutines := runtime.NumGoroutine()
	var conns []net.Conn
	for range 5 * limit {
		nc, err := net.Dial("tcp", tr.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		conns = append(conns, nc)
		_, _ = nc.Write(appendHello(nil))
	}
	closed := 0
	for _, nc := range conns[limit:] {
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	if closed != 4*limit {
		t.Errorf("%d connections past the limit closed, want %d", closed, 4*limit)
	}
	if st := tr.Stats(); st.AcceptedConnections != limit {
		t.Errorf("%d connections accepted, want %d", st.AcceptedConnections, limit)
	}
	// Two goroutines per served connection, nothing for the refused ones.
	if grown := runtime.NumGoroutine() - goroutines; grown > 2*limit+4 {
		t.Errorf("%d goroutines more for %d connections", grown, limit)
	}
}

// A connection that carries no channel is closed after the idle timeout.
func TestIdleConnectionsClosed(t *testing.T) {
	tr, err := NewTransport(TransportConfig{Limits: TransportLimits{IdleTimeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	nc, err := net.Dial("tcp", tr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(appendHello(nil)); err != nil {
		t.Fatal(err)
	}
	testutil.Await(t, "the connection accepted", func() bool { return tr.Stats().AcceptedConnections == 1 })
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(nc); err != nil {
		t.Fatalf("the idle connection: %v, want it closed by the transport", err)
	}
	testutil.Await(t, "the idle connection forgotten", func() bool { return tr.Stats().AcceptedConnections == 0 })
}

// A refused stranger learns nothing: a plain TCP client asking a
// transport that wants mutual TLS for a published partition gets no
// frame, and the real consumer can still have it.
func TestStrangerGetsNoFrame(t *testing.T) {
	auth := testAuth(t)
	tr, err := NewTransport(TransportConfig{Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	p := NewResultPartition("p", 1, Config{BufferSize: 64}, nil)
	defer p.Release()
	tr.Publish("job/1/0/0", p)
	nc, err := net.Dial("tcp", tr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, _ = nc.Write(appendRequest(appendHello(nil), 1, 0, 2, 64, "job/1/0/0"))
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, _ := io.ReadAll(nc)
	// The TLS server's answer to what is not TLS: at most an alert record.
	if len(got) > 0 && got[0] != 0x15 {
		t.Errorf("the stranger received %q, want nothing or a TLS alert", got)
	}
	if bytes.Contains(got, []byte(helloMagic)) {
		t.Errorf("the stranger received a frame: %q", got)
	}
	if st := tr.Stats(); st.ServedChannels != 0 || st.PendingRequests != 0 {
		t.Errorf("the stranger's request is held: %+v", st)
	}
}

// testAuth is a process's mutual TLS of a deployment made for the test.
func testAuth(t *testing.T) *peerauth.Authenticator {
	t.Helper()
	ca := testcerts.NewTestCA(t, "deployment CA")
	cert, key := ca.MustIssue(t, "process").Files(t)
	a, err := peerauth.New(peerauth.Config{TLS: true, CertFile: cert, KeyFile: key, TrustFile: ca.File(t)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
