package kafkaclient

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/config"
)

// PropertyPrefix is the prefix of the keys of Kafka's client properties
// in a configuration: kafka.properties.security.protocol, ...
const PropertyPrefix = "kafka.properties."

// propertyDocs say what each property is, for the key reference.
var propertyDocs = map[string]string{
	PropSecurityProtocol:       "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
	PropSASLMechanism:          "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER.",
	PropSASLJAASConfig:         "The login module and its options: username and password (PLAIN, SCRAM), a token or unsecured JWT claims (OAUTHBEARER).",
	PropOAuthTokenEndpoint:     "OAUTHBEARER: file:///path of a token, read again at every login.",
	PropLoginCallbackHandler:   "OAUTHBEARER: Kafka's OAuthBearerLoginCallbackHandler (the token file).",
	PropTrustStoreType:         "PEM (JKS and PKCS12 are refused).",
	PropTrustStoreLocation:     "A PEM file of the certificates to verify the brokers with.",
	PropTrustStoreCertificates: "The trust store's certificates in PEM, inline.",
	PropTrustStorePassword:     "Refused for PEM stores.",
	PropKeyStoreType:           "PEM (JKS and PKCS12 are refused).",
	PropKeyStoreLocation:       "A PEM file of the client's key and certificate chain.",
	PropKeyStoreCertChain:      "The client's certificate chain in PEM, inline.",
	PropKeyStoreKey:            "The client's private key in PEM, inline (PKCS#8 when encrypted).",
	PropKeyStorePassword:       "Refused for PEM stores.",
	PropKeyPassword:            "The password of an encrypted PKCS#8 private key.",
	PropEndpointIdentification: "https verifies the brokers' host names; empty does not.",
	PropSSLProtocol:            "The TLS version: TLSv1.2, TLSv1.3 or TLS.",
	PropSSLEnabledProtocols:    "The TLS versions enabled (a list).",
	PropClientID:               "The client id the brokers see.",
}

func init() {
	for _, p := range SecurityProperties {
		prop := p
		doc := propertyDocs[p]
		if doc == "" {
			doc = "Kafka's client property " + p + "."
		}
		config.Custom(PropertyPrefix+prop, doc, "string", func(v string) (string, error) { return v, nil }).
			Check(func(v string) error {
				if err := CheckProperty(prop, v); err != nil {
					if pe, ok := errors.AsType[*PropertyError](err); ok {
						return errors.New(pe.Problem)
					}
					return err
				}
				return nil
			})
	}
	config.RegisterCheck(func(c *config.Configuration) error {
		_, err := ConfiguredOptions(c)
		return err
	})
}

// ConfiguredOptions returns the franz-go options of the configuration's
// kafka.properties.* keys (Kafka's client properties: security.protocol,
// sasl.*, ssl.*, client.id; see SecurityOptions). It reads the trust and
// key stores. Nil without such keys; an error names the key and where it
// came from.
func ConfiguredOptions(c *config.Configuration) ([]kgo.Opt, error) {
	props := map[string]string{}
	for _, k := range c.Keys() {
		if p, ok := strings.CutPrefix(k, PropertyPrefix); ok && slices.Contains(SecurityProperties, p) {
			props[p], _ = c.Get(k)
		}
	}
	if len(props) == 0 {
		return nil, nil
	}
	opts, err := SecurityOptions(props)
	if err != nil {
		if pe, ok := errors.AsType[*PropertyError](err); ok {
			return nil, c.KeyError(PropertyPrefix+pe.Property, errors.New(pe.Problem))
		}
		return nil, fmt.Errorf("%w: %w", config.ErrInvalidOption, err)
	}
	return opts, nil
}
