package kafkaclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The Kafka client properties SecurityOptions reads, by Kafka's names.
const (
	PropSecurityProtocol       = "security.protocol"
	PropSASLMechanism          = "sasl.mechanism"
	PropSASLJAASConfig         = "sasl.jaas.config"
	PropOAuthTokenEndpoint     = "sasl.oauthbearer.token.endpoint.url"
	PropLoginCallbackHandler   = "sasl.login.callback.handler.class"
	PropTrustStoreType         = "ssl.truststore.type"
	PropTrustStoreLocation     = "ssl.truststore.location"
	PropTrustStoreCertificates = "ssl.truststore.certificates"
	PropTrustStorePassword     = "ssl.truststore.password"
	PropKeyStoreType           = "ssl.keystore.type"
	PropKeyStoreLocation       = "ssl.keystore.location"
	PropKeyStoreCertChain      = "ssl.keystore.certificate.chain"
	PropKeyStoreKey            = "ssl.keystore.key"
	PropKeyStorePassword       = "ssl.keystore.password"
	PropKeyPassword            = "ssl.key.password"
	PropEndpointIdentification = "ssl.endpoint.identification.algorithm"
	PropSSLProtocol            = "ssl.protocol"
	PropSSLEnabledProtocols    = "ssl.enabled.protocols"
	PropClientID               = "client.id"
)

// SecurityProperties are the Kafka client properties SecurityOptions
// takes; any other is refused.
var SecurityProperties = []string{
	PropSecurityProtocol, PropSASLMechanism, PropSASLJAASConfig,
	PropOAuthTokenEndpoint, PropLoginCallbackHandler,
	PropTrustStoreType, PropTrustStoreLocation, PropTrustStoreCertificates, PropTrustStorePassword,
	PropKeyStoreType, PropKeyStoreLocation, PropKeyStoreCertChain, PropKeyStoreKey, PropKeyStorePassword, PropKeyPassword,
	PropEndpointIdentification, PropSSLProtocol, PropSSLEnabledProtocols,
	PropClientID,
}

