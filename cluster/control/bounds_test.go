package control

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// Streams that never register are bounded: at most maxStreamsPerConn per
// connection (HTTP/2 holds the rest back), maxUnregistered in all (the
// rest are refused at once), and each ends after registerTimeout. 2 000
// attempts on 25 connections (100 streams at once without the bound) leave the server with no more session
// handlers than the bound, and the process's heap (clients included)
// grows by less than 32 MiB.
func TestUnregisteredStreamsBounded(t *testing.T) {
	s, _, _ := newServer(t, nil)
	const conns, perConn = 25, 80
	before, heapBefore := goroutinesIn("control.(*Server).session("), testutil.HeapInUse()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused, held := 0, 0
	for range conns {
		conn := rawConn(t, s.Addr())
		for range perConn {
			wg.Go(func() {
				st, err := conn.NewStream(ctx, &serviceDesc.Streams[0], sessionMethod)
				if err != nil {
					return // held back by HTTP/2 until ctx ended
				}
				// Send nothing; the server answers a refusal, or ctx ends.
				var m rawMsg
				err = st.RecvMsg(&m)
				mu.Lock()
				defer mu.Unlock()
				if status.Code(err) == codes.ResourceExhausted {
					refused++
				} else {
					held++
				}
			})
		}
	}
	var peak, heapPeak int
	testutil.Await(t, "the server to hold streams", func() bool {
		peak = goroutinesIn("control.(*Server).session(") - before
		return peak >= maxUnregistered
	})
	heapPeak = int(testutil.HeapInUse()) - int(heapBefore)
	wg.Wait()
	// A few more may be on their way out, refused.
	if peak > maxUnregistered+8 {
		t.Errorf("%d session goroutines for streams that never registered, want at most %d (and a few being refused)", peak, maxUnregistered)
	}
	if refused == 0 {
		t.Errorf("no stream was refused (%d held): the bound of %d unregistered streams is not applied", held, maxUnregistered)
	}
	if heapPeak > 32<<20 {
		t.Errorf("the heap grew by %d bytes for %d streams that never registered", heapPeak, conns*perConn)
	}
	t.Logf("%d attempts: %d session goroutines at most, %d refused, heap +%d KiB", conns*perConn, peak, refused, heapPeak>>10)
}

// The first frame of a stream, before registration, is read up to
// maxRegisterFrame only: an 8 MiB registration costs the server one
// chunk (gRPC refuses a longer message by its header), a 10 KiB one ends
// the stream, and neither is echoed in a log line.
func TestFirstFrameBounded(t *testing.T) {
	s, _, logs := newServer(t, nil)
	conn := rawConn(t, s.Addr())
	send := func(msgs ...encoded) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := conn.NewStream(ctx, &serviceDesc.Streams[0], sessionMethod)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := st.SendMsg(m); err != nil {
				break
			}
		}
		var m rawMsg
		return st.RecvMsg(&m)
	}
	huge := strings.Repeat("w", 8<<20)
	b, err := encode(&frame{Register: &register{Protocol: protocolVersion, WorkerID: huge, Slots: 1, Fingerprint: testFingerprint}})
	if err != nil {
		t.Fatal(err)
	}
	heapBefore := testutil.HeapInUse()
	// As one message: refused by gRPC from its length.
	if err := send(append(encoded{chunkLast}, b...)); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("an 8 MiB first message: %v, want ResourceExhausted", err)
	}
	// As chunks: the stream ends after the first chunk past the limit.
	if err := send(chunks(b)...); err == nil || status.Code(err) == codes.OK {
		t.Errorf("an 8 MiB registration in chunks: %v, want the stream ended", err)
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
	testutil.Await(t, "the refusals logged", func() bool { return strings.Count(logs.String(), "frame too large") >= 2 })
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
