package etcd

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluicehq/sluice/cluster/ha"
)

// etcd counts leases in whole seconds: the lease is rounded up.
func TestTTLSeconds(t *testing.T) {
	c, err := ha.Config{Endpoints: []string{"http://e:2379"}}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if ttlSeconds(c) != 15 {
		t.Errorf("ttl %d s", ttlSeconds(c))
	}
	c.SessionTTL = 1500 * time.Millisecond
	if ttlSeconds(c) != 2 {
		t.Errorf("1.5 s rounds to %d s, want 2", ttlSeconds(c))
	}
	c.SessionTTL = time.Millisecond
	if ttlSeconds(c) != 1 {
		t.Errorf("1 ms rounds to %d s, want 1", ttlSeconds(c))
	}
}

// The etcd client's warnings reach slog with their fields; its info
// lines do not.
func TestZapToSlog(t *testing.T) {
	var buf bytes.Buffer
	l := zapToSlog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.With(zap.String("target", "etcd")).Warn("retrying", zap.Int("attempt", 3))
	l.Info("chatty")
	l.Warn(retryMessage, zap.String("error", "context canceled"))
	out := buf.String()
	for _, want := range []string{"level=WARN", "msg=retrying", "component=etcd-client", "target=etcd", "attempt=3"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "chatty") {
		t.Errorf("an info line came through: %q", out)
	}
	if !strings.Contains(out, "level=DEBUG msg=\"retrying of unary invoker failed\"") {
		t.Errorf("the retry warning is not at debug level: %q", out)
	}
}
