package control

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testcerts"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/runtime"
)

// deployment is a deployment's CA; each process gets a certificate of
// its own from it.
type deployment struct{ ca *testcerts.CA }

func newDeployment(t *testing.T) deployment {
	return deployment{ca: testcerts.NewTestCA(t, "deployment CA")}
}

// auth is the authenticator of a process with a certificate named cn.
func (d deployment) auth(t *testing.T, cn string) *peerauth.Authenticator {
	t.Helper()
	cert, key := d.ca.MustIssue(t, cn).Files(t)
	a, err := peerauth.New(peerauth.Config{TLS: true, CertFile: cert, KeyFile: key, TrustFile: d.ca.File(t)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func secretAuth(t *testing.T, secret string) *peerauth.Authenticator {
	t.Helper()
	a, err := peerauth.New(peerauth.Config{Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// recorder is a TCP relay in front of a server that keeps every byte
// the server sent to its clients.
type recorder struct {
	ln   net.Listener
	mu   sync.Mutex
	sent bytes.Buffer
	wg   sync.WaitGroup
}

func newRecorder(t *testing.T, target string) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln}
	r.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			r.wg.Go(func() { _, _ = io.Copy(out, in); _ = out.Close() })
			r.wg.Go(func() {
				_, _ = io.Copy(writerFunc(func(p []byte) (int, error) {
					r.mu.Lock()
					r.sent.Write(p)
					r.mu.Unlock()
					return in.Write(p)
				}), out)
				_ = in.Close()
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); r.wg.Wait() })
	return r
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (r *recorder) addr() string { return r.ln.Addr().String() }

func (r *recorder) received() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.sent.Bytes())
}

// mustNotLeak fails when the bytes a refused peer received name the
// coordinator's job, plan or epoch.
func mustNotLeak(t *testing.T, who string, got []byte) {
	t.Helper()
	for _, secret := range []string{testJob, testFingerprint, `"epoch":` + strconv.Itoa(testEpoch), "heartbeat"} {
		if bytes.Contains(got, []byte(secret)) {
			t.Errorf("%s received %q, which gives %q away", who, got, secret)
		}
	}
}

// With mutual TLS a worker of the deployment works as over plaintext;
// strangers are refused: no certificate, a certificate of another CA,
// and a second certificate of the deployment using a worker id that is
// bound to the first. None of them learns anything.
func TestMutualTLSRefusesStrangers(t *testing.T) {
	d := newDeployment(t)
	s, coord, _ := newServer(t, func(c *ServerConfig) { c.Auth = d.auth(t, "coordinator") })
	c, worker, _ := dial(t, s, "w1", func(c *ClientConfig) { c.Auth = d.auth(t, "w1") })
	coord.await(t, "the registration", 1)
	if w := s.Workers(); len(w) != 1 || w[0].Identity.Principal != "cert:CN=w1" {
		t.Fatalf("Workers() = %+v, want w1 with its certificate's identity", w)
	}
	deploy(t, s, "w1", 1, 0)
	worker.await(t, "the deployment", 1)

	rec := newRecorder(t, s.Addr())
	// No certificate: plaintext, and TLS without a client certificate.
	if _, _, _, err := tryDial(t, rec.addr(), "w2", nil); !errors.Is(err, ErrDisconnected) {
		t.Errorf("plaintext Dial: %v, want ErrDisconnected", err)
	}
	if _, _, _, err := tryDial(t, rec.addr(), "w2", func(c *ClientConfig) { c.Auth = secretAuth(t, "a secret that is long enough") }); !errors.Is(err, ErrDisconnected) {
		t.Errorf("Dial without a certificate: %v, want ErrDisconnected", err)
	}
	// A certificate of another CA.
	other := newDeployment(t)
	if _, _, _, err := tryDial(t, rec.addr(), "w2", func(c *ClientConfig) { c.Auth = other.auth(t, "w2") }); !errors.Is(err, ErrDisconnected) {
		t.Errorf("Dial with another CA's certificate: %v, want ErrDisconnected", err)
	}
	// None got a byte of the application: only TLS records, none naming
	// the job.
	mustNotLeak(t, "the strangers", rec.received())
	if w := s.Workers(); len(w) != 1 {
		t.Errorf("Workers() = %+v, want w1 only", w)
	}

	// A raw TLS client with a certificate of another CA: the server's
	// refusal comes as an alert, no application byte.
	stranger := other.ca.MustIssue(t, "stranger")
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	tc := tls.Client(nc, &tls.Config{Certificates: []tls.Certificate{stranger.TLS}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if err := tc.Handshake(); err == nil {
		_, _ = tc.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		_ = tc.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(tc)
		if len(got) != 0 || err == nil {
			t.Errorf("the raw stranger read %q (%v), want nothing and the refusal", got, err)
		}
	}

	// A second identity of the deployment cannot take w1's id, nor cut
	// it off.
	if _, _, _, err := tryDial(t, s.Addr(), "w1", func(c *ClientConfig) { c.Auth = d.auth(t, "w2") }); !errors.Is(err, ErrIdentityMismatch) {
		t.Errorf("Dial as w1 with w2's certificate: %v, want ErrIdentityMismatch", err)
	}
	if err := s.TaskGateway(nil).AllowFinish(ref(1, 0)); err != nil {
		t.Fatal(err)
	}
	worker.await(t, "allow-finish after the impostor", 2)
	if err := c.CoordinatorGateway().Report(runtime.TaskEvent{From: ref(1, 0), Kind: runtime.ReportFinished}); err != nil {
		t.Fatal(err)
	}
	coord.await(t, "w1's report", 2)
	if ev := coord.snapshot(); len(ev) != 2 {
		t.Errorf("coordinator events %#v, want the registration and the report only", ev)
	}
	// The worker id stays bound after w1's session ended.
	_ = c.Close()
	coord.lost(t, "w1")
	if _, _, _, err := tryDial(t, s.Addr(), "w1", func(c *ClientConfig) { c.Auth = d.auth(t, "w2") }); !errors.Is(err, ErrIdentityMismatch) {
		t.Errorf("Dial as w1 with w2's certificate after w1 left: %v, want ErrIdentityMismatch", err)
	}
	dial(t, s, "w1", func(c *ClientConfig) { c.Auth = d.auth(t, "w1") })
}

// A worker must prove the coordinator's secret; a wrong secret gets no
// session (and the coordinator is proved to the worker the same way).
func TestSharedSecretSession(t *testing.T) {
	s, coord, _ := newServer(t, func(c *ServerConfig) { c.Auth = secretAuth(t, "the deployment's secret") })
	_, worker, _ := dial(t, s, "w1", func(c *ClientConfig) { c.Auth = secretAuth(t, "the deployment's secret") })
	coord.await(t, "the registration", 1)
	deploy(t, s, "w1", 1, 0)
	worker.await(t, "the deployment", 1)

	rec := newRecorder(t, s.Addr())
	if _, _, _, err := tryDial(t, rec.addr(), "w2", func(c *ClientConfig) { c.Auth = secretAuth(t, "a wrong secret, long enough") }); !errors.Is(err, ErrDisconnected) {
		t.Errorf("Dial with a wrong secret: %v, want ErrDisconnected", err)
	}
	if _, _, _, err := tryDial(t, rec.addr(), "w2", nil); !errors.Is(err, ErrDisconnected) {
		t.Errorf("plaintext Dial: %v, want ErrDisconnected", err)
	}
	mustNotLeak(t, "the strangers", rec.received())
	if w := s.Workers(); len(w) != 1 {
		t.Errorf("Workers() = %+v, want w1 only", w)
	}
}

// Without authentication (loopback) a refused registration tells
// nothing of the coordinator either: not its job, epoch or plan.
func TestRefusalTellsNothing(t *testing.T) {
	s, _, _ := newServer(t, nil)
	rec := newRecorder(t, s.Addr())
	_, _, _, err := tryDial(t, rec.addr(), string(bytes.Repeat([]byte("w"), maxIDLen+1)), nil)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Dial with a long worker id: %v, want ErrRefused", err)
	}
	mustContain(t, "the refusal", err.Error(), "worker id of 257 bytes")
	mustNotLeak(t, "the refused worker", rec.received())
}

// A coordinator listening beyond loopback needs authentication, or
// Insecure.
func TestSecureByDefault(t *testing.T) {
	_, err := NewServer(ServerConfig{ListenAddr: ":0", Fingerprint: "f", JobID: "j"}, &coordRecorder{})
	if !errors.Is(err, peerauth.ErrInsecureListen) {
		t.Fatalf("NewServer on every interface without authentication: %v, want ErrInsecureListen", err)
	}
	s, err := NewServer(ServerConfig{ListenAddr: ":0", Fingerprint: "f", JobID: "j", Insecure: true}, &coordRecorder{})
	if err != nil {
		t.Fatalf("NewServer with Insecure: %v", err)
	}
	_ = s.Close()
}

// rawConn is a plain connection to addr, from the local address from
// (nil: any), for writing messages by hand.
func rawConn(t *testing.T, addr string, from net.IP) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	if from != nil {
		d.LocalAddr = &net.TCPAddr{IP: from}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
