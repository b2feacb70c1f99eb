// Package testcerts makes X.509 certificates at test time: a certificate
// authority of its own per test, leaf certificates it issues (for a
// server, a client, or both), and self-signed ones, as tls.Certificates,
// PEM bytes or files. It is the one certificate helper of the module's
// tests and demos; nothing in production code imports it. Keys are ECDSA
// P-256, certificates valid from an hour ago for a day.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// DefaultHosts are the names a leaf is issued for when none is given.
var DefaultHosts = []string{"localhost", "127.0.0.1", "::1"}

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM encoded (what a trust store file holds).
	PEM []byte
}

// Leaf is a certificate a CA issued (or a self-signed one) and its key.
type Leaf struct {
	// TLS is the certificate and key as crypto/tls takes them.
	TLS tls.Certificate
	// CertPEM and KeyPEM are the certificate and its PKCS #8 key, PEM
	// encoded.
	CertPEM, KeyPEM []byte
	// Issuer is the certificate that signed it (itself when self-signed).
	Issuer *x509.Certificate
}

// nextSerial is a random serial number, as RFC 5280 recommends.
func nextSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// NewCA makes a certificate authority named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testcerts: CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue makes a certificate named cn for hosts (DNS names or IP
// addresses; DefaultHosts when none), good for a server and a client.
func (ca *CA) Issue(cn string, hosts ...string) (*Leaf, error) {
	return issue(cn, hosts, ca.Cert, ca.Key)
}

// Pool is a certificate pool that trusts the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// SelfSignedLeaf makes a self-signed certificate named cn for hosts
// (DefaultHosts when none): it is its own issuer (Pool trusts it).
func SelfSignedLeaf(cn string, hosts ...string) (*Leaf, error) {
	return issue(cn, hosts, nil, nil)
}

func issue(cn string, hosts []string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*Leaf, error) {
	if len(hosts) == 0 {
		hosts = DefaultHosts
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if parent == nil { // self-signed: its own CA
		tmpl.IsCA = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("testcerts: certificate %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	issuer := parent
	if parent == tmpl {
		issuer = cert
	}
	return &Leaf{
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		Issuer:  issuer,
	}, nil
}

// Pool is a certificate pool that trusts the leaf's issuer.
func (l *Leaf) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(l.Issuer)
	return p
}

// WriteFiles writes the leaf's certificate and key into dir as
// <name>.crt and <name>.key (the key readable by the owner only).
func (l *Leaf) WriteFiles(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, l.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, l.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// WriteFile writes the CA certificate into dir as <name>.crt.
func (ca *CA) WriteFile(dir, name string) (string, error) {
	f := filepath.Join(dir, name+".crt")
	return f, os.WriteFile(f, ca.PEM, 0o644)
}

// Test helpers: the same, failing the test on an error, files in the
// test's temporary directory.

// NewTestCA is NewCA for a test.
func NewTestCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// MustIssue is Issue for a test.
func (ca *CA) MustIssue(t testing.TB, cn string, hosts ...string) *Leaf {
	t.Helper()
	l, err := ca.Issue(cn, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// File writes the CA certificate into the test's temporary directory
// and returns its path.
func (ca *CA) File(t testing.TB) string {
	t.Helper()
	f, err := ca.WriteFile(t.TempDir(), "ca")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Files writes the leaf into the test's temporary directory and returns
// the certificate's and the key's paths.
func (l *Leaf) Files(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	c, k, err := l.WriteFiles(t.TempDir(), "tls")
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// SelfSigned is SelfSignedLeaf for a test.
func SelfSigned(t testing.TB, cn string, hosts ...string) *Leaf {
	t.Helper()
	l, err := SelfSignedLeaf(cn, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
