// Package peerauth owns how the processes of one deployment prove to each
// other that they belong to it, on the control plane (cluster/control)
// and the data plane (runtime/network), both TCP: mutual TLS from PEM
// files (Flink's security.ssl.internal.*), a shared secret proved by
// challenge-response, or both; and the rule that a process listening
// beyond the loopback interface uses one of them unless it is configured
// insecure on purpose.
//
// Every authenticated connection is TLS 1.3. With certificates, each side
// presents its certificate and verifies the other's chain against the
// deployment's CA (the truststore); host names are not checked: the
// deployment's own CA is what admits a process, as in Flink's internal
// SSL. With a shared secret, the connection is encrypted with a
// certificate made at start and not verified; then both sides prove they
// hold the secret: each sends a fresh 32-byte nonce, the client sends
// HMAC-SHA256(secret, "client" | TLS exporter | nonces), and only if it is
// right does the server answer with its own proof (label "server"). The
// secret never crosses the wire, a proof is good for one connection only
// (the TLS exporter binds it to the connection's keys, so a relay in the
// middle cannot reuse it), and a peer that fails learns nothing but the
// server's nonce: the connection is closed. With both, the certificates
// are verified and the secret proved.
//
// A connection's Identity is what the peer proved: its certificate's
// fingerprint (and subject, for logs), or the secret alone.
package peerauth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultHandshakeTimeout bounds a connection's authentication (Flink's
// security.ssl.internal.handshake-timeout, 10 s).
const DefaultHandshakeTimeout = 10 * time.Second

// MinSecretLen is the shortest shared secret accepted, in bytes.
const MinSecretLen = 16

// Configuration keys (read by the cluster's configuration, which sets
// Config). The certificate keys are Flink's security.ssl.internal.* with
// PEM files instead of Java key stores: cert and key instead of
// keystore, and truststore a PEM bundle of CA certificates.
const (
	KeyTLSEnabled       = "security.ssl.internal.enabled"
	KeyTLSCert          = "security.ssl.internal.cert"
	KeyTLSKey           = "security.ssl.internal.key"
	KeyTLSTruststore    = "security.ssl.internal.truststore"
	KeyHandshakeTimeout = "security.ssl.internal.handshake-timeout"
	KeySecret           = "security.internal.secret"
	KeySecretFile       = "security.internal.secret-file"
	KeyInsecure         = "security.internal.insecure"
)

// Errors; the errors returned wrap them.
var (
	// ErrInvalidConfig: a Config that cannot work (a file missing or
	// unreadable, a secret too short).
	ErrInvalidConfig = errors.New("invalid internal security configuration")
	// ErrUnauthenticated: the peer did not prove it belongs to the
	// deployment (no certificate, one of another CA, a wrong secret).
	ErrUnauthenticated = errors.New("peer not authenticated")
	// ErrInsecureListen: a process would listen beyond the loopback
	// interface with neither certificates nor a secret.
	ErrInsecureListen = errors.New("unauthenticated listener beyond loopback")
)

// Config says how the processes of a deployment authenticate each other.
// The zero Config is plaintext and no authentication: allowed on the
// loopback interface only, unless Insecure.
type Config struct {
	// TLS turns mutual TLS on (security.ssl.internal.enabled): CertFile
	// and KeyFile (security.ssl.internal.cert, security.ssl.internal.key)
	// are this process's certificate chain and private key, PEM; TrustFile
	// (security.ssl.internal.truststore) the PEM certificates of the CA
	// that issued every process's certificate. The files are read again
	// when they change (a rotated certificate is used from the next
	// connection on).
	TLS                          bool
	CertFile, KeyFile, TrustFile string
	// Secret, or the content of SecretFile (security.internal.secret,
	// security.internal.secret-file; a trailing newline is dropped), is the
	// deployment's shared secret, at least MinSecretLen bytes: every
	// process proves it holds it.
	Secret     []byte
	SecretFile string
	// Insecure lets a process listen beyond the loopback interface with
	// neither TLS nor a secret (security.internal.insecure): anyone who
	// reaches its ports can join the job. Logged at WARN on every start.
	Insecure bool
	// HandshakeTimeout bounds a connection's authentication
	// (security.ssl.internal.handshake-timeout), DefaultHandshakeTimeout
	// when 0.
	HandshakeTimeout time.Duration
	// Logger receives a rotated certificate that cannot be read; nothing
	// when nil.
	Logger *slog.Logger
}

// Enabled reports whether c authenticates peers (TLS or a secret).
func (c Config) Enabled() bool {
	return c.TLS || len(c.Secret) > 0 || c.SecretFile != ""
}

