// Package kafkatest gives a test the Kafka cluster to run a pipeline
// against and the helpers around it: create topics, produce input, read
// the committed output back as a read_committed consumer sees it.
//
// Start picks the cluster by what the test asks for and what is there:
//
//   - Embedded (the default): an in-process broker, franz-go's kfake;
//     fast, no dependency, transactions and read_committed included.
//   - External: the broker KAFKA_BROKERS names (host:port, comma
//     separated).
//   - Local: an Apache Kafka broker (KRaft, one node) started from the
//     Maven jars with the installed Java, as the project's scripts/kafka
//     does: the jars cached in ~/.cache/sluice/kafka-<version>/libs
//     (KAFKA_CACHE_DIR), downloaded once with mvn when missing; the broker
//     runs in a directory of the test and is stopped at its end.
//   - Container: Apache Kafka in Docker through testcontainers-go, when
//     the test imports package kafkatest/kafkacontainer (which registers
//     it; the rest of the kit does not link testcontainers) and a Docker
//     engine answers.
//
// Real() asks for a real Apache Kafka: the first of External, Local and
// Container that is available. When none of the kinds asked for is
// available the test is skipped with each one's reason (failed instead
// with Required(), as a CI job that must run it wants). The environment
// variable SLUICE_TEST_KAFKA (embedded, external, local, container, real;
// a comma-separated list is tried in order) overrides the default for
// Start without Use or Real.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kind is a kind of cluster.
type Kind string

// The kinds of cluster.
const (
	Embedded  Kind = "embedded"
	External  Kind = "external"
	Local     Kind = "local"
	Container Kind = "container"
)

// ErrUnavailable is wrapped by a starter's error when its kind of cluster
// cannot be had here (no Java, no Docker engine, KAFKA_BROKERS unset): the
// next kind is tried, and with none left the test is skipped with the
// reasons.
var ErrUnavailable = errors.New("not available here")

// EnvKind is the environment variable that picks the kinds Start tries
// when the test does not say (Use, Real).
const EnvKind = "SLUICE_TEST_KAFKA"

// Starter starts a cluster of one kind for tb (stopped at tb's cleanup)
// and returns its seed brokers, or an error wrapping ErrUnavailable
// saying why that kind cannot run here.
type Starter func(tb testing.TB, o Options) (seeds []string, err error)

var (
	startersMu sync.Mutex
	starters   = map[Kind]Starter{}
)

// Register makes kind startable; a package providing a kind registers it
// when imported (package kafkacontainer registers Container).
func Register(kind Kind, s Starter) {
	startersMu.Lock()
	defer startersMu.Unlock()
	starters[kind] = s
}

func starterOf(kind Kind) (Starter, bool) {
	startersMu.Lock()
	defer startersMu.Unlock()
	s, ok := starters[kind]
	return s, ok
}

func init() {
	Register(Embedded, startEmbedded)
	Register(External, startExternal)
	Register(Local, startLocal)
}

// Options are what Start was asked for.
type Options struct {
	// Kinds are tried in order.
	Kinds []Kind
	// Required fails the test rather than skip it when no kind is
	// available.
	Required bool
	// KafkaVersion is the Apache Kafka version of Local and Container
	// (default KAFKA_VERSION, else 4.1.1).
	KafkaVersion string
	// Partitions is the default partition count of topics created by
	// the broker itself (num.partitions; default 1).
	Partitions int32
}

// Option configures Start.
type Option func(*Options)

// Use tries the kinds in order and starts the first available.
func Use(kinds ...Kind) Option { return func(o *Options) { o.Kinds = kinds } }

// Real asks for a real Apache Kafka broker: External, else Local, else
// Container.
func Real() Option { return Use(External, Local, Container) }

// Required fails the test instead of skipping it when none of the kinds
// is available.
func Required() Option { return func(o *Options) { o.Required = true } }

// KafkaVersion sets the Apache Kafka version of Local and Container
// clusters.
func KafkaVersion(v string) Option { return func(o *Options) { o.KafkaVersion = v } }

// Cluster is a started Kafka cluster.
type Cluster struct {
	kind  Kind
	seeds []string
	mu    sync.Mutex
	adm   *kadm.Client
}

