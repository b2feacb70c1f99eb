package kafkaclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/sluicehq/sluice/internal/testcerts"
)

func TestParseJAAS(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     JAAS
	}{
		{"plain", `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`,
			JAAS{PlainLoginModule, "required", map[string]string{"username": "alice", "password": "alice-secret"}}},
		{"escapes", `m required password="a \"quoted\" \\ back\tslash\n\101\0";`,
			JAAS{"m", "required", map[string]string{"password": "a \"quoted\" \\ back\tslash\nA\x00"}}},
		{"other escaped characters stand for themselves", `m required p="\;\=\'\q";`,
			JAAS{"m", "required", map[string]string{"p": `;='q`}}},
		{"single quotes", `m required p='it"s';`, JAAS{"m", "required", map[string]string{"p": `it"s`}}},
		{"separators inside quotes", `m required p="a=b; c";`, JAAS{"m", "required", map[string]string{"p": "a=b; c"}}},
		{"unquoted values, spacing and case of the flag", " \n m\tOPTIONAL  username = bob tokenauth=true ; ",
			JAAS{"m", "optional", map[string]string{"username": "bob", "tokenauth": "true"}}},
		{"no options", `m sufficient;`, JAAS{"m", "sufficient", map[string]string{}}},
		{"empty value", `m required password="";`, JAAS{"m", "required", map[string]string{"password": ""}}},
		{"comments", "// a comment\nm /* inline */ requisite user=\"u\" // trailing\n;",
			JAAS{"m", "requisite", map[string]string{"user": "u"}}},
		{"multi-line as in YAML", "m required\n  username=\"u\"\n  password=\"p\";\n",
			JAAS{"m", "required", map[string]string{"username": "u", "password": "p"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseJAAS(c.in)
			if err != nil {
				t.Fatalf("ParseJAAS(%q): %v", c.in, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ParseJAAS(%q) = %#v, want %#v", c.in, got, c.want)
			}
		})
	}
}

func TestParseJAASErrors(t *testing.T) {
	const secret = "hunter2"
	for _, c := range []struct{ in, problem string }{
		{``, "empty"},
		{`  // only a comment`, "empty"},
		{`m required password="` + secret + `"`, "does not end with ';'"},
		{`m required password="` + secret + `";  n required;`, "exactly one login module"},
		{`m password="` + secret + `";`, "control flag"},
		{`m always;`, "control flag"},
		{`m required password "` + secret + `";`, "want '=' after the option name at offset 11"},
		// A typo: the password's name left out, the password alone.
		{`m required username="u" ` + secret + `;`, "want '=' after the option name at offset 24"},
		{`m required username="u" password:` + secret + `;`, "want '=' after the option name"},
		{`m required password=;`, "want the value of option \"password\""},
		{`m required password="` + secret + `;`, "quoted string not closed"},
		{`m required /* ` + secret, "comment /* not closed"},
		{`m required p="` + secret + `" p="` + secret + `";`, `option "p" given twice`},
		{`"m" required;`, "class name"},
		{`m required = x;`, "option name"},
	} {
		_, err := ParseJAAS(c.in)
		if err == nil || !strings.Contains(err.Error(), c.problem) {
			t.Errorf("ParseJAAS(%q): %v, want an error about %q", c.in, err, c.problem)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ParseJAAS(%q): the error %q shows a value", c.in, err)
		}
	}
}

// first returns the first message a mechanism sends.
func first(t *testing.T, m sasl.Mechanism) []byte {
	t.Helper()
	_, msg, err := m.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatalf("%s: Authenticate: %v", m.Name(), err)
	}
	return msg
}

