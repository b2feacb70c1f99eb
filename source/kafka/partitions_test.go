package kafka

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Partitions counts the partitions of the subscribed topics (a pattern's
// matches too); a topic that does not exist is an error naming it.
func TestSourcePartitions(t *testing.T) {
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"), kfake.SeedTopics(5, "orders-eu"),
		kfake.SeedTopics(2, "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	decode := func(r *kgo.Record) (string, error) { return string(r.Value), nil }
	for _, c := range []struct {
		sub  Subscription
		want int
	}{
		{Topics("orders"), 3},
		{Topics("orders", "other"), 5},
		{TopicPattern(regexp.MustCompile(`orders.*`)), 8},
	} {
		src, err := NewSource(broker.ListenAddrs(), c.sub, decode)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := src.Partitions(ctx); err != nil || n != c.want {
			t.Errorf("%v: %d partitions, %v; want %d", c.sub, n, err, c.want)
		}
	}
	src, err := NewSource(broker.ListenAddrs(), Topics("orders", "missing"), decode)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := src.Partitions(ctx); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing topic: %d, %v; want an error naming it", n, err)
	}
}
