package kafkacontainer_test

import (
	"testing"

	"github.com/sluicehq/sluice/sluicetest/kafkatest"
	_ "github.com/sluicehq/sluice/sluicetest/kafkatest/kafkacontainer"
)

// A dockerized Kafka through testcontainers, when a Docker engine
// answers (skipped with the reason otherwise): a topic, a record
// produced and read back as committed.
func TestContainer(t *testing.T) {
	k := kafkatest.Start(t, kafkatest.Use(kafkatest.Container))
	topic := k.Topic(t, "in", 1)
	k.ProduceValues(t, topic, "hello")
	if got := k.ReadCommittedValues(t, topic); len(got) != 1 || got[0] != "hello" {
		t.Fatalf("read back %v", got)
	}
}
