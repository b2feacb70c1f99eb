package metrics_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/metrics"
)

// The Grafana dashboard and the docs name only metrics the collector
// exports.
func TestDeployedDashboardUsesExportedNames(t *testing.T) {
	c := metrics.NewCollector()
	ch := make(chan *prometheus.Desc, 100)
	c.Describe(ch)
	close(ch)
	known := map[string]bool{}
	nameRE := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		m := nameRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("descriptor without a name: %s", d)
		}
		known[m[1]] = true
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			known[m[1]+suffix] = true
		}
	}
	for _, file := range []string{"../deploy/grafana/dashboards/sluice.json", "../deploy/README.md"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		used := regexp.MustCompile(`sluice_[A-Za-z_]+`).FindAllString(string(data), -1)
		if len(used) == 0 {
			t.Fatalf("%s names no metric", file)
		}
		for _, name := range used {
			if !known[name] && !strings.HasSuffix(name, "_") {
				t.Errorf("%s uses %s, which the collector does not export", file, name)
			}
		}
	}
}