func mechanismOf(t *testing.T, props map[string]string) sasl.Mechanism {
	t.Helper()
	opts, err := SecurityOptions(props)
	if err != nil {
		t.Fatalf("SecurityOptions: %v", err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ms, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	if len(ms) != 1 {
		t.Fatalf("SASL mechanisms %v, want one", ms)
	}
	return ms[0]
}

func TestSASLMechanisms(t *testing.T) {
	sasl := func(mech, jaas string) map[string]string {
		return map[string]string{PropSecurityProtocol: "SASL_PLAINTEXT", PropSASLMechanism: mech, PropSASLJAASConfig: jaas}
	}
	m := mechanismOf(t, sasl("plain", PlainLoginModule+` required username="alice" password="p\"w";`))
	if m.Name() != "PLAIN" || string(first(t, m)) != "\x00alice\x00p\"w" {
		t.Errorf("PLAIN: %s sends %q, want PLAIN sending \\x00alice\\x00p\"w", m.Name(), first(t, m))
	}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		m := mechanismOf(t, sasl(mech, ScramLoginModule+` required username="bob" password="pw";`))
		if msg := string(first(t, m)); m.Name() != mech || !strings.HasPrefix(msg, "n,,n=bob,r=") || strings.Contains(msg, "tokenauth") {
			t.Errorf("%s: %s sends %q", mech, m.Name(), msg)
		}
		m = mechanismOf(t, sasl(mech, ScramLoginModule+` required username="bob" password="pw" tokenauth="true";`))
		if msg := string(first(t, m)); !strings.Contains(msg, "tokenauth=true") {
			t.Errorf("%s with tokenauth: sends %q, want the tokenauth extension", mech, msg)
		}
	}
}

// bearer returns the token and the extensions of an OAUTHBEARER
// client-first message (RFC 7628: gs2 header, then \x01-separated
// key=value pairs).
func bearer(t *testing.T, msg []byte) (string, map[string]string) {
	t.Helper()
	parts := strings.Split(string(msg), "\x01")
	if len(parts) < 3 || parts[0] != "n,," {
		t.Fatalf("OAUTHBEARER message %q is not a client-first message", msg)
	}
	token, ext := "", map[string]string{}
	for _, p := range parts[1:] {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		if k == "auth" {
			token = strings.TrimPrefix(v, "Bearer ")
		} else {
			ext[k] = v
		}
	}
	return token, ext
}

func TestOAuthBearer(t *testing.T) {
	props := func(jaas string, extra ...string) map[string]string {
		p := map[string]string{PropSecurityProtocol: "SASL_SSL", PropSASLMechanism: "OAUTHBEARER", PropSASLJAASConfig: jaas}
		for i := 0; i+1 < len(extra); i += 2 {
			p[extra[i]] = extra[i+1]
		}
		return p
	}
	// A static token, with an extension.
	m := mechanismOf(t, props(OAuthBearerLoginModule+` required token="eyJ.static.token" extension_logicalCluster="lkc-1";`))
	if tok, ext := bearer(t, first(t, m)); m.Name() != "OAUTHBEARER" || tok != "eyJ.static.token" || ext["logicalCluster"] != "lkc-1" {
		t.Errorf("static token: %s sends token %q and extensions %v", m.Name(), tok, ext)
	}

	// A token file, read again at each authentication (a rotated token).
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("first.token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m = mechanismOf(t, props(OAuthBearerLoginModule+` required;`, PropOAuthTokenEndpoint, "file://"+path,
		PropLoginCallbackHandler, "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"))
	if tok, _ := bearer(t, first(t, m)); tok != "first.token" {
		t.Errorf("token file: sends %q, want first.token", tok)
	}
	if err := os.WriteFile(path, []byte("second.token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, _ := bearer(t, first(t, m)); tok != "second.token" {
		t.Errorf("token file after rotation: sends %q, want second.token", tok)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Authenticate(context.Background(), "b:9092"); err == nil || !strings.Contains(err.Error(), PropOAuthTokenEndpoint) {
		t.Errorf("token file gone: %v, want an error naming %s", err, PropOAuthTokenEndpoint)
	}

	// Kafka's unsecured JWT.
	m = mechanismOf(t, props(OAuthBearerLoginModule+` required unsecuredLoginStringClaim_sub="alice" unsecuredLoginLifetimeSeconds="60" unsecuredLoginExtension_traceId="123";`))
	tok, ext := bearer(t, first(t, m))
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[2] != "" || ext["traceId"] != "123" {
		t.Fatalf("unsecured token %q (extensions %v): want header.claims. and the extension", tok, ext)
	}
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Sub      string
		Iat, Exp int64
	}
	if err := json.Unmarshal(body, &claims); err != nil || string(header) != `{"alg":"none"}` || claims.Sub != "alice" || claims.Exp-claims.Iat != 60 {
		t.Errorf("unsecured token: header %s, claims %s (%v)", header, body, err)
	}
}

// pki is a CA (internal/testcerts) with the certificates it issued, as
// PEM files in a directory.
type pki struct {
	t   *testing.T
	dir string
	ca  *testcerts.CA
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	p := &pki{t: t, dir: t.TempDir(), ca: testcerts.NewTestCA(t, name)}
	p.write(name+".pem", p.ca.PEM)
	return p
}

func (p *pki) write(name string, data []byte) string {
	p.t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

func (p *pki) caFile() string { return filepath.Join(p.dir, p.ca.Cert.Subject.CommonName+".pem") }

// issue returns the PEM of a certificate for cn (and the names; a
// client's has none) and of its PKCS#8 key.
func (p *pki) issue(cn string, client bool, names ...string) (certPEM, keyPEM []byte) {
	p.t.Helper()
	if client && len(names) == 0 {
		names = []string{cn}
	}
	leaf := p.ca.MustIssue(p.t, cn, names...)
	return leaf.CertPEM, leaf.KeyPEM
}

func (p *pki) serverConfig(names ...string) *tls.Config {
	p.t.Helper()
	c, k := p.issue("broker", false, names...)
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		p.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
}

// handshake dials a TLS server with serverCfg using the client
// configuration of props, as kgo does (ServerName from the address),
// and returns the client's error and the client certificate the server
// saw.
func handshake(t *testing.T, serverCfg *tls.Config, props map[string]string) (clientCN string, err error) {
	t.Helper()
	cfg, err := TLSConfig(props)
	if err != nil {
		t.Fatalf("TLSConfig: %v", err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	seen := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			seen <- ""
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if tc.Handshake() != nil || len(tc.ConnectionState().PeerCertificates) == 0 {
			seen <- ""
			return
		}
		seen <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
		_, _ = tc.Read(make([]byte, 1)) // until the client closes
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), cfg)
	if err != nil {
		return "", err
	}
	conn.Close()
	return <-seen, nil
}

func TestTLSHandshake(t *testing.T) {
	ca := newPKI(t, "sluice-test-ca")
	other := newPKI(t, "other-ca")
	clientCert, clientKey := ca.issue("sluice-client", true)
	keystore := ca.write("client.pem", append(append([]byte{}, clientKey...), clientCert...))
	ssl := func(kv ...string) map[string]string {
		p := map[string]string{PropSecurityProtocol: "SSL"}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i]] = kv[i+1]
		}
		return p
	}
	server := ca.serverConfig("127.0.0.1", "localhost")
	wrongName := ca.serverConfig("broker.example")

	// Trusted, with a client certificate the server sees.
	cn, err := handshake(t, server, ssl(PropTrustStoreLocation, ca.caFile(), PropKeyStoreLocation, keystore, PropKeyStoreType, "PEM"))
	if err != nil || cn != "sluice-client" {
		t.Errorf("trust store and key store: %v, client %q; want a handshake presenting sluice-client", err, cn)
	}
	// The same from inline PEM.
	caPEM, _ := os.ReadFile(ca.caFile())
	cn, err = handshake(t, server, ssl(PropTrustStoreCertificates, string(caPEM), PropKeyStoreCertChain, string(clientCert), PropKeyStoreKey, string(clientKey)))
	if err != nil || cn != "sluice-client" {
		t.Errorf("inline PEM: %v, client %q", err, cn)
	}
	// Without a client certificate.
	if cn, err = handshake(t, server, ssl(PropTrustStoreLocation, ca.caFile())); err != nil || cn != "" {
		t.Errorf("trust store only: %v, client %q; want a handshake without a client certificate", err, cn)
	}
	// Not trusted: the system's roots do not know the test CA, nor does
	// another CA.
	if _, err = handshake(t, server, ssl()); err == nil {
		t.Error("no trust store: the test CA's certificate was accepted")
	}
	if _, err = handshake(t, server, ssl(PropTrustStoreLocation, other.caFile())); err == nil {
		t.Error("another CA's trust store: the broker's certificate was accepted")
	}
	// The broker's name is checked by default and with https, not with "".
	if _, err = handshake(t, wrongName, ssl(PropTrustStoreLocation, ca.caFile())); err == nil {
		t.Error("certificate for broker.example accepted at 127.0.0.1 by default")
	}
	if _, err = handshake(t, wrongName, ssl(PropTrustStoreLocation, ca.caFile(), PropEndpointIdentification, "HTTPS")); err == nil {
		t.Error("certificate for broker.example accepted at 127.0.0.1 with endpoint identification https")
	}
	if _, err = handshake(t, wrongName, ssl(PropTrustStoreLocation, ca.caFile(), PropEndpointIdentification, "")); err != nil {
		t.Errorf("endpoint identification off: %v, want the chain alone to be verified", err)
	}
	// ... but the chain still is.
	if _, err = handshake(t, wrongName, ssl(PropTrustStoreLocation, other.caFile(), PropEndpointIdentification, "")); err == nil {
		t.Error("endpoint identification off: an untrusted chain was accepted")
	}
	// TLS versions: a client limited to 1.2 against a 1.3-only server.
	only13 := server.Clone()
	only13.MinVersion = tls.VersionTLS13
	if _, err = handshake(t, only13, ssl(PropTrustStoreLocation, ca.caFile(), PropSSLEnabledProtocols, "TLSv1.2")); err == nil {
		t.Error("ssl.enabled.protocols TLSv1.2 negotiated with a TLS 1.3-only server")
	}
	if _, err = handshake(t, only13, ssl(PropTrustStoreLocation, ca.caFile(), PropSSLEnabledProtocols, "TLSv1.2, TLSv1.3")); err != nil {
		t.Errorf("ssl.enabled.protocols TLSv1.2,TLSv1.3: %v", err)
	}
}

