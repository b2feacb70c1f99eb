package runtime

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/operators"
)

var testLag = &report.Family{Name: "runtime_test_lag", Kind: report.Gauge, Labels: []string{"partition"}}

func init() { report.Register(testLag) }

type lagReporter struct{}

func (lagReporter) Report(emit func(report.Sample)) {
	emit(report.Sample{Family: testLag, LabelValues: []string{"3"}, Value: 70})
}

// The figures of an operator's reporters are read with the task's and
// cross the control plane (JSON) of a job on several hosts unchanged.
func TestConnectorFiguresTravelWithTaskMetrics(t *testing.T) {
	g := operators.NewMetricGroup()
	g.AddReporter(lagReporter{})
	m := TaskMetrics{Vertex: "src -> map", Subtask: 1, Connectors: g.ReporterFigures("src")}
	want := []report.Figure{{Operator: "src", Family: "runtime_test_lag", Labels: []string{"3"}, Value: 70}}
	if !reflect.DeepEqual(m.Connectors, want) {
		t.Fatalf("figures %+v, want %+v", m.Connectors, want)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back TaskMetrics
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.Connectors, want) {
		t.Fatalf("after JSON: %+v, %v", back.Connectors, err)
	}
}
