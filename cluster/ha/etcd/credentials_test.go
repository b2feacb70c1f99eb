package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster/ha"
	"github.com/sluicehq/sluice/internal/etcdtest"
	"github.com/sluicehq/sluice/internal/testcerts"
	"github.com/sluicehq/sluice/internal/testutil"
)

// etcd with TLS and a user: HA works with the keys' credentials; a wrong
// password, a wrong CA or no user fail with an error that names the
// endpoint and the key to check.
func TestTLSAndAuthentication(t *testing.T) {
	ca := testcerts.NewTestCA(t, "etcd CA")
	srv := etcdtest.StartServer(t, etcdtest.WithTLS(ca), etcdtest.WithAuth("sluice", "the password"))
	eps := srv.Endpoints()
	good := ha.Config{Endpoints: eps, Prefix: "/test", SessionTTL: holdTTL, Logger: testLog}
	for k, v := range map[string]string{ha.KeyUsername.Name(): "sluice", ha.KeyPassword.Name(): "the password", ha.KeyTLSCA.Name(): srv.CAFile()} {
		if err := good.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(testutil.Context(t, 0), good)
	if err != nil {
		t.Fatalf("open with TLS and the user: %v", err)
	}
	defer s.Close()
	l := campaign(t, s, "job-1", "10.0.0.1:6123")
	if err := l.PublishCheckpoint(testutil.Context(t, 0), ha.Pointer{ID: 3, Path: "s3://b/job-1/chk-3"}); err != nil {
		t.Fatal(err)
	}
	if p, ok, err := s.LatestCheckpoint(testutil.Context(t, 0), "job-1"); err != nil || !ok || p.ID != 3 {
		t.Fatalf("pointer %+v %v %v", p, ok, err)
	}

	otherCA := testcerts.NewTestCA(t, "another CA")
	for _, tc := range []struct {
		name string
		edit func(*ha.Config)
		want []string
	}{
		{"wrong password", func(c *ha.Config) { c.Password = "wrong" }, []string{ha.KeyPassword.Name(), "authentication failed", eps[0]}},
		{"no user", func(c *ha.Config) { c.Username, c.Password = "", "" }, []string{ha.KeyUsername.Name(), eps[0]}},
		{"another CA", func(c *ha.Config) { c.TLSCAFile = otherCA.File(t) }, []string{ha.KeyTLSCA.Name(), eps[0]}},
	} {
		cfg := good
		cfg.DialTimeout = time.Second
		tc.edit(&cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := Open(ctx, cfg)
		cancel()
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v does not name %q", tc.name, err, w)
			}
		}
	}

	// Files that cannot be read are configuration errors naming the key.
	bad := good
	bad.TLSCAFile = t.TempDir() + "/absent.pem"
	if _, err := Open(testutil.Context(t, 0), bad); !errors.Is(err, ha.ErrInvalidConfig) || !strings.Contains(err.Error(), ha.KeyTLSCA.Name()) {
		t.Errorf("an absent CA file: %v, want ha.ErrInvalidConfig naming %s", err, ha.KeyTLSCA.Name())
	}
}
