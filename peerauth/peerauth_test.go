package peerauth

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testcerts"
)

// pki is a deployment's certificate files: a CA and a process's leaf.
type pki struct {
	ca                *testcerts.CA
	cert, key, caFile string
}

func newPKI(t *testing.T, name string) pki {
	t.Helper()
	ca := testcerts.NewTestCA(t, name+" CA")
	cert, key := ca.MustIssue(t, name).Files(t)
	return pki{ca: ca, cert: cert, key: key, caFile: ca.File(t)}
}

func (p pki) config() Config {
	return Config{TLS: true, CertFile: p.cert, KeyFile: p.key, TrustFile: p.caFile, HandshakeTimeout: 5 * time.Second}
}

func mustNew(t *testing.T, c Config) *Authenticator {
	t.Helper()
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// result is one side's outcome of a handshake.
type result struct {
	conn net.Conn
	id   Identity
	err  error
}

// pair connects a client and a server over loopback TCP and runs both
// handshakes; after them the client writes "hello" and the server
// echoes what it reads (so a refused side's errors surface).
func pair(t *testing.T, server, client *Authenticator) (srv, cli result) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan result, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		c, id, err := server.Server(context.Background(), nc)
		done <- result{c, id, err}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, id, err := client.Client(context.Background(), nc)
	cli = result{c, id, err}
	srv = <-done
	t.Cleanup(func() {
		for _, r := range []result{srv, cli} {
			if r.conn != nil {
				_ = r.conn.Close()
			}
		}
	})
	return srv, cli
}

// exchange has the client write a line the server reads back: the
// client's error when the server refused it after the handshake (TLS
// 1.3 sends a refused client certificate's alert after the client is
// done).
func exchange(srv, cli result) error {
	if cli.err != nil {
		return cli.err
	}
	if _, err := cli.conn.Write([]byte("hello")); err != nil {
		return err
	}
	if srv.err == nil {
		go func() {
			b := make([]byte, 5)
			if _, err := io.ReadFull(srv.conn, b); err == nil {
				_, _ = srv.conn.Write(b)
			}
		}()
	}
	_ = cli.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 5)
	_, err := io.ReadFull(cli.conn, b)
	return err
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t, "deployment")
	other := p.ca.MustIssue(t, "worker-2")
	cert2, key2 := other.Files(t)
	srv, cli := pair(t, mustNew(t, p.config()), mustNew(t, Config{TLS: true, CertFile: cert2, KeyFile: key2, TrustFile: p.caFile}))
	if srv.err != nil || cli.err != nil {
		t.Fatalf("handshake: server %v, client %v", srv.err, cli.err)
	}
	if err := exchange(srv, cli); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.id.Principal, "cert:") || !strings.Contains(srv.id.Principal, "worker-2") || srv.id.Fingerprint == "" {
		t.Errorf("server saw %v, want worker-2's certificate", srv.id)
	}
	if !strings.Contains(cli.id.Principal, "deployment") {
		t.Errorf("client saw %v, want the server's certificate", cli.id)
	}
	if srv.id.Principal == cli.id.Principal {
		t.Errorf("two certificates with one principal %s", srv.id.Principal)
	}
}

// Strangers: no certificate, a certificate of another CA, plaintext; a
// server of another CA is refused by the client.
func TestMutualTLSRefusesStrangers(t *testing.T) {
	p := newPKI(t, "deployment")
	stranger := newPKI(t, "stranger")
	server := mustNew(t, p.config())
	secretOnly := mustNew(t, Config{Secret: []byte("0123456789abcdef0123")})
	for name, client := range map[string]*Authenticator{
		"no certificate (a secret only)": secretOnly,
		"a certificate of another CA":    mustNew(t, Config{TLS: true, CertFile: stranger.cert, KeyFile: stranger.key, TrustFile: p.caFile}),
	} {
		srv, cli := pair(t, server, client)
		if !errors.Is(srv.err, ErrUnauthenticated) {
			t.Errorf("%s: server: %v, want ErrUnauthenticated", name, srv.err)
		}
		if err := exchange(srv, cli); err == nil {
			t.Errorf("%s: the client exchanged data", name)
		}
	}
	// The client refuses a server whose certificate another CA issued.
	srv, cli := pair(t, mustNew(t, stranger.config()), mustNew(t, Config{TLS: true, CertFile: p.cert, KeyFile: p.key, TrustFile: p.caFile}))
	if !errors.Is(cli.err, ErrUnauthenticated) {
		t.Errorf("client of a stranger's server: %v, want ErrUnauthenticated", cli.err)
	}
	if srv.err == nil {
		t.Error("the stranger's server completed the handshake")
	}
}

func TestSharedSecret(t *testing.T) {
	secret := []byte("a secret of the deployment")
	srv, cli := pair(t, mustNew(t, Config{Secret: secret}), mustNew(t, Config{Secret: secret}))
	if srv.err != nil || cli.err != nil {
		t.Fatalf("handshake: server %v, client %v", srv.err, cli.err)
	}
	if err := exchange(srv, cli); err != nil {
		t.Fatal(err)
	}
	if srv.id.Principal != "secret" || cli.id.Principal != "secret" {
		t.Errorf("identities %v and %v, want secret", srv.id, cli.id)
	}

	// A wrong secret: both sides refuse.
	srv, cli = pair(t, mustNew(t, Config{Secret: secret}), mustNew(t, Config{Secret: []byte("another secret, same length!")}))
	if !errors.Is(srv.err, ErrUnauthenticated) || !errors.Is(cli.err, ErrUnauthenticated) {
		t.Errorf("wrong secret: server %v, client %v; want ErrUnauthenticated on both", srv.err, cli.err)
	}
}

