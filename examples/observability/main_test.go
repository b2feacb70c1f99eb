package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// Without a token the example serves its API on a loopback address only:
// anything else is refused before anything starts, naming the flags.
func TestNonLoopbackAddressNeedsAToken(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, addr := range []string{"0.0.0.0:8081", ":8081", "[::]:8081", "192.0.2.7:8081", "example.com:8081"} {
		dir := t.TempDir()
		err := run(context.Background(), logger, io.Discard, config{addr: addr, dir: dir})
		if err == nil || !strings.Contains(err.Error(), "-address "+addr+" is not a loopback address") ||
			!strings.Contains(err.Error(), "set -token (or SLUICE_TOKEN)") {
			t.Errorf("-address %s without a token: %v", addr, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("-address %s without a token: %d entries written in -dir before the refusal", addr, len(entries))
		}
	}
	for _, c := range []struct{ addr, token string }{{"127.0.0.1:8081", ""}, {"localhost:0", ""}, {"[::1]:8081", ""}, {"0.0.0.0:8081", "t0ken"}} {
		if err := checkExposure(c.addr, c.token); err != nil {
			t.Errorf("-address %s, token %q: %v", c.addr, c.token, err)
		}
	}
}
