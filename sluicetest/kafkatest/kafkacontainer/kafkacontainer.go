// Package kafkacontainer runs the Kafka of a test in Docker, through
// testcontainers-go's Kafka module. Importing it registers the Container
// kind with package kafkatest, which is how the rest of the kit avoids
// linking testcontainers and the Docker client:
//
//	import _ "github.com/sluicehq/sluice/sluicetest/kafkatest/kafkacontainer"
//
//	k := kafkatest.Start(t, kafkatest.Use(kafkatest.Container))
//
// The kind is unavailable (the test is skipped with the reason) when no
// Docker engine answers. The image is Image's, else SLUICE_TEST_KAFKA_IMAGE,
// else DefaultImage; the module runs the confluent-local images in KRaft
// mode.
package kafkacontainer

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tckafka "github.com/testcontainers/testcontainers-go/modules/kafka"

	"github.com/sluicehq/sluice/sluicetest/kafkatest"
)

// DefaultImage is the image of a Container cluster.
const DefaultImage = "confluentinc/confluent-local:7.9.0"

// EnvImage names the environment variable that overrides the image.
const EnvImage = "SLUICE_TEST_KAFKA_IMAGE"

func init() { kafkatest.Register(kafkatest.Container, start) }

// image is the image to run.
func image() string {
	if v := os.Getenv(EnvImage); v != "" {
		return v
	}
	return DefaultImage
}

// start runs the container, terminated when the test ends.
func start(tb testing.TB, _ kafkatest.Options) ([]string, error) {
	if err := dockerAnswers(); err != nil {
		return nil, fmt.Errorf("no Docker engine answers (%v): %w", err, kafkatest.ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := tckafka.Run(ctx, image(), tckafka.WithClusterID("sluicetest"))
	if c != nil {
		tb.Cleanup(func() {
			if err := testcontainers.TerminateContainer(c); err != nil {
				tb.Logf("kafkacontainer: terminate the Kafka container: %v", err)
			}
		})
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", image(), err)
	}
	seeds, err := c.Brokers(ctx)
	if err != nil {
		return nil, fmt.Errorf("the brokers of the %s container: %w", image(), err)
	}
	return seeds, nil
}

// dockerAnswers asks the Docker engine testcontainers would use for its
// information; the client panics in some setups without one.
func dockerAnswers() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Health(ctx); err != nil {
		return err
	}
	return nil
}
