package inspect

import (
	"testing"

	"github.com/sluicehq/sluice/internal/importcheck"
)

// Package inspect is a registration point: connectors register their
// decoders with package decode, neither imports a connector.
func TestImportsNoConnector(t *testing.T) {
	importcheck.NoConnectors(t, ".")
	importcheck.NoConnectors(t, "decode")
}