// The encrypted keys in testdata were written by OpenSSL (see
// testdata/README), so the decryption is checked against an
// implementation other than itself.
func TestEncryptedKeys(t *testing.T) {
	cert, err := os.ReadFile("testdata/client.crt")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"client-aes256.key", "client-aes128.key", "client-des3.key"} {
		t.Run(f, func(t *testing.T) {
			key, err := os.ReadFile(filepath.Join("testdata", f))
			if err != nil {
				t.Fatal(err)
			}
			props := map[string]string{PropKeyStoreCertChain: string(cert), PropKeyStoreKey: string(key), PropKeyPassword: "s3cret pass"}
			cfg, err := TLSConfig(props)
			if err != nil {
				t.Fatalf("TLSConfig: %v", err)
			}
			if len(cfg.Certificates) != 1 || cfg.Certificates[0].Leaf.Subject.CommonName != "sluice-test-client" {
				t.Fatalf("certificates %v, want the one of testdata/client.crt", cfg.Certificates)
			}
			// The same key in a key store file, as Kafka has it.
			path := filepath.Join(t.TempDir(), "keystore.pem")
			if err := os.WriteFile(path, append(append([]byte{}, key...), cert...), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := TLSConfig(map[string]string{PropKeyStoreLocation: path, PropKeyPassword: "s3cret pass"}); err != nil {
				t.Errorf("key store file: %v", err)
			}
			props[PropKeyPassword] = "wrong"
			if _, err := TLSConfig(props); !isPropertyError(err, PropKeyPassword) || !strings.Contains(err.Error(), "wrong password") {
				t.Errorf("wrong password: %v, want an error naming %s", err, PropKeyPassword)
			}
			delete(props, PropKeyPassword)
			if _, err := TLSConfig(props); !isPropertyError(err, PropKeyPassword) || !strings.Contains(err.Error(), "encrypted") {
				t.Errorf("no password: %v, want an error naming %s", err, PropKeyPassword)
			}
		})
	}
}

