package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// kafkaCluster is a Kafka cluster of the test's own: KAFKA_NODES nodes,
// each a broker and a KRaft controller, that scripts/kafka runs on
// loopback with replication factor 3 and min ISR 2 (new topics and the
// internal ones), so that one node may be down. Node numbers are the
// nodes' node.id, 1..n, as Kafka's metadata names them.
type kafkaCluster struct {
	script string
	env    []string
	seeds  []string
	nodes  int
	adm    *kadm.Client
}

// startKafkaCluster starts a cluster of n nodes formatted with features
// (KAFKA_FEATURES, e.g. "transaction.version=1"; "" for Kafka's defaults)
// and stops it at cleanup. It skips the test, saying why, only when Java
// is missing: the script fetches the jars itself.
func startKafkaCluster(t *testing.T, n int, features string) *kafkaCluster {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil && os.Getenv("JAVA_HOME") == "" {
		t.Skipf("java is missing (%v): the test starts a %d-node Kafka cluster with scripts/kafka, which needs Java 17 or newer", err, n)
	}
	script, err := filepath.Abs(filepath.Join("..", "scripts", "kafka"))
	if err != nil {
		t.Fatal(err)
	}
	c := &kafkaCluster{script: script, nodes: n}
	c.env = append(os.Environ(), "KAFKA_RUN_DIR="+filepath.Join(t.TempDir(), "run"), "KAFKA_NODES="+strconv.Itoa(n),
		"KAFKA_FEATURES="+features, "KAFKA_PORT=", "KAFKA_CONTROLLER_PORT=")
	start := time.Now()
	out := c.run(t, "start")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	addrs, ok := strings.CutPrefix(lines[len(lines)-1], "KAFKA_BROKERS=")
	if !ok || addrs == "" {
		t.Fatalf("scripts/kafka start printed %q, want KAFKA_BROKERS=host:port,... last", out)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { c.run(t, "stop") }) })
	c.seeds = strings.Split(addrs, ",")
	c.adm = kadm.NewClient(newClientAt(t, c.seeds))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.awaitHealthy(ctx, t)
	t.Logf("a %d-node Kafka cluster (%s) started in %v: %s", n, features, time.Since(start).Round(100*time.Millisecond), addrs)
	return c
}

// run runs scripts/kafka with args and returns its standard output.
func (c *kafkaCluster) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(c.script, args...)
	cmd.Env = c.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/kafka %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// kill SIGKILLs node and waits until its process is gone.
func (c *kafkaCluster) kill(t *testing.T, node int32) {
	t.Helper()
	c.run(t, "kill", strconv.Itoa(int(node)))
}

// startNode starts a killed node again and waits until it answers.
func (c *kafkaCluster) startNode(t *testing.T, node int32) {
	t.Helper()
	c.run(t, "start-node", strconv.Itoa(int(node)))
}

// awaitHealthy waits until every node is registered and every partition
// (the internal topics' too) has all its replicas in sync: one node may
// then go down without any partition losing its min ISR.
func (c *kafkaCluster) awaitHealthy(ctx context.Context, t *testing.T) {
	t.Helper()
	awaitWhy(ctx, t, "every node up and every partition fully replicated", func() string { return c.unhealthy(ctx) })
}

// awaitWhy polls notYet until it says nothing; ctx's deadline only turns
// a hang into a failure, which says what notYet said last.
func awaitWhy(ctx context.Context, t *testing.T, what string, notYet func() string) {
	t.Helper()
	for {
		why := notYet()
		if why == "" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last: %s", what, ctx.Err(), why)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// unhealthy says why the cluster is not fully up and replicated, or "".
func (c *kafkaCluster) unhealthy(ctx context.Context) string {
	m, err := c.adm.Metadata(ctx)
	if err != nil {
		return err.Error()
	}
	if len(m.Brokers) != c.nodes {
		return fmt.Sprintf("%d of %d brokers registered", len(m.Brokers), c.nodes)
	}
	for _, td := range m.Topics {
		for _, pd := range td.Partitions {
			if pd.Err != nil || pd.Leader < 0 || len(pd.ISR) < len(pd.Replicas) {
				return fmt.Sprintf("%s/%d: leader %d, replicas %v, in sync %v (%v)", td.Topic, pd.Partition, pd.Leader, pd.Replicas, pd.ISR, pd.Err)
			}
		}
	}
	return ""
}

// ledBy lists the partitions of topics that node leads.
func (c *kafkaCluster) ledBy(ctx context.Context, t *testing.T, node int32, topics ...string) []string {
	t.Helper()
	m, err := c.adm.Metadata(ctx, topics...)
	if err != nil {
		t.Fatalf("metadata of %v: %v", topics, err)
	}
	var out []string
	for _, td := range m.Topics.Sorted() {
		for _, pd := range td.Partitions.Sorted() {
			if pd.Leader == node {
				out = append(out, fmt.Sprintf("%s/%d", td.Topic, pd.Partition))
			}
		}
	}
	return out
}

// createTopic creates a topic of partitions partitions replicated on
// every node (at most 3), deleted with the cluster.
func (c *kafkaCluster) createTopic(ctx context.Context, t *testing.T, prefix string, partitions int32) string {
	t.Helper()
	topic := uniqueName(t, prefix)
	resp, err := c.adm.CreateTopic(ctx, partitions, int16(min(c.nodes, 3)), nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	return topic
}
