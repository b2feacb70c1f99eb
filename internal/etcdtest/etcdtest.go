// Package etcdtest runs a real etcd server inside the test process
// (go.etcd.io/etcd/server/v3/embed) for the tests of the packages that
// talk to etcd, cluster/ha first: one member on loopback ports of its
// own, its data in the test's temporary directory, no log output, stopped
// when the test ends. Tests only; no production code imports it.
//
// WithTLS serves the clients over TLS (https endpoints) with a
// certificate of a test CA; WithAuth turns etcd's authentication on, with
// a user that may read and write every key.
//
// Clients reach the server through a small TCP forwarder whose address,
// the endpoint, stays the same across Stop and Restart. Stop cuts every
// client connection at once, as etcd dying or a network partition would
// (and so etcd's graceful shutdown has no stream to wait for); while the
// server is stopped, connections are accepted and closed at once.
package etcdtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/sluicehq/sluice/internal/testcerts"
)

// Option configures a server.
type Option func(*Server)

// WithTLS serves the clients over TLS with a certificate ca issues for
// 127.0.0.1: the endpoints are https, clients trust ca (CAFile).
func WithTLS(ca *testcerts.CA) Option { return func(s *Server) { s.ca = ca } }

// WithAuth turns etcd's authentication on: user, with password, may read
// and write every key under "/" (and a root user exists, as etcd needs).
func WithAuth(user, password string) Option {
	return func(s *Server) { s.user, s.password = user, password }
}

// readyBound bounds the wait for the server to serve: a healthy start
// takes a fraction of a second; past the bound the test fails instead of
// hanging.
const readyBound = 60 * time.Second

// Start starts an etcd server for the test and returns its client
// endpoints. The server is stopped when the test ends.
func Start(t testing.TB, opts ...Option) (endpoints []string) {
	t.Helper()
	return StartServer(t, opts...).Endpoints()
}

// Server is an embedded etcd server that a test can stop and restart, to
// lose etcd and get it back with its data. Its methods are safe for
// concurrent use.
type Server struct {
	t   testing.TB
	dir string
	ln  net.Listener // the endpoint, for the server's lifetime

	// TLS and authentication (WithTLS, WithAuth).
	ca                     *testcerts.CA
	caFile, cert, key      string
	user, password, rootPW string

	mu     sync.Mutex // held by Stop and Restart while they work
	e      *embed.Etcd
	peer   url.URL
	fwd    sync.Mutex // guards target, conns, closed
	target string     // etcd's client address; "" while stopped
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartServer starts an etcd server for the test, stopped when the test
// ends.
func StartServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: listen: %v", err)
	}
	s := &Server{
		t:     t,
		dir:   t.TempDir(),
		ln:    ln,
		peer:  url.URL{Scheme: "http", Host: "127.0.0.1:0"},
		conns: map[net.Conn]struct{}{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.ca != nil {
		leaf, err := s.ca.Issue("etcd", "127.0.0.1", "localhost")
		if err != nil {
			t.Fatal(err)
		}
		if s.cert, s.key, err = leaf.WriteFiles(s.dir, "etcd-server"); err != nil {
			t.Fatal(err)
		}
		if s.caFile, err = s.ca.WriteFile(s.dir, "etcd-ca"); err != nil {
			t.Fatal(err)
		}
	}
	s.wg.Go(s.accept)
	t.Cleanup(s.close)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.start(); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	if s.user != "" {
		if err := s.enableAuth(); err != nil {
			t.Fatalf("etcdtest: enable authentication: %v", err)
		}
	}
	return s
}

// Endpoints are the server's client URLs, the same across restarts.
func (s *Server) Endpoints() []string {
	if s.ca != nil {
		return []string{"https://" + s.ln.Addr().String()}
	}
	return []string{"http://" + s.ln.Addr().String()}
}

// CAFile is the PEM file of the CA of the server's certificate
// (WithTLS), "" without TLS.
func (s *Server) CAFile() string { return s.caFile }

// ClientTLS is what a client dials the server with (WithTLS), nil
// without TLS.
func (s *Server) ClientTLS() *tls.Config {
	if s.ca == nil {
		return nil
	}
	return &tls.Config{RootCAs: s.ca.Pool(), MinVersion: tls.VersionTLS12}
}

// enableAuth makes the root user and the test's user, with a role that
// reads and writes every key under "/", and turns authentication on.
func (s *Server) enableAuth() error {
	c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), TLS: s.ClientTLS(), DialTimeout: readyBound, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readyBound)
	defer cancel()
	s.rootPW = "root-" + s.password
	ignoreExists := func(err error) error {
		if errors.Is(err, rpctypes.ErrRoleAlreadyExist) || errors.Is(err, rpctypes.ErrGRPCRoleAlreadyExist) {
			return nil
		}
		return err
	}
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", s.rootPW); return err },
		func() error { _, err := c.RoleAdd(ctx, "root"); return ignoreExists(err) },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.UserAdd(ctx, s.user, s.password); return err },
		func() error { _, err := c.RoleAdd(ctx, "readwrite"); return ignoreExists(err) },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "readwrite", "/", clientv3.GetPrefixRangeEnd("/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := c.UserGrantRole(ctx, s.user, "readwrite"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// Stop cuts the clients' connections and stops the server, keeping its
// data. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop()
}

