package sluicetest_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/importcheck"
)

// The kit links nothing a user's test does not ask for: the harness and
// runner import no Kafka client, Docker client, RocksDB or connector, nor
// link one the API itself does not, and kafkatest does not link
// testcontainers (only kafkacontainer does).
func TestImportsAddNothingHeavy(t *testing.T) {
	api := map[string]bool{}
	for _, d := range importcheck.Deps(t, "..") {
		api[d] = true
	}
	heavy := func(d string) bool {
		return strings.Contains(d, "github.com/twmb/franz-go") || strings.Contains(d, "testcontainers") ||
			strings.Contains(d, "docker") || strings.Contains(d, "grocksdb") || importcheck.IsConnector(d)
	}
	for _, d := range importcheck.Deps(t, ".") {
		if !api[d] && heavy(d) {
			t.Errorf("package sluicetest links %s, which the API does not", d)
		}
	}
	for _, d := range importcheck.Imports(t, ".") {
		if heavy(d) {
			t.Errorf("package sluicetest imports %s", d)
		}
	}
	for _, d := range importcheck.Deps(t, "kafkatest") {
		if strings.Contains(d, "testcontainers") || strings.Contains(d, "docker") || importcheck.IsConnector(d) {
			t.Errorf("package kafkatest links %s: only kafkacontainer may", d)
		}
	}
}
