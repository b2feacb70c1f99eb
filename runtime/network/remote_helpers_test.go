package network_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime/network"
)

// newTransport returns a transport on a free loopback port, closed when
// the test ends.
func newTransport(t testing.TB, cfg network.TransportConfig) *network.Transport {
	t.Helper()
	tr, err := network.NewTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	return tr
}

var partitionSeq atomic.Int64

// newPartitionID returns an id no other test uses.
func newPartitionID(t testing.TB) network.PartitionID {
	return network.PartitionID(fmt.Sprintf("%s/%d", t.Name(), partitionSeq.Add(1)))
}

// wiring connects subpartition sub of p to channel ch of g: in process, or
// through transports.
type wiring func(t testing.TB, p *network.ResultPartition, sub int, g *network.InputGate, ch int)

func inProcess(_ testing.TB, p *network.ResultPartition, sub int, g *network.InputGate, ch int) {
	network.Connect(p, sub, g, ch)
}

// overTCP returns a wiring that publishes each partition on prod (once)
// and connects the channel from cons, dialling addr (prod's address when
// empty).
func overTCP(prod, cons *network.Transport, addr string) wiring {
	if addr == "" {
		addr = prod.Addr()
	}
	var mu sync.Mutex
	ids := map[*network.ResultPartition]network.PartitionID{}
	return func(t testing.TB, p *network.ResultPartition, sub int, g *network.InputGate, ch int) {
		t.Helper()
		mu.Lock()
		id, ok := ids[p]
		if !ok {
			id = newPartitionID(t)
			ids[p] = id
			prod.Publish(id, p)
		}
		mu.Unlock()
		if err := cons.ConnectRemote(g, ch, addr, id, sub); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitGateErr waits, on the gate's wake channel, until it reports an
// error, and returns it.
func awaitGateErr(t *testing.T, g *network.InputGate, wake chan struct{}) error {
	t.Helper()
	ctx := testutil.Context(t, 0)
	for {
		if err := g.Err(); err != nil {
			return err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("gate %s: no error reported: %v", g.Name(), ctx.Err())
		}
	}
}

// proxy is a TCP proxy in front of a transport, whose connections a test
// can cut, as a broken network would.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &proxy{ln: ln, target: target}
	px.wg.Add(1)
	go px.accept()
	t.Cleanup(px.close)
	return px
}

func (px *proxy) addr() string { return px.ln.Addr().String() }

func (px *proxy) accept() {
	defer px.wg.Done()
	for {
		in, err := px.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", px.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		px.mu.Lock()
		if px.closed {
			px.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			return
		}
		px.conns = append(px.conns, in, out)
		px.wg.Add(2)
		px.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer px.wg.Done()
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(out, in)
		go pipe(in, out)
	}
}

// cut closes every proxied connection (both sides see the connection
// break); new ones are still accepted.
func (px *proxy) cut() {
	px.mu.Lock()
	conns := px.conns
	px.conns = nil
	px.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func (px *proxy) close() {
	px.mu.Lock()
	px.closed = true
	px.mu.Unlock()
	_ = px.ln.Close()
	px.cut()
	px.wg.Wait()
}

// produce writes records of size bytes to every subpartition of p, n per
// subpartition, then finishes p; the result goes to the returned channel.
func produce(ctx context.Context, p *network.ResultPartition, n, size int) <-chan error {
	done := make(chan error, 1)
	go func() {
		rec := make([]byte, size)
		for i := range n {
			for sub := range p.NumSubpartitions() {
				rec[0], rec[1] = byte(i), byte(sub)
				if err := p.WriteRecord(ctx, sub, rec); err != nil {
					done <- err
					return
				}
			}
		}
		done <- p.Finish()
	}()
	return done
}

// isOneOf reports whether err wraps target.
func isOneOf(err error, targets ...error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