// Restart stops the server if it runs and starts it again on the same
// data directory, waiting until it serves.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("etcdtest: restart: %v", err)
	}
}

func (s *Server) close() {
	s.Stop()
	_ = s.ln.Close()
	s.fwd.Lock()
	s.closed = true
	s.fwd.Unlock()
	s.wg.Wait()
}

// stop runs with s.mu held.
func (s *Server) stop() {
	if s.e == nil {
		return
	}
	s.fwd.Lock()
	s.target = ""
	for c := range s.conns {
		_ = c.Close()
	}
	s.fwd.Unlock()
	s.e.Close()
	<-s.e.Server.StopNotify()
	s.e = nil
}

// start runs with s.mu held.
func (s *Server) start() error {
	client := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg := embed.NewConfig()
	if s.ca != nil {
		client.Scheme = "https"
		// No TrustedCAFile: etcd would then want client certificates.
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: s.cert, KeyFile: s.key}
	}
	cfg.Name = "etcdtest"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{s.peer}
	cfg.AdvertisePeerUrls = []url.URL{s.peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// A test's data need survive a restart of the server, not of the
	// machine.
	cfg.UnsafeNoFsync = true
	// Passwords hashed at bcrypt's least cost: a login takes
	// milliseconds, not seconds, under the race detector.
	cfg.BcryptCost = 4
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd in %s: %w", s.dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd in %s failed while starting: %w", s.dir, err)
	case <-time.After(readyBound):
		e.Close()
		return fmt.Errorf("etcd in %s not ready after %v", s.dir, readyBound)
	}
	// The peer port the kernel picked is the member's from now on.
	s.peer = url.URL{Scheme: "http", Host: e.Peers[0].Addr().String()}
	s.e = e
	s.fwd.Lock()
	s.target = e.Clients[0].Addr().String()
	s.fwd.Unlock()
	return nil
}

// accept forwards each client connection to etcd, or closes it while
// etcd is stopped.
func (s *Server) accept() {
	for {
		in, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.fwd.Lock()
		target := s.target
		s.fwd.Unlock()
		if target == "" {
			_ = in.Close()
			continue
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = in.Close()
			continue
		}
		s.fwd.Lock()
		if s.closed || s.target != target {
			s.fwd.Unlock()
			_ = in.Close()
			_ = out.Close()
			continue
		}
		s.conns[in], s.conns[out] = struct{}{}, struct{}{}
		s.fwd.Unlock()
		s.wg.Go(func() { s.pipe(out, in) })
		s.wg.Go(func() { s.pipe(in, out) })
	}
}

func (s *Server) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	s.fwd.Lock()
	delete(s.conns, dst)
	delete(s.conns, src)
	s.fwd.Unlock()
}
