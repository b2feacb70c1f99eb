package cluster_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/internal/testutil"
)

// configOf is the cluster configuration env's job starts with.
func configOf(t *testing.T, env *sluice.Environment) cluster.Config {
	t.Helper()
	cc, err := cluster.ConfigOf(env)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// The cluster's keys in a configuration, ranked with the SLUICE_*
// variables and an earlier With.
func TestClusterKeys(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	p := testutil.WriteConfig(t, "cluster.role: worker\ntaskmanager.numberOfTaskSlots: 2\njobmanager.rpc.address: coord:7000\n")
	c, err := sluice.LoadConfiguration(p)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's own variables rank over the file ...
	t.Setenv("SLUICE_SLOTS", "3")
	t.Setenv("SLUICE_WORKER_ID", "w-7")
	e := sluice.NewEnvironment(sluice.WithConfiguration(c))
	if cc := configOf(t, e); cc.Role != cluster.RoleWorker || cc.Slots != 3 || cc.WorkerID != "w-7" || cc.Coordinator != "coord:7000" {
		t.Fatalf("cluster %+v", cc)
	}
	// ... and under the environment's keys and -D.
	if _, err := c.ParseDynamicProperties([]string{"-Dtaskmanager.numberOfTaskSlots=5", "-Dheartbeat.timeout=1 min"}); err != nil {
		t.Fatal(err)
	}
	e = sluice.NewEnvironment(sluice.WithConfiguration(c))
	if cc := configOf(t, e); cc.Slots != 5 || cc.HeartbeatTimeout != time.Minute {
		t.Errorf("cluster after -D: %+v", cc)
	}
	// Over an earlier With: the file fills what it leaves unset,
	// -D overrides it.
	e = sluice.NewEnvironment(cluster.With(cluster.Config{Role: cluster.RoleCoordinator, Listen: ":9999", Slots: 1}), sluice.WithConfiguration(c))
	if cc := configOf(t, e); cc.Role != cluster.RoleCoordinator || cc.Listen != ":9999" || cc.Coordinator != "coord:7000" || cc.Slots != 5 || cc.WorkerID != "" {
		t.Errorf("cluster over With: %+v", cc)
	}
	// high-availability.type.
	c = sluice.NewConfiguration()
	if err := c.Set("high-availability.type", "etcd"); err != nil {
		t.Fatal(err)
	}
	e = sluice.NewEnvironment(sluice.WithConfiguration(c))
	if err := e.Err(); err == nil || !strings.Contains(err.Error(), "high-availability.etcd.endpoints") {
		t.Errorf("etcd without endpoints: %v", err)
	}
	if err := c.Set("high-availability.type", "zookeeper"); err == nil {
		t.Error("zookeeper accepted")
	}
	// No cluster key: the environment's role as before, read when the
	// job starts.
	e = sluice.NewEnvironment(sluice.WithConfiguration(sluice.NewConfiguration()))
	t.Setenv("SLUICE_ROLE", "worker")
	if cc := configOf(t, e); cc.Role != cluster.RoleWorker {
		t.Errorf("an empty configuration set the cluster: %+v", cc)
	}
}

func TestConfigFlags(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	file := testutil.WriteConfig(t, "parallelism.default: 2\ntaskmanager.numberOfTaskSlots: 2\n")
	t.Setenv("SLUICE_CONFIG_FILE", testutil.WriteConfig(t, "parallelism.default: 8\npipeline.name: env-file\n"))
	t.Setenv("SLUICE_CONF_PIPELINE_MAX_PARALLELISM", "64")

	fs := flag.NewFlagSet("job", flag.ContinueOnError)
	cc := cluster.Flags(fs) // registers -D first
	c := sluice.ConfigFlags(fs)
	if err := fs.Parse([]string{"-config", file, "-D", "taskmanager.numberOfTaskSlots=6", "-D", "pipeline.name=flagged", "-role", "worker", "-coordinator", "c:1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get("parallelism.default"); v != "2" {
		t.Errorf("parallelism %q: -config replaces $SLUICE_CONFIG_FILE", v)
	}
	if _, ok := c.Get("pipeline.max-parallelism"); !ok {
		t.Error("the environment was not read")
	}
	// The cluster key reached Flags' configuration too.
	if cc.Slots != 6 || cc.Role != cluster.RoleWorker {
		t.Errorf("Flags' config %+v, want 6 slots from -D", cc)
	}
	e := sluice.NewEnvironment(cluster.With(*cc), sluice.WithConfiguration(c))
	cfg, ec := e.Config(), configOf(t, e)
	if cfg.Parallelism != 2 || cfg.JobName != "flagged" || cfg.MaxParallelism != 64 || ec.Slots != 6 || ec.Coordinator != "c:1" {
		t.Errorf("environment: parallelism %d, name %q, max %d, cluster %+v", cfg.Parallelism, cfg.JobName, cfg.MaxParallelism, ec)
	}
	// A bad -D fails the parse.
	fs = flag.NewFlagSet("job", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	sluice.ConfigFlags(fs)
	if err := fs.Parse([]string{"-D", "parallelism.default=none"}); err == nil || !strings.Contains(err.Error(), "parallelism.default") {
		t.Errorf("bad -D: %v", err)
	}
	// A bad environment is reported by WithConfiguration.
	t.Setenv("SLUICE_CONF_PARALLELISM_DEFAULT", "x")
	c = sluice.ConfigFlags(flag.NewFlagSet("job", flag.ContinueOnError))
	if err := sluice.NewEnvironment(sluice.WithConfiguration(c)).Err(); err == nil || !strings.Contains(err.Error(), "$SLUICE_CONF_PARALLELISM_DEFAULT") {
		t.Errorf("bad variable: %v", err)
	}
}
