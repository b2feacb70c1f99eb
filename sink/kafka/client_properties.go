package kafka

import (
	"github.com/twmb/franz-go/pkg/kgo"

	sluiceconfig "github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/kafkaclient"
)

// ClientOptionsFrom returns the franz-go options of a configuration's
// kafka.properties.* keys (Kafka's client properties: security.protocol,
// sasl.*, ssl.*, client.id; see docs/configuration.md), for ClientOptions:
//
//	kopts, err := kafka.ClientOptionsFrom(conf)
//	src := kafka.NewSource(brokers, topics, kafka.ClientOptions(kopts...))
//
// It reads the trust and key stores. Nil without such keys; an error
// names the key and where it came from. The job runner (package runner)
// gives them to every Kafka client itself. The Kafka source and sink
// return the same options.
func ClientOptionsFrom(c *sluiceconfig.Configuration) ([]kgo.Opt, error) {
	return kafkaclient.ConfiguredOptions(c)
}