// Authenticator authenticates the connections of one process, both ways.
// A nil *Authenticator is plaintext: its methods return the connection
// as it is. Its methods are safe for concurrent use.
type Authenticator struct {
	cfg    Config
	secret []byte
	log    *slog.Logger

	// With TLS: the files, read again when they change.
	mu      sync.Mutex
	cert    *tls.Certificate
	roots   *x509.CertPool
	stamp   string // the files' sizes and modification times when read
	ownCert *tls.Certificate
}

// New checks cfg and reads its files: nil and no error when it
// authenticates nothing (plaintext).
func New(cfg Config) (*Authenticator, error) {
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.HandshakeTimeout < 0 {
		return nil, fmt.Errorf("%w: %s %v is negative", ErrInvalidConfig, KeyHandshakeTimeout, cfg.HandshakeTimeout)
	}
	if !cfg.Enabled() {
		if cfg.CertFile != "" || cfg.KeyFile != "" || cfg.TrustFile != "" {
			return nil, fmt.Errorf("%w: %s, %s or %s is set but %s is not true: set it to use the certificates",
				ErrInvalidConfig, KeyTLSCert, KeyTLSKey, KeyTLSTruststore, KeyTLSEnabled)
		}
		return nil, nil
	}
	a := &Authenticator{cfg: cfg, log: cfg.Logger}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case len(cfg.Secret) > 0 && cfg.SecretFile != "":
		return nil, fmt.Errorf("%w: both %s and %s are set: use one", ErrInvalidConfig, KeySecret, KeySecretFile)
	case cfg.SecretFile != "":
		b, err := os.ReadFile(cfg.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, KeySecretFile, err)
		}
		a.secret = bytes.TrimRight(b, "\r\n")
		if len(a.secret) < MinSecretLen {
			return nil, fmt.Errorf("%w: %s %s holds %d bytes, at least %d are needed", ErrInvalidConfig, KeySecretFile, cfg.SecretFile, len(a.secret), MinSecretLen)
		}
	case len(cfg.Secret) > 0:
		a.secret = bytes.Clone(cfg.Secret)
		if len(a.secret) < MinSecretLen {
			return nil, fmt.Errorf("%w: %s is %d bytes, at least %d are needed", ErrInvalidConfig, KeySecret, len(a.secret), MinSecretLen)
		}
	}
	if cfg.TLS {
		for _, f := range []struct{ key, file string }{{KeyTLSCert, cfg.CertFile}, {KeyTLSKey, cfg.KeyFile}, {KeyTLSTruststore, cfg.TrustFile}} {
			if f.file == "" {
				return nil, fmt.Errorf("%w: %s is true but %s is not set", ErrInvalidConfig, KeyTLSEnabled, f.key)
			}
		}
		if _, _, err := a.load(); err != nil {
			return nil, err
		}
	} else {
		own, err := ephemeralCert()
		if err != nil {
			return nil, fmt.Errorf("peerauth: %w", err)
		}
		a.ownCert = own
	}
	return a, nil
}

// Mode says how peers are authenticated: "mutual TLS", "shared secret",
// "mutual TLS and shared secret", or "none".
func (a *Authenticator) Mode() string {
	switch {
	case a == nil:
		return "none"
	case a.cfg.TLS && a.secret != nil:
		return "mutual TLS and shared secret"
	case a.cfg.TLS:
		return "mutual TLS"
	}
	return "shared secret"
}

// Identity is what a peer proved.
type Identity struct {
	// Principal names who proved it: "cert:<subject>" with TLS (the
	// subject the deployment's CA vouched for, the same across a
	// certificate's renewals), "secret" with a secret only, ""
	// unauthenticated.
	Principal string
	// Fingerprint is the SHA-256 of the peer's certificate, hex ("" without
	// TLS), for logs.
	Fingerprint string
}

func (id Identity) String() string {
	if id.Principal == "" {
		return "unauthenticated"
	}
	return id.Principal
}