// Start starts (or finds) the cluster the options ask for, stopped when
// the test ends; see the package documentation for the kinds.
func Start(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	o := Options{KafkaVersion: os.Getenv("KAFKA_VERSION"), Partitions: 1}
	if o.KafkaVersion == "" {
		o.KafkaVersion = DefaultKafkaVersion
	}
	if env := strings.TrimSpace(os.Getenv(EnvKind)); env != "" {
		kinds, err := parseKinds(env)
		if err != nil {
			tb.Fatalf("kafkatest: %s=%q: %v", EnvKind, env, err)
		}
		o.Kinds = kinds
	}
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.Kinds) == 0 {
		o.Kinds = []Kind{Embedded}
	}
	var reasons []string
	for _, k := range o.Kinds {
		s, ok := starterOf(k)
		if !ok {
			reasons = append(reasons, fmt.Sprintf("%s: no starter registered (import %q)", k, containerPackage))
			continue
		}
		seeds, err := s(tb, o)
		if errors.Is(err, ErrUnavailable) {
			reasons = append(reasons, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		if err != nil {
			tb.Fatalf("kafkatest: start a %s Kafka cluster: %v", k, err)
		}
		return &Cluster{kind: k, seeds: seeds}
	}
	msg := fmt.Sprintf("kafkatest: no Kafka cluster of the kinds asked for is available:\n  %s", strings.Join(reasons, "\n  "))
	if o.Required {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return nil
}

const containerPackage = "github.com/sluicehq/sluice/sluicetest/kafkatest/kafkacontainer"

func parseKinds(s string) ([]Kind, error) {
	var kinds []Kind
	for _, f := range strings.Split(s, ",") {
		switch k := Kind(strings.TrimSpace(f)); k {
		case Embedded, External, Local, Container:
			kinds = append(kinds, k)
		case "real":
			kinds = append(kinds, External, Local, Container)
		case "kfake":
			kinds = append(kinds, Embedded)
		default:
			return nil, fmt.Errorf("unknown kind %q (embedded, external, local, container, real)", f)
		}
	}
	return kinds, nil
}

// Kind is the kind of the cluster.
func (c *Cluster) Kind() Kind { return c.kind }

// Seeds are the cluster's seed brokers (host:port), for the pipeline's
// sources and sinks.
func (c *Cluster) Seeds() []string { return append([]string(nil), c.seeds...) }

// Client returns a franz-go client of the cluster with opts, closed when
// the test ends.
func (c *Cluster) Client(tb testing.TB, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds...)}, opts...)...)
	if err != nil {
		tb.Fatalf("kafkatest: new client: %v", err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client of the cluster.
func (c *Cluster) Admin(tb testing.TB) *kadm.Client {
	tb.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.adm == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...))
		if err != nil {
			tb.Fatalf("kafkatest: new client: %v", err)
		}
		// The cluster outlives none of the tests using it.
		tb.Cleanup(cl.Close)
		c.adm = kadm.NewClient(cl)
	}
	return c.adm
}

// Topic creates a topic named prefix followed by random hex (so that
// tests and runs on one broker never share one) with partitions
// partitions and replication factor 1, and returns its name. On a broker
// that outlives the test (External) it is deleted when the test ends.
func (c *Cluster) Topic(tb testing.TB, prefix string, partitions int32) string {
	tb.Helper()
	name := prefix + "-" + randomHex(tb)
	c.CreateTopic(tb, name, partitions)
	return name
}

// CreateTopic creates the topic name with partitions partitions
// (replication factor 1); see Topic.
func (c *Cluster) CreateTopic(tb testing.TB, name string, partitions int32) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := c.Admin(tb)
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		tb.Fatalf("kafkatest: create topic %s: %v", name, err)
	}
	if c.kind == External {
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := adm.DeleteTopics(ctx, name); err != nil {
				tb.Logf("kafkatest: delete topic %s: %v", name, err)
			}
		})
	}
}

// Produce writes records (to topic when their Topic is empty) and waits
// for every acknowledgement.
func (c *Cluster) Produce(tb testing.TB, topic string, records ...*kgo.Record) {
	tb.Helper()
	if len(records) == 0 {
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		tb.Fatalf("kafkatest: new client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		tb.Fatalf("kafkatest: produce %d records to %s: %v", len(records), topic, err)
	}
}

// ProduceValues writes one record per value, without a key, to topic.
func (c *Cluster) ProduceValues(tb testing.TB, topic string, values ...string) {
	tb.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Value: []byte(v)}
	}
	c.Produce(tb, topic, recs...)
}

func randomHex(tb testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("kafkatest: random name: %v", err)
	}
	return hex.EncodeToString(b[:])
}
