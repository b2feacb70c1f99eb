package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/ha"
	"github.com/sluicehq/sluice/internal/importcheck"
)

// A cluster program whose checkpoints are on a shared file system and
// that runs without HA links no AWS SDK, etcd client, gRPC or zap: its
// workers are the smaller binary (docs/performance.md, "A cluster
// worker's binary").
func TestLinksNoPlugIn(t *testing.T) {
	importcheck.NoneOf(t, ".", importcheck.Heavy...)
}

// Given etcd endpoints (--etcd, as a user would) without importing the
// HA services, a coordinator and a worker refuse to start, naming the key,
// the flag and the import, before they listen or run anything.
func TestEtcdWithoutTheHAServicesIsRefused(t *testing.T) {
	for _, role := range []string{"coordinator", "worker"} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		cc := cluster.Flags(fs)
		args := []string{"--role", role, "--etcd", "http://127.0.0.1:2379", "--listen", "127.0.0.1:0", "--data-listen", "127.0.0.1:0"}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		job := jobFlags{records: 10, keys: 2, payload: 8, parallelism: 1, interval: time.Second, checkpoints: t.TempDir()}
		env, _, err := newJob(job, *cc, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = env.Execute(ctx)
		cancel()
		if !errors.Is(err, ha.ErrNotLinked) || !errors.Is(err, cluster.ErrInvalidConfig) {
			t.Fatalf("%s with --etcd and no cluster/ha/etcd: %v, want ErrNotLinked and ErrInvalidConfig", role, err)
		}
		for _, want := range []string{"high-availability.etcd.endpoints", "--etcd", `import _ "github.com/sluicehq/sluice/cluster/ha/etcd"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error %q does not name %s", role, err, want)
			}
		}
	}
}
