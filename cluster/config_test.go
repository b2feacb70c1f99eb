package cluster

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestBadEnvironmentIsReported(t *testing.T) {
	t.Setenv("SLUICE_SLOTS", "many")
	var c Config
	c.Flags(flag.NewFlagSet("x", flag.ContinueOnError))
	c.Role = RoleWorker
	c.Coordinator = "127.0.0.1:1"
	if _, err := c.withDefaults(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "SLUICE_SLOTS") {
		t.Fatalf("a bad SLUICE_SLOTS: %v, want an error naming it", err)
	}
}
