package metrics_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/importcheck"
)

// Package metrics is a registration point: connectors plug into it
// (package report), it imports none of them.
func TestImportsNoConnector(t *testing.T) {
	importcheck.NoConnectors(t, ".")
	importcheck.NoConnectors(t, "report")
}
