package ha

import (
	"errors"
	"testing"
	"time"
)

func TestConfigSet(t *testing.T) {
	var c Config
	for k, v := range map[string]string{
		"high-availability.etcd.endpoints":                 " http://a:2379, http://b:2379 ,",
		"high-availability.etcd.path.root":                 "/flink/",
		"high-availability.etcd.lease-duration":            "20 s",
		"high-availability.etcd.client.connection-timeout": "1500",
		"high-availability.etcd.username":                  "u",
		"high-availability.etcd.password":                  "p",
	} {
		if err := c.Set(k, v); err != nil {
			t.Fatalf("Set(%q, %q): %v", k, v, err)
		}
	}
	c, err := c.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Endpoints) != 2 || c.Endpoints[0] != "http://a:2379" || c.Endpoints[1] != "http://b:2379" {
		t.Errorf("endpoints %q", c.Endpoints)
	}
	if c.Prefix != "/flink" || c.SessionTTL != 20*time.Second || c.DialTimeout != 1500*time.Millisecond || c.Username != "u" || c.Password != "p" {
		t.Errorf("config %+v", c)
	}

	for _, bad := range [][2]string{
		{"high-availability.etcd.quorum", "x"},
		{"high-availability.etcd.endpoints", " , "},
		{"high-availability.etcd.lease-duration", "soon"},
		{"high-availability.etcd.lease-duration", "5 fortnights"},
	} {
		if err := c.Set(bad[0], bad[1]); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Set(%q, %q): %v, want ErrInvalidConfig", bad[0], bad[1], err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := Config{Endpoints: []string{"http://e:2379"}}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Prefix != DefaultPrefix || c.SessionTTL != DefaultSessionTTL || c.DialTimeout != DefaultDialTimeout || c.Logger == nil {
		t.Errorf("defaults %+v", c)
	}
	if c, _ := (Config{Endpoints: []string{"x"}, Prefix: "ha"}).WithDefaults(); c.Prefix != "/ha" {
		t.Errorf("prefix %q, want /ha", c.Prefix)
	}
	if _, err := (Config{Endpoints: []string{"x"}, SessionTTL: -time.Second}).WithDefaults(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("negative lease: %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"15 s": 15 * time.Second, "15s": 15 * time.Second, "500 ms": 500 * time.Millisecond,
		"1 min": time.Minute, "2m": 2 * time.Minute, "1m30s": 90 * time.Second, "250": 250 * time.Millisecond,
		"1 h": time.Hour, "1.5s": 1500 * time.Millisecond,
	} {
		var c Config
		if err := c.Set("high-availability.etcd.lease-duration", in); err != nil || c.SessionTTL != want {
			t.Errorf("lease-duration %q = %v, %v; want %v", in, c.SessionTTL, err, want)
		}
	}
}