// fileStamp describes the TLS files as they are now.
func (a *Authenticator) fileStamp() (string, error) {
	var b strings.Builder
	for _, f := range []string{a.cfg.CertFile, a.cfg.KeyFile, a.cfg.TrustFile} {
		st, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%d/%d;", st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

// load returns the certificate and the roots, read again when the files
// changed. A rotation caught half written keeps the last good files.
func (a *Authenticator) load() (*tls.Certificate, *x509.CertPool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	stamp, err := a.fileStamp()
	if err == nil && stamp == a.stamp {
		return a.cert, a.roots, nil
	}
	cert, roots, rerr := a.read()
	if rerr == nil {
		a.cert, a.roots, a.stamp = cert, roots, stamp
		return cert, roots, nil
	}
	if a.cert != nil {
		a.log.Warn("peerauth: cannot read the changed certificate files; using the ones read before", "err", rerr)
		return a.cert, a.roots, nil
	}
	return nil, nil, rerr
}

func (a *Authenticator) read() (*tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(a.cfg.CertFile, a.cfg.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s %s and %s %s: %w", ErrInvalidConfig, KeyTLSCert, a.cfg.CertFile, KeyTLSKey, a.cfg.KeyFile, err)
	}
	pemCA, err := os.ReadFile(a.cfg.TrustFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, KeyTLSTruststore, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemCA) {
		return nil, nil, fmt.Errorf("%w: %s %s holds no PEM certificate", ErrInvalidConfig, KeyTLSTruststore, a.cfg.TrustFile)
	}
	return &cert, roots, nil
}

// ephemeralCert is the certificate a process encrypts with when only a
// secret authenticates: made at start, never verified.
func ephemeralCert() (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sluice"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(100 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// verify checks a peer's chain against the roots: a certificate of the
// deployment's CA, for either use, whatever its host names.
func (a *Authenticator) verify(rawCerts [][]byte) error {
	if len(rawCerts) == 0 {
		return fmt.Errorf("%w: no certificate", ErrUnauthenticated)
	}
	_, roots, err := a.load()
	if err != nil {
		return err
	}
	certs := make([]*x509.Certificate, len(rawCerts))
	for i, raw := range rawCerts {
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			return fmt.Errorf("%w: certificate %d: %w", ErrUnauthenticated, i, err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	return nil
}

func (a *Authenticator) tlsConfig(server bool) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS13}
	switch {
	case a.cfg.TLS && server:
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			cert, _, err := a.load()
			return cert, err
		}
		c.ClientAuth = tls.RequireAnyClientCert
		c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error { return a.verify(raw) }
	case a.cfg.TLS:
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _, err := a.load()
			return cert, err
		}
		// The chain is verified against the deployment's CA below; host
		// names are not (peers are dialled by IP, pod name, Service...).
		c.InsecureSkipVerify = true
		c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error { return a.verify(raw) }
	case server:
		c.Certificates = []tls.Certificate{*a.ownCert}
	default:
		c.InsecureSkipVerify = true // the secret authenticates, bound to this connection
	}
	return c
}

// Server authenticates a connection this process accepted, within the
// handshake timeout and ctx; the connection to use is returned. On an
// error nc is closed, and the peer got nothing but the TLS handshake (and
// with a secret, the server's nonce).
func (a *Authenticator) Server(ctx context.Context, nc net.Conn) (net.Conn, Identity, error) {
	if a == nil {
		return nc, Identity{}, nil
	}
	return a.handshake(ctx, nc, true)
}

// Client authenticates a connection this process dialled (and the peer
// it reached) the same way.
func (a *Authenticator) Client(ctx context.Context, nc net.Conn) (net.Conn, Identity, error) {
	if a == nil {
		return nc, Identity{}, nil
	}
	return a.handshake(ctx, nc, false)
}

func (a *Authenticator) handshake(ctx context.Context, nc net.Conn, server bool) (net.Conn, Identity, error) {
	deadline := time.Now().Add(a.cfg.HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var tc *tls.Conn
	if server {
		tc = tls.Server(nc, a.tlsConfig(true))
	} else {
		tc = tls.Client(nc, a.tlsConfig(false))
	}
	fail := func(err error) (net.Conn, Identity, error) {
		_ = nc.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return nil, Identity{}, err
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		if errors.Is(err, ErrUnauthenticated) {
			return fail(fmt.Errorf("peerauth: TLS handshake with %s: %w", nc.RemoteAddr(), err))
		}
		return fail(fmt.Errorf("peerauth: %w: TLS handshake with %s: %w", ErrUnauthenticated, nc.RemoteAddr(), err))
	}
	id := Identity{}
	if st := tc.ConnectionState(); a.cfg.TLS && len(st.PeerCertificates) > 0 {
		leaf := st.PeerCertificates[0]
		sum := sha256.Sum256(leaf.Raw)
		id = Identity{Principal: "cert:" + leaf.Subject.String(), Fingerprint: hex.EncodeToString(sum[:])}
	}
	if a.secret != nil {
		if err := a.prove(tc, server); err != nil {
			return fail(fmt.Errorf("peerauth: shared secret with %s: %w", nc.RemoteAddr(), err))
		}
		if id.Principal == "" {
			id.Principal = "secret"
		}
	}
	_ = nc.SetDeadline(time.Time{})
	return tc, id, nil
}

// The challenge-response of the shared secret, over the TLS connection.
const (
	authMagic    = "SLUICE-AUTH1"
	nonceLen     = 32
	proofLen     = sha256.Size
	exporterName = "EXPORTER-sluice-peer-auth"
)

func (a *Authenticator) proof(label string, ekm, clientNonce, serverNonce []byte) []byte {
	m := hmac.New(sha256.New, a.secret)
	m.Write([]byte(authMagic))
	m.Write([]byte(label))
	m.Write(ekm)
	m.Write(clientNonce)
	m.Write(serverNonce)
	return m.Sum(nil)
}

func (a *Authenticator) prove(tc *tls.Conn, server bool) error {
	st := tc.ConnectionState()
	ekm, err := st.ExportKeyingMaterial(exporterName, nil, 32)
	if err != nil {
		return err
	}
	mine := make([]byte, len(authMagic)+nonceLen)
	copy(mine, authMagic)
	if _, err := rand.Read(mine[len(authMagic):]); err != nil {
		return err
	}
	theirs := make([]byte, len(mine))
	if server {
		// The client's nonce first: a server answers only a client that
		// speaks the protocol.
		if _, err := io.ReadFull(tc, theirs); err != nil {
			return fmt.Errorf("%w: read the client's nonce: %w", ErrUnauthenticated, err)
		}
		if string(theirs[:len(authMagic)]) != authMagic {
			return fmt.Errorf("%w: the client does not speak the shared-secret protocol", ErrUnauthenticated)
		}
		if _, err := tc.Write(mine); err != nil {
			return err
		}
		cn, sn := theirs[len(authMagic):], mine[len(authMagic):]
		got := make([]byte, proofLen)
		if _, err := io.ReadFull(tc, got); err != nil {
			return fmt.Errorf("%w: read the client's proof: %w", ErrUnauthenticated, err)
		}
		if !hmac.Equal(got, a.proof("client", ekm, cn, sn)) {
			return fmt.Errorf("%w: wrong shared secret", ErrUnauthenticated)
		}
		_, err := tc.Write(a.proof("server", ekm, cn, sn))
		return err
	}
	if _, err := tc.Write(mine); err != nil {
		return err
	}
	if _, err := io.ReadFull(tc, theirs); err != nil {
		return fmt.Errorf("%w: read the server's nonce: %w", ErrUnauthenticated, err)
	}
	if string(theirs[:len(authMagic)]) != authMagic {
		return fmt.Errorf("%w: the server does not speak the shared-secret protocol", ErrUnauthenticated)
	}
	cn, sn := mine[len(authMagic):], theirs[len(authMagic):]
	if _, err := tc.Write(a.proof("client", ekm, cn, sn)); err != nil {
		return err
	}
	got := make([]byte, proofLen)
	if _, err := io.ReadFull(tc, got); err != nil {
		return fmt.Errorf("%w: the server refused the proof or closed the connection (a different secret?): %w", ErrUnauthenticated, err)
	}
	if !hmac.Equal(got, a.proof("server", ekm, cn, sn)) {
		return fmt.Errorf("%w: the server's proof is wrong (a different secret)", ErrUnauthenticated)
	}
	return nil
}

// IsLoopback reports whether addr (host:port, as a listener's Addr
// gives it) is on the loopback interface only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckListen is the secure default: a listener of what (e.g. "the
// control plane") bound to addr beyond the loopback interface needs an
// authenticator, or insecure; the error names the keys that fix it.
func CheckListen(what, addr string, a *Authenticator, insecure bool) error {
	if a != nil || insecure || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("%w: %s listens on %s with neither mutual TLS nor a shared secret: anyone who reaches it could join the job. "+
		"Set %s with %s, %s and %s (flags --tls-cert, --tls-key, --tls-ca), or %s (--secret-file), or listen on the loopback "+
		"interface; %s: true (--insecure) accepts it as it is",
		ErrInsecureListen, what, addr, KeyTLSEnabled, KeyTLSCert, KeyTLSKey, KeyTLSTruststore, KeySecretFile, KeyInsecure)
}

// LimitPerPeer wraps ln so that at most n connections from one remote IP
// address are open at once: a further one is closed as soon as it is
// accepted (refused, if not nil, is told its address). n < 1 is no limit.
func LimitPerPeer(ln net.Listener, n int, refused func(remote string)) net.Listener {
	if n < 1 {
		return ln
	}
	return &peerLimit{Listener: ln, n: n, refused: refused, open: map[string]int{}}
}

type peerLimit struct {
	net.Listener
	n       int
	refused func(string)

	mu   sync.Mutex
	open map[string]int
}

func (l *peerLimit) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
		if err != nil {
			host = nc.RemoteAddr().String()
		}
		l.mu.Lock()
		if l.open[host] >= l.n {
			l.mu.Unlock()
			_ = nc.Close()
			if l.refused != nil {
				l.refused(host)
			}
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &countedConn{Conn: nc, release: func() {
			l.mu.Lock()
			if l.open[host]--; l.open[host] == 0 {
				delete(l.open, host)
			}
			l.mu.Unlock()
		}}, nil
	}
}

type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