// The login modules of Kafka's sasl.jaas.config, by mechanism.
const (
	PlainLoginModule       = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule       = "org.apache.kafka.common.security.scram.ScramLoginModule"
	OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// The OAUTHBEARER login callback handlers accepted in
// sasl.login.callback.handler.class (Kafka's, for a token from
// sasl.oauthbearer.token.endpoint.url); the handler itself is this
// package's.
var oauthCallbackHandlers = []string{
	"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
	"org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
}

// PropertyError is a problem with one Kafka client property. It matches
// ErrInvalidConfig; its text names the property and never holds the
// values of passwords, keys or JAAS configurations.
type PropertyError struct {
	Property string
	Problem  string
}

func (e *PropertyError) Error() string        { return e.Property + ": " + e.Problem }
func (e *PropertyError) Is(target error) bool { return target == ErrInvalidConfig }

func propErr(prop, format string, args ...any) error {
	return &PropertyError{Property: prop, Problem: fmt.Sprintf(format, args...)}
}

// CheckProperty checks one property alone, without reading files: that
// SecurityOptions knows it, and that an enumerated value (protocol,
// mechanism, store type, endpoint identification, TLS versions) or a
// sasl.jaas.config is well formed. SecurityOptions checks the
// properties together.
func CheckProperty(name, value string) error {
	if !slices.Contains(SecurityProperties, name) {
		return propErr(name, "not a Kafka client property Sluice reads (it reads %s)", strings.Join(SecurityProperties, ", "))
	}
	switch name {
	case PropSecurityProtocol:
		_, err := parseProtocol(value)
		return err
	case PropSASLMechanism:
		_, err := parseMechanism(value)
		return err
	case PropSASLJAASConfig:
		if _, err := ParseJAAS(value); err != nil {
			return propErr(name, "%v", err)
		}
	case PropTrustStoreType, PropKeyStoreType:
		return checkStoreType(name, value)
	case PropEndpointIdentification:
		_, err := parseEndpointIdentification(value)
		return err
	case PropSSLProtocol:
		_, err := parseTLSVersion(name, value, true)
		return err
	case PropSSLEnabledProtocols:
		_, _, err := parseEnabledProtocols(value)
		return err
	case PropOAuthTokenEndpoint:
		_, err := tokenFile(value)
		return err
	case PropLoginCallbackHandler:
		return checkCallbackHandler(value)
	}
	return nil
}

// SecurityOptions turns Kafka client properties into franz-go options:
// security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; default
// PLAINTEXT), sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
// OAUTHBEARER) with its credentials in sasl.jaas.config as kgo.SASL, the
// ssl.* properties as kgo.DialTLSConfig, and client.id as kgo.ClientID.
//
// Trust and key stores are PEM only: JKS and PKCS12 stores are refused
// (convert them with keytool or openssl). A key store holds the private
// key (PKCS#8, PKCS#1 or SEC 1; an encrypted one must be PKCS#8 with
// PBES2, decrypted with ssl.key.password) and its certificate chain.
// ssl.endpoint.identification.algorithm "" verifies the brokers'
// certificate chains but not their host names, as Kafka.
//
// A property of a layer the protocol does not use (sasl.* with SSL,
// ssl.* with SASL_PLAINTEXT) is refused rather than ignored. Every error
// is a *PropertyError naming the property; it matches ErrInvalidConfig.
func SecurityOptions(props map[string]string) ([]kgo.Opt, error) {
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !slices.Contains(SecurityProperties, k) {
			return nil, propErr(k, "not a Kafka client property Sluice reads (it reads %s)", strings.Join(SecurityProperties, ", "))
		}
	}
	protocol, err := parseProtocol(props[PropSecurityProtocol])
	if err != nil {
		return nil, err
	}
	useSASL := protocol == SASLPlaintext || protocol == SASLSSL
	useTLS := protocol == SSL || protocol == SASLSSL
	for _, k := range names {
		switch {
		case !useSASL && strings.HasPrefix(k, "sasl."):
			return nil, propErr(k, "set with security.protocol %s, which does not use SASL (want %s or %s)", protocol, SASLPlaintext, SASLSSL)
		case !useTLS && strings.HasPrefix(k, "ssl."):
			return nil, propErr(k, "set with security.protocol %s, which does not use TLS (want %s or %s)", protocol, SSL, SASLSSL)
		}
	}
	var opts []kgo.Opt
	if id, ok := props[PropClientID]; ok {
		opts = append(opts, kgo.ClientID(id))
	}
	if useTLS {
		cfg, err := TLSConfig(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if useSASL {
		m, err := saslMechanism(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func parseProtocol(v string) (Protocol, error) {
	switch p := Protocol(strings.ToUpper(strings.TrimSpace(v))); p {
	case "", Plaintext:
		return Plaintext, nil
	case SSL, SASLPlaintext, SASLSSL:
		return p, nil
	}
	return "", propErr(PropSecurityProtocol, "%q: want %s, %s, %s or %s", v, Plaintext, SSL, SASLPlaintext, SASLSSL)
}

// The SASL mechanisms SecurityOptions supports.
var securityMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}

func parseMechanism(v string) (string, error) {
	m := strings.ToUpper(strings.TrimSpace(v))
	switch {
	case m == "":
		return "", propErr(PropSASLMechanism, "not set (Kafka's default GSSAPI, Kerberos, is not supported): want one of %s", strings.Join(securityMechanisms, ", "))
	case !slices.Contains(securityMechanisms, m):
		return "", propErr(PropSASLMechanism, "%q: want one of %s", v, strings.Join(securityMechanisms, ", "))
	}
	return m, nil
}

func saslMechanism(props map[string]string) (sasl.Mechanism, error) {
	mech, err := parseMechanism(props[PropSASLMechanism])
	if err != nil {
		return nil, err
	}
	raw, ok := props[PropSASLJAASConfig]
	if !ok || strings.TrimSpace(raw) == "" {
		return nil, propErr(PropSASLJAASConfig, "not set: sasl.mechanism %s takes its credentials from it, e.g. %s required username=\"...\" password=\"...\";", mech, moduleOf(mech))
	}
	j, err := ParseJAAS(raw)
	if err != nil {
		return nil, propErr(PropSASLJAASConfig, "%v", err)
	}
	if want := moduleOf(mech); j.LoginModule != want {
		return nil, propErr(PropSASLJAASConfig, "login module %s does not go with sasl.mechanism %s: want %s", j.LoginModule, mech, want)
	}
	if mech != "OAUTHBEARER" {
		for _, k := range []string{PropOAuthTokenEndpoint, PropLoginCallbackHandler} {
			if _, ok := props[k]; ok {
				return nil, propErr(k, "only used with sasl.mechanism OAUTHBEARER, not %s", mech)
			}
		}
	}
	switch mech {
	case "PLAIN":
		if err := j.only("username", "password"); err != nil {
			return nil, err
		}
		user, pass, err := j.credentials()
		if err != nil {
			return nil, err
		}
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		if err := j.only("username", "password", "tokenauth"); err != nil {
			return nil, err
		}
		user, pass, err := j.credentials()
		if err != nil {
			return nil, err
		}
		a := scram.Auth{User: user, Pass: pass}
		if v, ok := j.Options["tokenauth"]; ok {
			if a.IsToken, err = strconv.ParseBool(v); err != nil {
				return nil, propErr(PropSASLJAASConfig, "option tokenauth %q: want true or false", v)
			}
		}
		if mech == "SCRAM-SHA-256" {
			return a.AsSha256Mechanism(), nil
		}
		return a.AsSha512Mechanism(), nil
	}
	return oauthMechanism(j, props)
}

func moduleOf(mech string) string {
	switch mech {
	case "PLAIN":
		return PlainLoginModule
	case "OAUTHBEARER":
		return OAuthBearerLoginModule
	}
	return ScramLoginModule
}

// only refuses options of the JAAS entry other than the given ones.
func (j JAAS) only(allowed ...string) error {
	for _, k := range j.optionNames() {
		if !slices.Contains(allowed, k) {
			return propErr(PropSASLJAASConfig, "option %q is not one %s takes (%s)", k, j.LoginModule, strings.Join(allowed, ", "))
		}
	}
	return nil
}

func (j JAAS) optionNames() []string {
	names := make([]string, 0, len(j.Options))
	for k := range j.Options {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (j JAAS) credentials() (user, pass string, err error) {
	user, okU := j.Options["username"]
	pass, okP := j.Options["password"]
	switch {
	case !okU || user == "":
		return "", "", propErr(PropSASLJAASConfig, "%s needs a username option", j.LoginModule)
	case !okP:
		return "", "", propErr(PropSASLJAASConfig, "%s needs a password option", j.LoginModule)
	}
	return user, pass, nil
}

// oauthMechanism is OAUTHBEARER with one of three token sources: a
// static token (the JAAS option token, Sluice's), a file re-read at every
// authentication (sasl.oauthbearer.token.endpoint.url file://..., as
// Kafka's OAuthBearerLoginCallbackHandler), or an unsecured JWT
// (unsecuredLoginStringClaim_sub, as Kafka's default handler, for tests).
func oauthMechanism(j JAAS, props map[string]string) (sasl.Mechanism, error) {
	ext := map[string]string{}
	claims := map[string]any{}
	lifetime := time.Hour
	var token string
	hasToken := false
	for _, k := range j.optionNames() {
		v := j.Options[k]
		switch {
		case k == "token":
			token, hasToken = v, true
		case strings.HasPrefix(k, "unsecuredLoginExtension_"):
			ext[strings.TrimPrefix(k, "unsecuredLoginExtension_")] = v
		case strings.HasPrefix(k, "extension_"):
			ext[strings.TrimPrefix(k, "extension_")] = v
		case strings.HasPrefix(k, "unsecuredLoginStringClaim_"):
			claims[strings.TrimPrefix(k, "unsecuredLoginStringClaim_")] = v
		case k == "unsecuredLoginLifetimeSeconds":
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil || s <= 0 {
				return nil, propErr(PropSASLJAASConfig, "option unsecuredLoginLifetimeSeconds %q: want a positive number of seconds", v)
			}
			lifetime = time.Duration(s) * time.Second
		case k == "clientId" || k == "clientSecret" || k == "scope":
			return nil, propErr(PropSASLJAASConfig, "option %s is for the OAuth client-credentials login against a token endpoint over HTTP, which Sluice does not support: "+
				"give the token (option token=\"...\"), a token file (sasl.oauthbearer.token.endpoint.url=file:///path) or unsecuredLoginStringClaim_sub", k)
		default:
			return nil, propErr(PropSASLJAASConfig, "option %q is not one %s takes here (token, unsecuredLoginStringClaim_<claim>, unsecuredLoginLifetimeSeconds, unsecuredLoginExtension_<name>, extension_<name>)", k, j.LoginModule)
		}
	}
	for k := range ext {
		if k == "" || k == "auth" {
			return nil, propErr(PropSASLJAASConfig, "SASL extension name %q is not allowed", k)
		}
	}
	if len(ext) == 0 {
		ext = nil
	}
	endpoint, hasFile := props[PropOAuthTokenEndpoint]
	if h, ok := props[PropLoginCallbackHandler]; ok {
		if err := checkCallbackHandler(h); err != nil {
			return nil, err
		}
	}
	_, unsecured := claims["sub"]
	sources := 0
	for _, b := range []bool{hasToken, hasFile, unsecured} {
		if b {
			sources++
		}
	}
	switch {
	case sources == 0 && len(claims) > 0:
		return nil, propErr(PropSASLJAASConfig, "an unsecured OAUTHBEARER login needs unsecuredLoginStringClaim_sub")
	case sources == 0:
		return nil, propErr(PropSASLJAASConfig, "OAUTHBEARER needs a token: the option token=\"...\", a token file in sasl.oauthbearer.token.endpoint.url (file:///path) or an unsecured login (unsecuredLoginStringClaim_sub=\"...\")")
	case sources > 1:
		return nil, propErr(PropSASLJAASConfig, "OAUTHBEARER takes one token source, got several of: option token, sasl.oauthbearer.token.endpoint.url, unsecuredLoginStringClaim_sub")
	case hasToken && token == "":
		return nil, propErr(PropSASLJAASConfig, "option token is empty")
	case hasToken:
		return oauth.Auth{Token: token, Extensions: ext}.AsMechanism(), nil
	case hasFile:
		path, err := tokenFile(endpoint)
		if err != nil {
			return nil, err
		}
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return oauth.Auth{}, fmt.Errorf("%s: read the token: %w", PropOAuthTokenEndpoint, err)
			}
			t := strings.TrimSpace(string(b))
			if t == "" {
				return oauth.Auth{}, fmt.Errorf("%s: the token file %s is empty", PropOAuthTokenEndpoint, path)
			}
			return oauth.Auth{Token: t, Extensions: ext}, nil
		}), nil
	}
	return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		return oauth.Auth{Token: unsecuredJWT(claims, time.Now(), lifetime), Extensions: ext}, nil
	}), nil
}

// unsecuredJWT is the token of Kafka's OAuthBearerUnsecuredLoginCallbackHandler:
// {"alg":"none"}, the claims with iat and exp, and no signature.
func unsecuredJWT(claims map[string]any, now time.Time, lifetime time.Duration) string {
	c := make(map[string]any, len(claims)+2)
	for k, v := range claims {
		c[k] = v
	}
	c["iat"] = now.Unix()
	c["exp"] = now.Add(lifetime).Unix()
	body, _ := json.Marshal(c) // strings and numbers only
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString(body) + "."
}

func tokenFile(endpoint string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil || u.Scheme == "" {
		return "", propErr(PropOAuthTokenEndpoint, "%q is not a URL: want file:///path/to/token", endpoint)
	}
	if u.Scheme != "file" {
		return "", propErr(PropOAuthTokenEndpoint, "%q: only a file:// URL (a file holding the token) is supported, not a token endpoint over %s", endpoint, u.Scheme)
	}
	if u.Path == "" || (u.Host != "" && u.Host != "localhost") {
		return "", propErr(PropOAuthTokenEndpoint, "%q: want file:///absolute/path", endpoint)
	}
	return u.Path, nil
}

func checkCallbackHandler(v string) error {
	if !slices.Contains(oauthCallbackHandlers, strings.TrimSpace(v)) {
		return propErr(PropLoginCallbackHandler, "%q: only Kafka's OAuthBearerLoginCallbackHandler is accepted (Sluice reads the token file itself); other classes cannot run in Go", v)
	}
	return nil
}

// JAAS is the one login module entry of a sasl.jaas.config value:
// `<LoginModule> <flag> key="value" ...;`.
type JAAS struct {
	LoginModule string
	// Flag is required, requisite, sufficient or optional (lower case).
	Flag    string
	Options map[string]string
}

// ParseJAAS parses a sasl.jaas.config value as Kafka does (Java's
// StreamTokenizer): exactly one login module entry, its control flag, and
// options key=value, each value a word or a string in double or single
// quotes with backslash escapes (\" \\ \n \t \r \b \f, octal \NNN; any
// other escaped character stands for itself); the entry ends with ';'.
// Comments // ... and /* ... */ are skipped. Errors give the offset, never
// an option's value.
func ParseJAAS(s string) (JAAS, error) {
	t := &jaasTokenizer{s: s}
	tok, err := t.next()
	if err != nil {
		return JAAS{}, err
	}
	if tok.kind == tokEOF {
		return JAAS{}, errors.New("empty JAAS configuration: want `<LoginModule> required key=\"value\" ...;`")
	}
	if tok.kind != tokWord {
		return JAAS{}, fmt.Errorf("offset %d: want the login module's class name", tok.pos)
	}
	j := JAAS{LoginModule: tok.text, Options: map[string]string{}}
	tok, err = t.next()
	if err != nil {
		return JAAS{}, err
	}
	flag := strings.ToLower(tok.text)
	if tok.kind != tokWord || (flag != "required" && flag != "requisite" && flag != "sufficient" && flag != "optional") {
		return JAAS{}, fmt.Errorf("offset %d: want the control flag (required, requisite, sufficient or optional) after the login module", tok.pos)
	}
	j.Flag = flag
	for {
		tok, err = t.next()
		if err != nil {
			return JAAS{}, err
		}
		switch tok.kind {
		case tokEOF:
			return JAAS{}, fmt.Errorf("offset %d: the entry does not end with ';'", tok.pos)
		case tokSemicolon:
			end, err := t.next()
			if err != nil {
				return JAAS{}, err
			}
			if end.kind != tokEOF {
				return JAAS{}, fmt.Errorf("offset %d: a Kafka client takes exactly one login module, found more after ';'", end.pos)
			}
			return j, nil
		case tokWord:
		default:
			return JAAS{}, fmt.Errorf("offset %d: want an option name or ';'", tok.pos)
		}
		key := tok.text
		eq, err := t.next()
		if err != nil {
			return JAAS{}, err
		}
		if eq.kind != tokEquals {
			// Not named: a word without '=' may be a password whose name
			// was left out.
			return JAAS{}, fmt.Errorf("offset %d: want '=' after the option name at offset %d", eq.pos, tok.pos)
		}
		val, err := t.next()
		if err != nil {
			return JAAS{}, err
		}
		if val.kind != tokWord && val.kind != tokQuoted {
			return JAAS{}, fmt.Errorf("offset %d: want the value of option %q", val.pos, key)
		}
		if _, dup := j.Options[key]; dup {
			return JAAS{}, fmt.Errorf("offset %d: option %q given twice", tok.pos, key)
		}
		j.Options[key] = val.text
	}
}

type jaasTokenKind uint8

const (
	tokEOF jaasTokenKind = iota
	tokWord
	tokQuoted
	tokEquals
	tokSemicolon
)

type jaasToken struct {
	kind jaasTokenKind
	text string
	pos  int
}

type jaasTokenizer struct {
	s string
	i int
}

func (t *jaasTokenizer) next() (jaasToken, error) {
	if err := t.skipSpace(); err != nil {
		return jaasToken{}, err
	}
	start := t.i
	if t.i >= len(t.s) {
		return jaasToken{kind: tokEOF, pos: start}, nil
	}
	switch c := t.s[t.i]; c {
	case '=':
		t.i++
		return jaasToken{kind: tokEquals, pos: start}, nil
	case ';':
		t.i++
		return jaasToken{kind: tokSemicolon, pos: start}, nil
	case '"', '\'':
		text, err := t.quoted(c)
		return jaasToken{kind: tokQuoted, text: text, pos: start}, err
	}
	for t.i < len(t.s) && !isJAASDelimiter(t.s[t.i]) && !t.commentAhead() {
		t.i++
	}
	return jaasToken{kind: tokWord, text: t.s[start:t.i], pos: start}, nil
}

func isJAASDelimiter(c byte) bool {
	return c <= ' ' || c == '=' || c == ';' || c == '"' || c == '\''
}

func (t *jaasTokenizer) commentAhead() bool {
	return strings.HasPrefix(t.s[t.i:], "//") || strings.HasPrefix(t.s[t.i:], "/*")
}

func (t *jaasTokenizer) skipSpace() error {
	for t.i < len(t.s) {
		switch {
		case t.s[t.i] <= ' ':
			t.i++
		case strings.HasPrefix(t.s[t.i:], "//"):
			if n := strings.IndexByte(t.s[t.i:], '\n'); n >= 0 {
				t.i += n + 1
			} else {
				t.i = len(t.s)
			}
		case strings.HasPrefix(t.s[t.i:], "/*"):
			n := strings.Index(t.s[t.i+2:], "*/")
			if n < 0 {
				return fmt.Errorf("offset %d: comment /* not closed", t.i)
			}
			t.i += n + 4
		default:
			return nil
		}
	}
	return nil
}

// quoted reads a string in quotes q from t.i (at the opening quote),
// with StreamTokenizer's escapes.
func (t *jaasTokenizer) quoted(q byte) (string, error) {
	start := t.i
	t.i++
	var b strings.Builder
	for t.i < len(t.s) {
		c := t.s[t.i]
		t.i++
		switch {
		case c == q:
			return b.String(), nil
		case c != '\\':
			b.WriteByte(c)
			continue
		}
		if t.i >= len(t.s) {
			break
		}
		c = t.s[t.i]
		t.i++
		switch c {
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			// Up to three octal digits, three only when the first is
			// 0-3 (a byte).
			n := int(c - '0')
			more := 2
			if c > '3' {
				more = 1
			}
			for k := 0; k < more && t.i < len(t.s) && t.s[t.i] >= '0' && t.s[t.i] <= '7'; k++ {
				n = n*8 + int(t.s[t.i]-'0')
				t.i++
			}
			b.WriteByte(byte(n))
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("offset %d: quoted string not closed", start)
}

func checkStoreType(prop, v string) error {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "", "PEM":
		return nil
	case "JKS", "PKCS12", "JCEKS", "BCFKS":
		return propErr(prop, "%s stores are not supported, only PEM: convert it, e.g. `keytool -exportcert -rfc -alias <alias> -keystore <store.jks>` "+
			"for certificates, `openssl pkcs12 -in <store.p12> -nodes` for a key and its chain", strings.ToUpper(v))
	}
	return propErr(prop, "%q: only PEM is supported", v)
}

func parseEndpointIdentification(v string) (verifyHost bool, err error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "https":
		return true, nil
	case "":
		return false, nil
	}
	return false, propErr(PropEndpointIdentification, "%q: want https (verify the broker's host name, the default) or empty (verify its certificate chain only)", v)
}

func parseTLSVersion(prop, v string, allowAny bool) (uint16, error) {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "TLSV1.2":
		return tls.VersionTLS12, nil
	case "TLSV1.3":
		return tls.VersionTLS13, nil
	case "TLS":
		if allowAny {
			return 0, nil
		}
	case "TLSV1", "TLSV1.1", "SSLV3", "SSL":
		return 0, propErr(prop, "%q: TLS versions before 1.2 are not supported", v)
	}
	return 0, propErr(prop, "%q: want TLSv1.2 or TLSv1.3", v)
}