// A client with a wrong secret learns the server's nonce and nothing
// else: after its proof the connection is closed, no byte follows.
func TestWrongSecretLearnsNothing(t *testing.T) {
	server := mustNew(t, Config{Secret: []byte("a secret of the deployment")})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			if c, _, err := server.Server(context.Background(), nc); err == nil {
				_, _ = c.Write([]byte("job id, epoch, fingerprint"))
			}
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A TLS client that speaks the protocol but proves nothing.
	tc := tlsClientFor(nc)
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Write(append([]byte(authMagic), make([]byte, nonceLen)...)); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Write(make([]byte, proofLen)); err != nil {
		t.Fatal(err)
	}
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(tc)
	if len(got) != len(authMagic)+nonceLen || !strings.HasPrefix(string(got), authMagic) {
		t.Fatalf("the refused client received %d bytes %q (%v), want the %d-byte nonce only", len(got), got, err, len(authMagic)+nonceLen)
	}
}

// A rotated certificate is used from the next connection on.
func TestCertificateRotation(t *testing.T) {
	p := newPKI(t, "deployment")
	server := mustNew(t, p.config())
	client := mustNew(t, p.config())
	srv, _ := pair(t, server, client)
	if srv.err != nil {
		t.Fatal(srv.err)
	}
	first := srv.id.Fingerprint
	renewed := p.ca.MustIssue(t, "deployment renewed")
	tmpCert, tmpKey, err := renewed.WriteFiles(t.TempDir(), "new")
	if err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{tmpCert: p.cert, tmpKey: p.key} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		// A later modification time, whatever the file system's clock
		// resolution.
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Minute)
		if err := os.Chtimes(to, later, later); err != nil {
			t.Fatal(err)
		}
	}
	srv, _ = pair(t, server, client)
	if srv.err != nil {
		t.Fatal(srv.err)
	}
	if srv.id.Fingerprint == first || !strings.Contains(srv.id.Principal, "renewed") {
		t.Errorf("after the rotation the server saw %v, want the renewed certificate", srv.id)
	}
}

func TestConfigErrors(t *testing.T) {
	p := newPKI(t, "deployment")
	short := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(short, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{TLS: true, CertFile: p.cert, KeyFile: p.key}, KeyTLSTruststore},
		{Config{CertFile: p.cert}, KeyTLSEnabled},
		{Config{TLS: true, CertFile: p.cert, KeyFile: p.cert, TrustFile: p.caFile}, KeyTLSKey},
		{Config{TLS: true, CertFile: p.cert, KeyFile: p.key, TrustFile: p.key}, KeyTLSTruststore},
		{Config{SecretFile: short}, KeySecretFile},
		{Config{SecretFile: filepath.Join(t.TempDir(), "absent")}, KeySecretFile},
		{Config{Secret: []byte("short")}, KeySecret},
	} {
		_, err := New(tc.cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.want)
		}
	}
	if a, err := New(Config{}); a != nil || err != nil {
		t.Errorf("New(zero) = %v, %v; want nil, nil", a, err)
	}
}

func TestCheckListen(t *testing.T) {
	a := mustNew(t, Config{Secret: []byte("0123456789abcdef")})
	for _, tc := range []struct {
		addr     string
		a        *Authenticator
		insecure bool
		ok       bool
	}{
		{"127.0.0.1:6123", nil, false, true},
		{"[::1]:6123", nil, false, true},
		{"localhost:6123", nil, false, true},
		{"[::]:6123", nil, false, false},
		{"0.0.0.0:6123", nil, false, false},
		{"10.0.0.1:6123", nil, false, false},
		{"10.0.0.1:6123", nil, true, true},
		{"[::]:6123", a, false, true},
	} {
		err := CheckListen("the control plane", tc.addr, tc.a, tc.insecure)
		if (err == nil) != tc.ok || (err != nil && (!errors.Is(err, ErrInsecureListen) || !strings.Contains(err.Error(), KeyInsecure))) {
			t.Errorf("CheckListen(%s, auth %v, insecure %v) = %v", tc.addr, tc.a != nil, tc.insecure, err)
		}
	}
}

// tlsClientFor is a TLS client that verifies nothing, as a stranger's.
func tlsClientFor(nc net.Conn) *tls.Conn {
	return tls.Client(nc, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
}

func TestLimitPerPeer(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan string, 10)
	ln := LimitPerPeer(inner, 2, func(r string) { refused <- r })
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	first, second := <-accepted, <-accepted
	if r := <-refused; r != "127.0.0.1" {
		t.Errorf("refused %q, want 127.0.0.1", r)
	}
	// The third client's connection was closed by the server.
	_ = clients[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := clients[2].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the third connection: %v, want EOF", err)
	}
	// Closing one makes room for the next.
	_ = first.Close()
	_ = first.Close() // twice releases once
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case c := <-accepted:
		_ = c.Close()
	case r := <-refused:
		t.Fatalf("refused %s after a connection closed", r)
	}
	_ = second.Close()
}