func isPropertyError(err error, prop string) bool {
	var pe *PropertyError
	return errors.As(err, &pe) && pe.Property == prop && errors.Is(err, ErrInvalidConfig)
}

func TestSecurityOptionsErrors(t *testing.T) {
	ca := newPKI(t, "ca")
	cert, key := ca.issue("client", true)
	_, otherKey := ca.issue("other", true)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jks := write("store.jks", []byte{0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2})
	p12 := write("store.p12", []byte{0x30, 0x82, 0x0a, 0x00})
	mismatched := write("mismatched.pem", append(append([]byte{}, otherKey...), cert...))
	noKey := write("nokey.pem", cert)
	legacy := write("legacy.pem", append(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00"}, Bytes: []byte{1}}), cert...))
	plainJAAS := PlainLoginModule + ` required username="u" password="secret-pw";`
	sasl := func(kv ...string) map[string]string {
		p := map[string]string{PropSecurityProtocol: "SASL_PLAINTEXT", PropSASLMechanism: "PLAIN", PropSASLJAASConfig: plainJAAS}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i]] = kv[i+1]
		}
		return p
	}
	ssl := func(kv ...string) map[string]string {
		p := map[string]string{PropSecurityProtocol: "SSL"}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i]] = kv[i+1]
		}
		return p
	}
	for _, c := range []struct {
		name    string
		props   map[string]string
		prop    string // the property the error names
		problem string
	}{
		{"unknown property", map[string]string{"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name", "not a Kafka client property"},
		{"unknown protocol", map[string]string{PropSecurityProtocol: "TLS"}, PropSecurityProtocol, `"TLS"`},
		{"sasl under plaintext", map[string]string{PropSASLMechanism: "PLAIN"}, PropSASLMechanism, "does not use SASL"},
		{"ssl under sasl plaintext", sasl(PropTrustStoreLocation, "ca.pem"), PropTrustStoreLocation, "does not use TLS"},
		{"sasl under ssl", ssl(PropSASLJAASConfig, plainJAAS), PropSASLJAASConfig, "does not use SASL"},
		{"default mechanism", map[string]string{PropSecurityProtocol: "SASL_SSL", PropSASLJAASConfig: plainJAAS}, PropSASLMechanism, "GSSAPI"},
		{"gssapi", sasl(PropSASLMechanism, "GSSAPI"), PropSASLMechanism, `"GSSAPI"`},
		{"no jaas", map[string]string{PropSecurityProtocol: "SASL_PLAINTEXT", PropSASLMechanism: "PLAIN"}, PropSASLJAASConfig, "not set"},
		{"bad jaas", sasl(PropSASLJAASConfig, PlainLoginModule+` required username="u"`), PropSASLJAASConfig, "does not end with ';'"},
		{"module of another mechanism", sasl(PropSASLMechanism, "SCRAM-SHA-256"), PropSASLJAASConfig, "does not go with sasl.mechanism SCRAM-SHA-256"},
		{"no user", sasl(PropSASLJAASConfig, PlainLoginModule+` required password="secret-pw";`), PropSASLJAASConfig, "username"},
		{"no password", sasl(PropSASLJAASConfig, PlainLoginModule+` required username="u";`), PropSASLJAASConfig, "password"},
		{"unknown jaas option", sasl(PropSASLJAASConfig, PlainLoginModule+` required username="u" pasword="secret-pw";`), PropSASLJAASConfig, `option "pasword"`},
		{"bad tokenauth", sasl(PropSASLMechanism, "SCRAM-SHA-512", PropSASLJAASConfig, ScramLoginModule+` required username="u" password="secret-pw" tokenauth="yes please";`), PropSASLJAASConfig, "tokenauth"},
		{"token endpoint without oauth", sasl(PropOAuthTokenEndpoint, "file:///t"), PropOAuthTokenEndpoint, "only used with sasl.mechanism OAUTHBEARER"},
		{"oauth without a token", sasl(PropSASLMechanism, "OAUTHBEARER", PropSASLJAASConfig, OAuthBearerLoginModule+` required;`), PropSASLJAASConfig, "needs a token"},
		{"oauth client credentials", sasl(PropSASLMechanism, "OAUTHBEARER", PropSASLJAASConfig, OAuthBearerLoginModule+` required clientId="c" clientSecret="secret-pw";`), PropSASLJAASConfig, "client-credentials"},
		{"oauth http endpoint", sasl(PropSASLMechanism, "OAUTHBEARER", PropSASLJAASConfig, OAuthBearerLoginModule+` required;`, PropOAuthTokenEndpoint, "https://idp.example/token"), PropOAuthTokenEndpoint, "only a file:// URL"},
		{"oauth two sources", sasl(PropSASLMechanism, "OAUTHBEARER", PropSASLJAASConfig, OAuthBearerLoginModule+` required token="secret-pw";`, PropOAuthTokenEndpoint, "file:///t"), PropSASLJAASConfig, "one token source"},
		{"oauth foreign handler", sasl(PropSASLMechanism, "OAUTHBEARER", PropSASLJAASConfig, OAuthBearerLoginModule+` required token="secret-pw";`, PropLoginCallbackHandler, "com.example.Handler"), PropLoginCallbackHandler, "cannot run in Go"},
		{"jks trust store type", ssl(PropTrustStoreType, "JKS", PropTrustStoreLocation, jks), PropTrustStoreType, "JKS stores are not supported"},
		{"pkcs12 key store type", ssl(PropKeyStoreType, "pkcs12"), PropKeyStoreType, "PKCS12 stores are not supported"},
		{"jks trust store file", ssl(PropTrustStoreLocation, jks), PropTrustStoreLocation, "is a JKS store"},
		{"pkcs12 key store file", ssl(PropKeyStoreLocation, p12), PropKeyStoreLocation, "PKCS12"},
		{"missing trust store", ssl(PropTrustStoreLocation, filepath.Join(dir, "nope.pem")), PropTrustStoreLocation, "no such file"},
		{"trust store password", ssl(PropTrustStorePassword, "changeit"), PropTrustStorePassword, "no password"},
		{"key store password", ssl(PropKeyStorePassword, "changeit"), PropKeyStorePassword, "ssl.key.password"},
		{"trust store twice", ssl(PropTrustStoreLocation, noKey, PropTrustStoreCertificates, string(cert)), PropTrustStoreLocation, "not both"},
		{"trust store without certificates", ssl(PropTrustStoreCertificates, string(key)), PropTrustStoreCertificates, "no PEM certificate"},
		{"key store without key", ssl(PropKeyStoreLocation, noKey), PropKeyStoreLocation, "no PEM private key"},
		{"key of another certificate", ssl(PropKeyStoreLocation, mismatched), PropKeyStoreLocation, "do not go together"},
		{"legacy encrypted key", ssl(PropKeyStoreLocation, legacy), PropKeyStoreLocation, "openssl pkcs8 -topk8"},
		{"chain without key", ssl(PropKeyStoreCertChain, string(cert)), PropKeyStoreKey, "give both or neither"},
		{"location and inline key", ssl(PropKeyStoreLocation, noKey, PropKeyStoreKey, string(key), PropKeyStoreCertChain, string(cert)), PropKeyStoreLocation, "not both"},
		{"key password for a plain key", ssl(PropKeyStoreCertChain, string(cert), PropKeyStoreKey, string(key), PropKeyPassword, "secret-pw"), PropKeyPassword, "not encrypted"},
		{"key password without a key", ssl(PropKeyPassword, "secret-pw"), PropKeyPassword, "without a key store"},
		{"endpoint identification", ssl(PropEndpointIdentification, "dns"), PropEndpointIdentification, `"dns"`},
		{"old TLS", ssl(PropSSLEnabledProtocols, "TLSv1.1,TLSv1.2"), PropSSLEnabledProtocols, "before 1.2"},
		{"bad ssl.protocol", ssl(PropSSLProtocol, "QUIC"), PropSSLProtocol, `"QUIC"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := SecurityOptions(c.props)
			if !isPropertyError(err, c.prop) || !strings.Contains(err.Error(), c.problem) {
				t.Fatalf("SecurityOptions: %v, want a *PropertyError naming %s about %q", err, c.prop, c.problem)
			}
			if strings.Contains(err.Error(), "secret-pw") || strings.Contains(err.Error(), string(key[40:70])) {
				t.Errorf("the error %q shows a secret", err)
			}
		})
	}
}

func TestSecurityOptionsPlaintext(t *testing.T) {
	for _, props := range []map[string]string{nil, {}, {PropSecurityProtocol: "plaintext"}} {
		if opts, err := SecurityOptions(props); err != nil || len(opts) != 0 {
			t.Errorf("SecurityOptions(%v) = %d options, %v; want none", props, len(opts), err)
		}
	}
	opts, err := SecurityOptions(map[string]string{PropClientID: "my-job"})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cl.OptValue(kgo.ClientID) != "my-job" {
		t.Errorf("client id %v, want my-job", cl.OptValue(kgo.ClientID))
	}
}

func TestCheckProperty(t *testing.T) {
	for _, c := range []struct {
		name, value string
		ok          bool
	}{
		{PropSecurityProtocol, "sasl_ssl", true},
		{PropSecurityProtocol, "SASL", false},
		{PropSASLMechanism, "SCRAM-SHA-512", true},
		{PropSASLMechanism, "GSSAPI", false},
		{PropSASLJAASConfig, ScramLoginModule + ` required username="u" password="p";`, true},
		{PropSASLJAASConfig, ScramLoginModule + ` required username="u"`, false},
		{PropTrustStoreType, "PEM", true},
		{PropTrustStoreType, "JKS", false},
		{PropEndpointIdentification, "", true},
		{PropEndpointIdentification, "none", false},
		{PropSSLEnabledProtocols, "TLSv1.3", true},
		{PropSSLEnabledProtocols, "", false},
		{PropOAuthTokenEndpoint, "file:///var/run/token", true},
		{PropOAuthTokenEndpoint, "http://idp/token", false},
		{PropTrustStoreLocation, "/nowhere", true}, // files are read by SecurityOptions
		{"ssl.cipher.suites", "x", false},
	} {
		err := CheckProperty(c.name, c.value)
		if (err == nil) != c.ok || (err != nil && !isPropertyError(err, c.name)) {
			t.Errorf("CheckProperty(%s, %q) = %v, want ok=%v", c.name, c.value, err, c.ok)
		}
	}
}

// A client made from the options talks to a broker over TLS with a SCRAM
// login (kfake), and one with the wrong password is refused.
func TestSecurityOptionsAgainstBroker(t *testing.T) {
	ca := newPKI(t, "broker-ca")
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(ca.serverConfig("127.0.0.1")),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "alice", "alice-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	ping := func(password string) error {
		opts, err := SecurityOptions(map[string]string{
			PropSecurityProtocol: "SASL_SSL", PropSASLMechanism: "SCRAM-SHA-256",
			PropSASLJAASConfig:     ScramLoginModule + ` required username="alice" password="` + password + `";`,
			PropTrustStoreLocation: ca.caFile(),
		})
		if err != nil {
			t.Fatalf("SecurityOptions: %v", err)
		}
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RequestRetries(0))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := ping("alice-pw"); err != nil {
		t.Errorf("SASL_SSL with SCRAM-SHA-256: %v", err)
	}
	if err := ping("wrong"); err == nil {
		t.Error("a wrong SCRAM password was accepted")
	}
}
