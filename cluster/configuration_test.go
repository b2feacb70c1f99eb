package cluster_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/runtime/network"
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

// The processes' authentication, etcd's credentials and the data plane's
// bounds are keys of the cluster's configuration; the secret and the
// password are masked where the configuration is shown. Over an earlier
// With the file fills the security settings it leaves unset, field by
// field.
func TestClusterSecurityKeys(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	p := testutil.WriteConfig(t, `security.ssl.internal.enabled: true
security.ssl.internal.cert: /etc/sluice/tls/tls.crt
security.ssl.internal.key: /etc/sluice/tls/tls.key
security.ssl.internal.truststore: /etc/sluice/tls/ca.crt
security.ssl.internal.handshake-timeout: 5 s
security.internal.secret: a-secret-of-the-deployment
high-availability.etcd.username: sluice
high-availability.etcd.password: etcd-password
high-availability.etcd.tls.ca: /etc/etcd/ca.crt
taskmanager.network.max-pending-requests-per-connection: 16
taskmanager.network.connection.idle-timeout: 30 s
`)
	c, err := sluice.LoadConfiguration(p)
	if err != nil {
		t.Fatal(err)
	}
	e := sluice.NewEnvironment(sluice.WithConfiguration(c))
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
	cc := configOf(t, e)
	if !cc.Security.TLS || cc.Security.CertFile != "/etc/sluice/tls/tls.crt" || cc.Security.KeyFile != "/etc/sluice/tls/tls.key" ||
		cc.Security.TrustFile != "/etc/sluice/tls/ca.crt" || cc.Security.HandshakeTimeout != 5*time.Second ||
		string(cc.Security.Secret) != "a-secret-of-the-deployment" || cc.EtcdUsername != "sluice" || cc.EtcdPassword != "etcd-password" ||
		cc.EtcdTLSCA != "/etc/etcd/ca.crt" || cc.DataLimits.MaxPendingRequests != 16 || cc.DataLimits.IdleTimeout != 30*time.Second {
		t.Fatalf("cluster %+v", cc)
	}
	if shown := c.String(); strings.Contains(shown, "a-secret-of-the-deployment") || strings.Contains(shown, "etcd-password") {
		t.Errorf("the configuration shows a secret:\n%s", shown)
	}
	e = sluice.NewEnvironment(cluster.With(cluster.Config{Role: cluster.RoleCoordinator, Security: peerauth.Config{CertFile: "/mine.crt"}}), sluice.WithConfiguration(c))
	if cc := configOf(t, e); cc.Security.CertFile != "/mine.crt" || cc.Security.KeyFile != "/etc/sluice/tls/tls.key" || !cc.Security.TLS {
		t.Errorf("security over With: %+v", cc.Security)
	}
	// A bound the data plane's key refuses names the key and the file.
	bad := sluice.NewConfiguration()
	if err := bad.Set(network.KeyMaxPendingRequests.Name(), "0"); err == nil || !strings.Contains(err.Error(), network.KeyMaxPendingRequests.Name()) {
		t.Errorf("a bound of 0: %v", err)
	}
}

// The processes' authentication from the flags and the SLUICE_*
// variables: --tls-* turn mutual TLS on, as SLUICE_TLS_* do; -D takes
// the keys.
func TestSecurityFlagsAndVariables(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	t.Setenv("SLUICE_TLS_CA", "/env/ca.crt")
	t.Setenv("SLUICE_HA_ETCD_PASSWORD", "from-env")
	fs := flag.NewFlagSet("job", flag.ContinueOnError)
	cc := cluster.Flags(fs)
	if err := fs.Parse([]string{"-tls-cert", "/f/tls.crt", "-tls-key", "/f/tls.key", "-etcd-username", "u",
		"-D", "security.ssl.internal.handshake-timeout=3 s", "-D", "taskmanager.network.max-connections-per-peer=8"}); err != nil {
		t.Fatal(err)
	}
	if s := cc.Security; !s.TLS || s.CertFile != "/f/tls.crt" || s.KeyFile != "/f/tls.key" || s.TrustFile != "/env/ca.crt" ||
		s.HandshakeTimeout != 3*time.Second || cc.EtcdUsername != "u" || cc.EtcdPassword != "from-env" || cc.DataLimits.MaxConnectionsPerPeer != 8 {
		t.Errorf("flags and variables: %+v", cc)
	}
	var c cluster.Config
	if err := c.Set("security.internal.insecure", "maybe"); err == nil || !strings.Contains(err.Error(), "security.internal.insecure") {
		t.Errorf("insecure=maybe: %v", err)
	}
}