// parseEnabledProtocols reads a list like "TLSv1.2,TLSv1.3" into its
// lowest and highest versions.
func parseEnabledProtocols(v string) (lo, hi uint16, err error) {
	for _, p := range strings.Split(strings.Trim(strings.TrimSpace(v), "[]"), ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		ver, err := parseTLSVersion(PropSSLEnabledProtocols, p, false)
		if err != nil {
			return 0, 0, err
		}
		if lo == 0 || ver < lo {
			lo = ver
		}
		hi = max(hi, ver)
	}
	if lo == 0 {
		return 0, 0, propErr(PropSSLEnabledProtocols, "empty: want TLSv1.2, TLSv1.3 or both")
	}
	return lo, hi, nil
}

// TLSConfig builds the TLS configuration of Kafka's ssl.* properties; see
// SecurityOptions. Files are read once, here.
func TLSConfig(props map[string]string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	for _, k := range []string{PropTrustStoreType, PropKeyStoreType} {
		if err := checkStoreType(k, props[k]); err != nil {
			return nil, err
		}
	}
	if v := props[PropTrustStorePassword]; v != "" {
		return nil, propErr(PropTrustStorePassword, "a PEM trust store has no password (it is for JKS and PKCS12 stores, which are not supported)")
	}
	if v := props[PropKeyStorePassword]; v != "" {
		return nil, propErr(PropKeyStorePassword, "not used with a PEM key store: the private key's password is ssl.key.password")
	}

	// The trust store.
	trustPEM, trustProp, err := pemSource(props, PropTrustStoreLocation, PropTrustStoreCertificates)
	if err != nil {
		return nil, err
	}
	if trustPEM != nil {
		pool := x509.NewCertPool()
		certs, err := parseCertificates(trustProp, trustPEM)
		if err != nil {
			return nil, err
		}
		for _, c := range certs {
			pool.AddCert(c)
		}
		cfg.RootCAs = pool
	}

	// The key store: the key and its chain, in one file or two properties.
	keyPass, hasPass := props[PropKeyPassword]
	loc, hasLoc := props[PropKeyStoreLocation]
	chain, hasChain := props[PropKeyStoreCertChain]
	key, hasKey := props[PropKeyStoreKey]
	switch {
	case hasLoc && (hasChain || hasKey):
		return nil, propErr(PropKeyStoreLocation, "give either it or ssl.keystore.certificate.chain with ssl.keystore.key, not both")
	case hasChain != hasKey:
		return nil, propErr(PropKeyStoreKey, "ssl.keystore.certificate.chain and ssl.keystore.key go together: give both or neither")
	case hasPass && !hasLoc && !hasKey:
		return nil, propErr(PropKeyPassword, "set without a key store (ssl.keystore.location or ssl.keystore.key)")
	}
	if hasLoc || hasKey {
		certProp, keyProp := PropKeyStoreLocation, PropKeyStoreLocation
		certPEM, keyPEM := []byte(chain), []byte(key)
		if hasLoc {
			b, err := readPEMFile(PropKeyStoreLocation, loc)
			if err != nil {
				return nil, err
			}
			certPEM, keyPEM = b, b
		} else {
			certProp, keyProp = PropKeyStoreCertChain, PropKeyStoreKey
		}
		pair, err := keyPair(certProp, certPEM, keyProp, keyPEM, keyPass, hasPass)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}

	// Versions.
	if v, ok := props[PropSSLProtocol]; ok {
		if cfg.MaxVersion, err = parseTLSVersion(PropSSLProtocol, v, true); err != nil {
			return nil, err
		}
	}
	if v, ok := props[PropSSLEnabledProtocols]; ok {
		if cfg.MinVersion, cfg.MaxVersion, err = parseEnabledProtocols(v); err != nil {
			return nil, err
		}
	}

	// Host name verification.
	verifyHost := true
	if v, ok := props[PropEndpointIdentification]; ok {
		if verifyHost, err = parseEndpointIdentification(v); err != nil {
			return nil, err
		}
	}
	if !verifyHost {
		// Verify the chain against the roots, without a host name:
		// crypto/tls verifies both or neither.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("kafka broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// pemSource returns the PEM of a file property or of an inline one (at
// most one of the two), and the property it came from; nil when neither
// is set.
func pemSource(props map[string]string, fileProp, inlineProp string) ([]byte, string, error) {
	path, hasFile := props[fileProp]
	inline, hasInline := props[inlineProp]
	switch {
	case hasFile && hasInline:
		return nil, "", propErr(fileProp, "give either it or %s, not both", inlineProp)
	case hasFile:
		b, err := readPEMFile(fileProp, path)
		return b, fileProp, err
	case hasInline:
		return []byte(inline), inlineProp, nil
	}
	return nil, "", nil
}

func readPEMFile(prop, path string) ([]byte, error) {
	if strings.TrimSpace(path) == "" {
		return nil, propErr(prop, "empty path")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, propErr(prop, "%v", err)
	}
	if !strings.Contains(string(b), "-----BEGIN ") {
		kind := "not PEM"
		switch {
		case len(b) >= 4 && b[0] == 0xFE && b[1] == 0xED && b[2] == 0xFE && b[3] == 0xED:
			kind = "a JKS store"
		case len(b) >= 4 && b[0] == 0xCE && b[1] == 0xCE && b[2] == 0xCE && b[3] == 0xCE:
			kind = "a JCEKS store"
		case len(b) > 0 && b[0] == 0x30:
			kind = "DER, likely a PKCS12 store"
		}
		return nil, propErr(prop, "%s is %s: only PEM stores are supported (convert with `keytool -exportcert -rfc` or `openssl pkcs12 -nodes`)", path, kind)
	}
	return b, nil
}

func parseCertificates(prop string, b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, propErr(prop, "certificate %d: %v", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, propErr(prop, "no PEM certificate (-----BEGIN CERTIFICATE-----) in it")
	}
	return certs, nil
}

// keyPair reads the certificate chain and the private key of a PEM key
// store and checks that they match.
func keyPair(certProp string, certPEM []byte, keyProp string, keyPEM []byte, pass string, hasPass bool) (tls.Certificate, error) {
	certs, err := parseCertificates(certProp, certPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	var keyBlock *pem.Block
	for rest := keyPEM; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if strings.HasSuffix(blk.Type, "PRIVATE KEY") {
			if keyBlock != nil {
				return tls.Certificate{}, propErr(keyProp, "more than one private key")
			}
			keyBlock = blk
		}
	}
	if keyBlock == nil {
		return tls.Certificate{}, propErr(keyProp, "no PEM private key (-----BEGIN PRIVATE KEY-----) in it")
	}
	der := keyBlock.Bytes
	switch {
	case keyBlock.Headers["Proc-Type"] != "":
		return tls.Certificate{}, propErr(keyProp, "the key is encrypted the legacy OpenSSL way (Proc-Type header), which is not supported: "+
			"convert it to encrypted PKCS#8 with `openssl pkcs8 -topk8 -v2 aes-256-cbc`")
	case keyBlock.Type == "ENCRYPTED PRIVATE KEY" && !hasPass:
		return tls.Certificate{}, propErr(PropKeyPassword, "not set, and the private key in %s is encrypted", keyProp)
	case keyBlock.Type == "ENCRYPTED PRIVATE KEY":
		if der, err = decryptPKCS8(der, pass); err != nil {
			return tls.Certificate{}, propErr(PropKeyPassword, "cannot decrypt the private key in %s: %v", keyProp, err)
		}
	case hasPass && pass != "":
		return tls.Certificate{}, propErr(PropKeyPassword, "set, but the private key in %s is not encrypted", keyProp)
	}
	var key any
	switch keyBlock.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(der)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(der)
	default:
		key, err = x509.ParsePKCS8PrivateKey(der)
	}
	if err != nil {
		return tls.Certificate{}, propErr(keyProp, "private key: %v", err)
	}
	// Re-encoded, tls.X509KeyPair checks that the key is the leaf's.
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, propErr(keyProp, "private key: %v", err)
	}
	var chainPEM []byte
	for _, c := range certs {
		chainPEM = append(chainPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	pair, err := tls.X509KeyPair(chainPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}))
	if err != nil {
		return tls.Certificate{}, propErr(keyProp, "the private key and the first certificate of %s do not go together: %v", certProp, err)
	}
	return pair, nil
}
