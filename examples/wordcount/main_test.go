package main

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/importcheck"
)

// The example runs to its end on the embedded broker and its own check of
// the output (every word's counts 1..n, once each) passes.
func TestWordCountOnEmbeddedBroker(t *testing.T) {
	t.Setenv("KAFKA_BROKERS", "")
	os.Unsetenv("KAFKA_BROKERS")
	if err := run(100*time.Millisecond, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// A job of the root package, a Kafka source and sink and the heap backend
// links no AWS SDK, etcd client, gRPC or zap: S3 and the cluster plug in
// only when a program imports them.
func TestLinksNeitherS3NorTheCluster(t *testing.T) {
	importcheck.NoneOf(t, ".", importcheck.Heavy...)
}

// Without package cluster a process given a cluster role refuses to run,
// rather than run the whole job beside the coordinator's workers.
func TestClusterRoleNeedsTheCluster(t *testing.T) {
	t.Setenv("SLUICE_ROLE", "worker")
	_, err := sluice.NewEnvironment().Launcher()
	if !errors.Is(err, sluice.ErrClusterNotLinked) {
		t.Fatalf("SLUICE_ROLE=worker without package cluster: %v, want ErrClusterNotLinked", err)
	}
	t.Setenv("SLUICE_ROLE", "single")
	if l, err := sluice.NewEnvironment().Launcher(); l != nil || err != nil {
		t.Fatalf("SLUICE_ROLE=single: %v, %v", l, err)
	}
}

// A key of a package the program does not import is unknown, and its
// error names the package to import.
func TestKeysOfPackagesNotImported(t *testing.T) {
	for key, pkg := range map[string]string{
		"taskmanager.numberOfTaskSlots":    "github.com/sluicehq/sluice/cluster",
		"s3.endpoint":                      "github.com/sluicehq/sluice/checkpoint/storage/s3",
		"state.backend.rocksdb.thread.num": "github.com/sluicehq/sluice/state/rocksdb",
		"rest.port":                        "github.com/sluicehq/sluice/runner",
	} {
		err := sluice.NewConfiguration().Set(key, "1")
		if !errors.Is(err, sluice.ErrUnknownConfigKey) || !strings.Contains(err.Error(), pkg) {
			t.Errorf("%s: %v, want an unknown key naming %s", key, err, pkg)
		}
	}
	// The Kafka connectors', which this program imports, are known.
	if err := sluice.NewConfiguration().Set("kafka.properties.client.id", "wc"); err != nil {
		t.Error(err)
	}
}
