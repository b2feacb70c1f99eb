package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage/s3"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/ha"
	"github.com/sluicehq/sluice/config"
)

// docs/configuration.md is what the declarations say.
func TestReferenceIsFresh(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("docs/configuration.md is stale: run go generate ./config")
	}
}

// Every key has its own SLUICE_CONF_ variable (a deprecated name may
// share its key's), and every key says what it is for.
func TestKeys(t *testing.T) {
	vars := map[string]string{} // variable -> key
	for _, d := range config.Declared() {
		if strings.TrimSpace(d.Doc) == "" {
			t.Errorf("%s has no doc", d.Key)
		}
		for _, n := range append([]string{d.Key}, d.Deprecated...) {
			v := config.EnvSuffix(n)
			if prev, dup := vars[v]; dup && prev != d.Key {
				t.Errorf("%s and %s share the variable %s%s", prev, n, config.EnvPrefix, v)
			}
			vars[v] = d.Key
		}
	}
}

// Every duration, whichever package declares it, takes Flink's forms:
// one parser for all (the runner took "1.5 s" alone, the root "1 d"
// alone, the cluster refused "10 s").
func TestDurationsAreParsedAlike(t *testing.T) {
	forms := map[string]time.Duration{"10 s": 10 * time.Second, "1.5 s": 1500 * time.Millisecond, "1 d": 24 * time.Hour,
		"500ms": 500 * time.Millisecond, "1min": time.Minute}
	n := 0
	for _, d := range config.Declared() {
		if d.Kind != "duration" {
			continue
		}
		n++
		for v := range forms {
			if err := config.New().Set(d.Key, v); err != nil {
				t.Errorf("%s (%s): %v", d.Key, d.Package, err)
			}
		}
	}
	if n < 15 {
		t.Fatalf("%d duration keys declared: the packages were not linked", n)
	}
	// And through the packages' own Set methods.
	for v, want := range forms {
		var cc cluster.Config
		var hc ha.Config
		var sc s3.Config
		if err := cc.Set("heartbeat.interval", v); err != nil || cc.HeartbeatInterval != want {
			t.Errorf("cluster heartbeat.interval %q: %v, %v", v, cc.HeartbeatInterval, err)
		}
		if err := hc.Set("high-availability.etcd.lease-duration", v); err != nil || hc.SessionTTL != want {
			t.Errorf("ha lease-duration %q: %v, %v", v, hc.SessionTTL, err)
		}
		if err := sc.Set("s3.request.timeout", v); err != nil || sc.RequestTimeout != want {
			t.Errorf("s3.request.timeout %q: %v, %v", v, sc.RequestTimeout, err)
		}
	}
}
