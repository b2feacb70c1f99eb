package integration

// The failover downtime benchmark (issue 28's figures; measured, not
// asserted, and skipped unless SLUICE_BENCH_FAILOVER is set):
//
//	SLUICE_BENCH_FAILOVER=10 scripts/with-kafka go test -count=1 -v \
//	    -run TestBenchWorkerKillDowntime ./integration
//
// A coordinator and three workers of two slots run the keyed count at
// parallelism 6; N times (the variable's value, default 10) a worker that
// runs tasks is killed with SIGKILL and started again with its id. The
// downtime of each kill is read from the job's REST details (failovers)
// and measured from the kill itself: to the next attempt's tasks running,
// and to its first completed checkpoint. Median and max are logged, for
// RocksDB and for the heap backend.

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/api"
)

func TestBenchWorkerKillDowntime(t *testing.T) {
	v := os.Getenv("SLUICE_BENCH_FAILOVER")
	if v == "" {
		t.Skip("a benchmark: set SLUICE_BENCH_FAILOVER (the number of kills)")
	}
	kills, err := strconv.Atoi(v)
	if err != nil || kills < 1 {
		kills = 10
	}
	for _, backend := range []string{"rocksdb", "heap"} {
		t.Run(backend, func(t *testing.T) {
			const keys = 16
			perKey := 60 * kills
			ctx := jobContext(t, time.Duration(kills)*20*time.Second+time.Minute)
			adm := kadm.NewClient(newClient(t))
			job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 100)
			job.backend = backend
			c := startChaosCluster(ctx, t, job, "-parallelism", "6", "-restarts", strconv.Itoa(kills+5), "-rest", "127.0.0.1:0")
			ids := []string{"w1", "w2", "w3"}
			for _, id := range ids {
				c.startWorker(t, id)
			}
			client, jid := apiOf(ctx, t, c.coord)
			var running, checkpointed []time.Duration
			for i := range kills {
				if !c.coord.awaitNextCompleted(ctx, t, c.coord.completed()) || c.coord.said("final checkpoint ") {
					t.Fatalf("the job is ending after %d kills; make the input larger", i)
				}
				id := ids[i%len(ids)]
				before := len(failovers(ctx, t, client, jid))
				killed := time.Now()
				c.killWorker(t, id)
				c.startWorker(t, id)
				var d api.FailoverDowntimeInfo
				for {
					f := failovers(ctx, t, client, jid)
					if len(f) > before && f[len(f)-1].CheckpointAfter >= 0 {
						d = f[len(f)-1]
						break
					}
					select {
					case <-ctx.Done():
						t.Fatalf("kill %d: no outage that ended: %v", i, ctx.Err())
					case <-time.After(20 * time.Millisecond):
					}
				}
				at := time.UnixMilli(d.Timestamp)
				running = append(running, at.Add(time.Duration(d.RunningAfter)*time.Millisecond).Sub(killed))
				checkpointed = append(checkpointed, at.Add(time.Duration(d.CheckpointAfter)*time.Millisecond).Sub(killed))
				t.Logf("kill %d of %s: detected after %v, running after %v, checkpoint after %v", i+1, id,
					at.Sub(killed).Round(time.Millisecond), running[i].Round(time.Millisecond), checkpointed[i].Round(time.Millisecond))
			}
			t.Logf("%s, %d worker kills: kill to running median %v max %v; kill to completed checkpoint median %v max %v",
				backend, kills, median(running), slices.Max(running).Round(time.Millisecond),
				median(checkpointed), slices.Max(checkpointed).Round(time.Millisecond))
			c.finish(ctx, t)
			checkJobOutput(ctx, t, job, keys, perKey)
		})
	}
}

func failovers(ctx context.Context, t *testing.T, c *api.Client, jid string) []api.FailoverDowntimeInfo {
	t.Helper()
	job, err := c.Job(ctx, jid)
	if err != nil {
		t.Fatal(err)
	}
	return job.Failovers
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}
