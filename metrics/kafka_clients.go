package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/sluicehq/sluice/internal/kafkaclient"
)

// KafkaClientNamespace and KafkaClientSubsystem start the names of
// franz-go's client metrics: sluice_kafka_client_connects_total,
// sluice_kafka_client_produce_bytes_total, ...
const (
	KafkaClientNamespace = "sluice"
	KafkaClientSubsystem = "kafka_client"
)

// RegisterKafkaClients has every Kafka client that Sluice's connectors
// make from now on in this process (the source's consumers and admin
// client, the sink's producers, its pool of transactional producers, the
// committer's clients) report franz-go's client metrics (package kprom)
// on reg, until unregister is called: no connector needs naming. Each
// client's series carry the labels client_id (Kafka's client.id) and
// client, which names what the client is for and numbers it in the
// process, as the Java client's client ids do ("source-consumer-3",
// "sink-transactional-producer-12"); a closed client's series go away.
//
// The names are kprom's under sluice_kafka_client_:
//
//	sluice_kafka_client_connects_total{client,client_id,node_id}
//	sluice_kafka_client_read_bytes_total{client,client_id,node_id}
//	sluice_kafka_client_fetch_bytes_total{client,client_id,node_id,topic}
//	sluice_kafka_client_produce_bytes_total{client,client_id,node_id,topic}
//	sluice_kafka_client_buffered_produce_records_total{client,client_id}
func RegisterKafkaClients(reg prometheus.Registerer) (unregister func()) {
	var mu sync.Mutex
	seq := map[string]int{}
	return kafkaclient.AddClientHook(func(info kafkaclient.ClientInfo) []kgo.Opt {
		mu.Lock()
		seq[info.Kind]++
		name := info.Kind + "-" + strconv.Itoa(seq[info.Kind])
		mu.Unlock()
		m := kprom.NewMetrics(KafkaClientNamespace, kprom.Subsystem(KafkaClientSubsystem), kprom.Registerer(reg),
			kprom.WithClientLabel(), kprom.WithStaticLabel(prometheus.Labels{"client": name}))
		return []kgo.Opt{kgo.WithHooks(m)}
	})
}
