package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// brokers returns the seed brokers from KAFKA_BROKERS. When it is unset the
// test is skipped with directions, or fails when CI=true.
func brokers(t *testing.T) []string {
	t.Helper()
	v := strings.TrimSpace(os.Getenv("KAFKA_BROKERS"))
	if v == "" {
		const how = "start a broker with `scripts/kafka start` and export the KAFKA_BROKERS=host:port line it prints, " +
			"run `make test` (it starts one), or point KAFKA_BROKERS at your own broker (docker compose up -d: localhost:9092)"
		if os.Getenv("CI") == "true" {
			t.Fatalf("KAFKA_BROKERS is unset and CI=true: integration tests are never skipped in CI; %s", how)
		}
		t.Skipf("KAFKA_BROKERS is unset: %s", how)
	}
	var seeds []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			seeds = append(seeds, b)
		}
	}
	return seeds
}

// testContext is a context bounded well below `go test`'s own timeout, so a
// stuck broker fails the test with a clear error instead of a panic dump.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// uniqueName returns prefix followed by random hex, so that tests never see
// each other's topics or transactional ids, even across runs on one broker.
func uniqueName(t *testing.T, prefix string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random name: %v", err)
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

// newClient returns a franz-go client for the test broker, closed at cleanup.
func newClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClientAt(t, brokers(t), opts...)
}

// newClientAt returns a franz-go client for the brokers at seeds, closed
// at cleanup.
func newClientAt(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatalf("new kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic with the given partitions (replication factor
// 1) and deletes it at cleanup.
func createTopic(ctx context.Context, t *testing.T, adm *kadm.Client, partitions int32) string {
	t.Helper()
	topic := uniqueName(t, "sluice-it")
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := adm.DeleteTopics(ctx, topic)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Logf("delete topic %s: %v", topic, err)
		}
	})
	return topic
}
