package integration

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker failover under both transaction protocols. The chaos job (a
// running count per key, RocksDB, exactly-once Kafka sink, a fixed-delay
// restart strategy) runs against a three-node cluster of the test's own
// (replication factor 3, min ISR 2) while the test SIGKILLs one node at a
// time: first the transaction coordinator of one of the job's open
// transactions, found by ListTransactions and DescribeTransactions, then
// the leader of an input partition. Each node stays down until the job has
// completed two checkpoints without it, then starts again and the test
// waits until every partition is fully replicated before the next kill.
// The job must finish by itself with every key's counts 1..n committed
// once each, in order (read_committed), the output of a run without
// failures.
//
// The cluster starts with transaction.version=1, what every Kafka 3.x
// cluster runs: its sink initialises a producer (InitProducerId) for
// every transaction, so the coordinator's failover meets that call. A
// second job then runs the same after the cluster is upgraded to version
// 2, Kafka 4's default (one cluster for both keeps the test short).
//
// The job's Kafka calls retry what Kafka calls retriable (franz-go is told
// to give up on a request after 1 s rather than 30, so that the
// connectors' own retries meet every failover), so a kill may fail the job
// over (restore its last checkpoint) only when the records of an open
// transaction failed inside franz-go (an AddPartitionsToTxn to a
// coordinator gone from the metadata is fatal to it): the test fails on
// any other failover, logs those, and the restart strategy bounds them.
func TestBrokerFailover(t *testing.T) {
	c := startKafkaCluster(t, 3, "transaction.version=1")
	t.Run("transaction version 1", func(t *testing.T) { testBrokerFailover(t, c, 1, true) })
	if t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1})
	if err == nil {
		for _, r := range resp {
			err = cmp.Or(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("upgrade the cluster to transaction.version 2: %v", err)
	}
	// The last node killed stays down: the cluster goes after this run.
	t.Run("transaction version 2", func(t *testing.T) { testBrokerFailover(t, c, 2, false) })
}

// testBrokerFailover runs the chaos job through the kills on c, which runs
// transaction.version version; restartLast starts the last node killed
// again (so that the cluster is whole for what follows).
func testBrokerFailover(t *testing.T, c *kafkaCluster, version int16, restartLast bool) {
	chaosJobBinary(t) // built before the bound starts, as jobContext does
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c.awaitTransactionVersion(ctx, t, version)

	// Paced at 20 records per second until the kills are over (150 s of
	// input at most, so that a slow machine's kills find the job still
	// running), then at full speed.
	const keys, perKey, rate = 20, 150, 20
	in := c.createTopic(ctx, t, "sluice-it-failover-in", 4)
	out := c.createTopic(ctx, t, "sluice-it-failover-out", 4)
	produceKeyedAt(ctx, t, c.seeds, in, keys, perKey)
	job := newChaosJob(t, in, out, "mixed", rate)
	job.seeds = c.seeds
	// franz-go retries a request for 30 s by default before the
	// connectors see its error; 1 s has every coordinator failover reach
	// the connectors' own retries.
	job.extra = []string{"-restarts", "10", "-kafka-retry-timeout", "1s"}
	run := job.start(t)
	defer func() {
		if t.Failed() {
			job.logRuns(t)
		}
	}()
	run.awaitCompleted(ctx, t, 1)

	kills := []struct {
		what string
		node func() int32
	}{
		{"the transaction coordinator of an open transaction", func() int32 { return c.coordinatorOfOpenTransaction(ctx, t, job.prefix) }},
		{"the transaction coordinator of idle transactional ids", func() int32 { return c.coordinatorOfIdleIDs(ctx, t, job.prefix) }},
	}
	for i, k := range kills {
		if run.ended() {
			t.Fatalf("the job ended before kill %d (%v): %s\n%s", i+1, run.cmd.ProcessState, lastLine(run.stdout.String()), tail(run.stderr.String(), 30))
		}
		node := k.node()
		led := c.ledBy(ctx, t, node, in, out)
		before := run.completed()
		killed := time.Now()
		c.kill(t, node)
		// The job goes on without the node: two more checkpoints.
		run.awaitCompleted(ctx, t, before+2)
		t.Logf("kill %d: node %d, %s, leader of %v: two checkpoints completed %v after the kill", i+1, node, k.what, led, time.Since(killed).Round(100*time.Millisecond))
		if i == len(kills)-1 && !restartLast {
			break
		}
		c.startNode(t, node)
		c.awaitHealthy(ctx, t)
		t.Logf("kill %d: node %d back and every partition in sync %v after the kill", i+1, node, time.Since(killed).Round(100*time.Millisecond))
	}
	run.signal(t, syscall.SIGUSR1) // lift the pace
	lifted := time.Now()
	defer func() {
		t.Logf("the job finished %v after the pace was lifted", time.Since(lifted).Round(100*time.Millisecond))
	}()
	if code := run.wait(ctx, t); code != 0 || !run.said("job finished") {
		t.Fatalf("the job ended with %v (%q), want \"job finished\"\nstderr (last lines):\n%s", run.cmd.ProcessState, lastLine(run.stdout.String()), tail(run.stderr.String(), 40))
	}
	got := readCommittedAt(ctx, t, c.seeds, out)
	checkExactCounts(t, got, keys, perKey)
	var failovers, events []string
	for _, l := range strings.Split(run.stderr.String(), "\n") {
		if strings.Contains(l, "kafka: ") && strings.Contains(l, "level=INFO") {
			events = append(events, l) // a broker lost or back, a call retried
		}
		if !strings.Contains(l, "job failed; restarting") {
			continue
		}
		failovers = append(failovers, l)
		// Only records failing inside franz-go may fail the job over:
		// every call the connectors make retries a broker's failover.
		if !strings.Contains(l, "records failed") && !strings.Contains(l, "produce failed") {
			t.Errorf("a broker kill failed the job over through a call that should have been retried: %s", l)
		}
	}
	t.Logf("%d checkpoints, %d calls retried, %d failovers%s\nfailover events:\n%s", run.completed(), strings.Count(run.stderr.String(), "kafka: call failed, retrying"),
		len(failovers), strings.Join(append([]string{""}, failovers...), "\n"), strings.Join(events, "\n"))
}

// coordinatorOfIdleIDs returns the coordinator of transactional ids of the
// job's pool (<prefix>-<subtask>-<slot>, two subtasks, two slots) that
// hold no open transaction, preferring one that coordinates no open one:
// the writer initialises a producer there (under transaction version 1)
// when it next takes such an id.
func (c *kafkaCluster) coordinatorOfIdleIDs(ctx context.Context, t *testing.T, prefix string) int32 {
	t.Helper()
	ids := []string{prefix + "-0-0", prefix + "-0-1", prefix + "-1-0", prefix + "-1-1"}
	var node int32 = -1
	await(ctx, t, "an idle transactional id of the job", func() bool {
		ds, err := c.adm.DescribeTransactions(ctx, ids...)
		if err != nil {
			return false
		}
		idle, open := map[int32]int{}, map[int32]bool{}
		for _, d := range ds {
			if d.Err != nil {
				return false
			}
			if d.State == "Ongoing" {
				open[d.Coordinator] = true
			} else {
				idle[d.Coordinator]++
			}
		}
		for n := range idle {
			if node < 0 || (open[node] && !open[n]) {
				node = n
			}
		}
		return node >= 0
	})
	t.Logf("transactional ids of the job are idle on coordinator %d", node)
	return node
}

// coordinatorOfOpenTransaction returns the coordinator of one of the
// ongoing transactions whose transactional id starts with prefix,
// waiting for one.
func (c *kafkaCluster) coordinatorOfOpenTransaction(ctx context.Context, t *testing.T, prefix string) int32 {
	t.Helper()
	var node int32 = -1
	await(ctx, t, "an open transaction of the job", func() bool {
		listed, err := c.adm.ListTransactions(ctx, nil, []string{"Ongoing"})
		if err != nil {
			return false
		}
		for id, l := range listed {
			if strings.HasPrefix(id, prefix+"-") {
				// Ask the coordinator itself (FindCoordinator and
				// DescribeTransactions) rather than trust the listing.
				ds, err := c.adm.DescribeTransactions(ctx, id)
				if d, ok := ds[id]; err == nil && ok && d.Err == nil && d.State == "Ongoing" {
					node = d.Coordinator
					t.Logf("transactional id %s (producer id %d) is open on coordinator %d (listed by %d)", id, d.ProducerID, d.Coordinator, l.Coordinator)
					return true
				}
			}
		}
		return false
	})
	return node
}

// awaitTransactionVersion waits until every broker says the cluster's
// finalized transaction.version is version (a feature update spreads
// through the metadata log).
func (c *kafkaCluster) awaitTransactionVersion(ctx context.Context, t *testing.T, version int16) {
	t.Helper()
	awaitWhy(ctx, t, fmt.Sprintf("transaction.version %d on every broker", version), func() string {
		for _, seed := range c.seeds {
			// A client of this broker alone: ApiVersions goes to it.
			cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
			if err != nil {
				return err.Error()
			}
			resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
			cl.Close()
			if err != nil {
				return seed + ": " + err.Error()
			}
			var v int16
			for _, f := range resp.FinalizedFeatures {
				if f.Name == "transaction.version" {
					v = f.MaxVersionLevel
				}
			}
			if v != version {
				return fmt.Sprintf("%s: transaction.version %d", seed, v)
			}
		}
		return ""
	})
}
