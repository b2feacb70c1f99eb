package control

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/runtime"
)

// selfSigned makes a certificate for 127.0.0.1 and localhost, and a pool
// that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice coordinator"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	s, coord, _ := newServer(t, func(c *ServerConfig) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	})
	c, worker, _ := dial(t, s, "w1", func(c *ClientConfig) { c.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13} })
	coord.await(t, "the registration", 1)
	deploy(t, s, "w1", 1, 0)
	worker.await(t, "the deployment", 1)
	if err := s.TaskGateway(nil).AllowFinish(ref(1, 0)); err != nil {
		t.Fatal(err)
	}
	if got := worker.await(t, "allow-finish", 2); got[1] != ref(1, 0) {
		t.Errorf("worker got %#v, want allow-finish of task 0", got[1])
	}
	if err := c.CoordinatorGateway().Report(runtime.TaskEvent{From: ref(1, 0), Kind: runtime.ReportFinished}); err != nil {
		t.Fatal(err)
	}
	if ev := coord.await(t, "the report", 2); ev[1] != (runtime.TaskEvent{From: ref(1, 0), Kind: runtime.ReportFinished}) {
		t.Errorf("coordinator got %#v, want finished of task 0", ev[1])
	}

	// Without TLS, or without trusting the certificate, no session.
	if _, _, _, err := tryDial(t, s.Addr(), "w2", nil); !errors.Is(err, ErrDisconnected) {
		t.Errorf("plaintext Dial of a TLS coordinator: %v, want ErrDisconnected", err)
	}
	if _, _, _, err := tryDial(t, s.Addr(), "w3", func(c *ClientConfig) { c.TLS = &tls.Config{MinVersion: tls.VersionTLS13} }); !errors.Is(err, ErrDisconnected) {
		t.Errorf("Dial that does not trust the certificate: %v, want ErrDisconnected", err)
	}
	if w := s.Workers(); len(w) != 1 {
		t.Errorf("Workers() = %+v, want w1 only", w)
	}
}
