package control

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
)

// goroutinesIn counts the goroutines whose stack has fn in it.
func goroutinesIn(fn string) int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(fn)) {
			n++
		}
	}
	return n
}

// Connections that never register are bounded: maxUnregistered session
// handlers at most (the connections past it are closed at once), each
// ending after registerTimeout. 200 connections from 4 loopback
// addresses (under maxConnsPerPeer each) leave the server with no more
// session handlers than the bound, and the process's heap (clients
// included) grows by less than 32 MiB.
func TestUnregisteredConnectionsBounded(t *testing.T) {
	s, _, _ := newServer(t, nil)
	const sources, perSource = 4, 50
	before, heapBefore := goroutinesIn("control.(*Server).session("), testutil.HeapInUse()
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused, held := 0, 0
	for i := range sources {
		from := net.IPv4(127, 0, 0, byte(1+i))
		for range perSource {
			conn := rawConn(t, s.Addr(), from)
			wg.Go(func() {
				// Send nothing: the server closes a refused connection at
				// once and holds the others until registerTimeout.
				_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
				_, err := conn.Read(make([]byte, 1))
				mu.Lock()
				defer mu.Unlock()
				if errors.Is(err, os.ErrDeadlineExceeded) {
					held++
				} else {
					refused++
				}
			})
		}
	}
	var peak, heapPeak int
	testutil.Await(t, "the server to hold connections", func() bool {
		peak = goroutinesIn("control.(*Server).session(") - before
		return peak >= maxUnregistered
	})
	heapPeak = int(testutil.HeapInUse()) - int(heapBefore)
	wg.Wait()
	// A few more may be on their way out, refused.
	if peak > maxUnregistered+8 {
		t.Errorf("%d session goroutines for connections that never registered, want at most %d (and a few being refused)", peak, maxUnregistered)
	}
	if refused == 0 {
		t.Errorf("no connection was refused (%d held): the bound of %d unregistered connections is not applied", held, maxUnregistered)
	}
	if heapPeak > 32<<20 {
		t.Errorf("the heap grew by %d bytes for %d connections that never registered", heapPeak, sources*perSource)
	}
	t.Logf("%d connections: %d session goroutines at most, %d refused, heap +%d KiB", sources*perSource, peak, refused, heapPeak>>10)
}

// The first frame of a connection, before registration, is read up to
// maxRegisterFrame only: an 8 MiB registration costs the server one
// chunk (a longer message is refused by its length, unread), a 10 KiB
// one ends the connection, and neither is echoed in a log line.
func TestFirstFrameBounded(t *testing.T) {
	s, _, logs := newServer(t, nil)
	// send writes msgs on a new connection and reads: the error that ends
	// the connection, nil when the server answered.
	send := func(msgs ...encoded) error {
		conn := rawConn(t, s.Addr(), nil)
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		st := newConnStream(conn, maxFrame, 10*time.Second)
		for _, m := range msgs {
			if err := st.SendMsg(m); err != nil {
				break
			}
		}
		var m rawMsg
		return st.RecvMsg(&m)
	}
	closed := func(err error) bool {
		return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
	}
	huge := strings.Repeat("w", 8<<20)
	b, err := encode(&frame{Register: &register{Protocol: protocolVersion, WorkerID: huge, Slots: 1, Fingerprint: testFingerprint}})
	if err != nil {
		t.Fatal(err)
	}
	heapBefore := testutil.HeapInUse()
	// As one message: refused from its length.
	if err := send(append(encoded{chunkLast}, b...)); !closed(err) {
		t.Errorf("an 8 MiB first message: %v, want the connection closed", err)
	}
	// As chunks: the connection ends after the first chunk past the limit.
	if err := send(chunks(b)...); !closed(err) {
		t.Errorf("an 8 MiB registration in chunks: %v, want the connection closed", err)
	}
	b = nil
	// 10 KiB: within a chunk, past the registration's limit.
	small, err := encode(&frame{Register: &register{Protocol: protocolVersion, WorkerID: "w1", Host: strings.Repeat("h", 10<<10), Slots: 1, Fingerprint: testFingerprint}})
	if err != nil {
		t.Fatal(err)
	}
	if err := send(chunks(small)...); err == nil {
		t.Error("a 10 KiB registration was answered")
	}
	if grown := int(testutil.HeapInUse()) - int(heapBefore); grown > 16<<20 {
		t.Errorf("the server's heap grew by %d bytes", grown)
	}
	testutil.Await(t, "the refusals logged", func() bool {
		return strings.Count(logs.String(), "frame too large") >= 2 && strings.Contains(logs.String(), "past the size limit")
	})
	for _, line := range strings.Split(logs.String(), "\n") {
		if len(line) > 2048 {
			t.Errorf("a log line of %d bytes: %.200s...", len(line), line)
		}
	}
	if w := s.Workers(); len(w) != 0 {
		t.Errorf("Workers() = %+v", w)
	}
}

// Identifiers of a registration are bounded and must be printable; the
// refusal says which and how long, never the value.
func TestIdentifiersBounded(t *testing.T) {
	s, _, logs := newServer(t, nil)
	long := strings.Repeat("x", maxIDLen+1)
	for field, mod := range map[string]func(*ClientConfig){
		"worker id":    func(c *ClientConfig) { c.WorkerID = long },
		"host":         func(c *ClientConfig) { c.Host = long },
		"data address": func(c *ClientConfig) { c.DataAddr = long },
		"instance":     func(c *ClientConfig) { c.Instance = long },
	} {
		_, _, _, err := tryDial(t, s.Addr(), "w1", mod)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "a "+field+" of 257 bytes") {
			t.Errorf("%s of %d bytes: %v, want refused naming it", field, len(long), err)
		}
	}
	if _, _, _, err := tryDial(t, s.Addr(), "w1\x1b[31m", nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not printable") {
		t.Errorf("a worker id with an escape sequence: %v, want refused", err)
	}
	if strings.Contains(logs.String(), long) {
		t.Error("the log repeats a refused identifier")
	}
}

// A worker of an earlier version, whose control plane was gRPC, is
// closed after the four bytes of its HTTP/2 preface, and the log says
// which versions met.
func TestEarlierGRPCWorkerRefused(t *testing.T) {
	s, _, logs := newServer(t, nil)
	conn := rawConn(t, s.Addr(), nil)
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the server answered an HTTP/2 preface")
	}
	testutil.Await(t, "the refusal logged", func() bool { return strings.Contains(logs.String(), "an HTTP/2 (gRPC) peer") })
}
