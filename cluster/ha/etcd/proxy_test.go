package etcd

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// freezeProxy is a TCP proxy to etcd that can freeze: while frozen it
// holds every byte in both directions, connections open, as if the
// process behind it were paused (stopped by the scheduler, a long GC, a
// SIGSTOP) or partitioned away; thawed, it delivers what it held and goes
// on.
type freezeProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// newFreezeProxy proxies to the etcd endpoint (http://host:port), closed
// when the test ends.
func newFreezeProxy(t *testing.T, endpoint string) *freezeProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("endpoint %q: %v", endpoint, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &freezeProxy{ln: ln, target: u.Host}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *freezeProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func (p *freezeProxy) thaw() {
	p.mu.Lock()
	p.frozen = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *freezeProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *freezeProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(out, in) })
		p.wg.Go(func() { p.pipe(in, out) })
	}
}

// pipe copies src to dst, holding what it read while the proxy is
// frozen.
func (p *freezeProxy) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen && !p.closed {
				p.cond.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
