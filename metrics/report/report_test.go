package report

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

var (
	testPartition = &Family{Name: "test_currentOffset", Kind: Gauge, Labels: []string{"topic", "partition"},
		Flink: "Reader.topic.{topic}.partition.{partition}.currentOffset"}
	testLagMax  = &Family{Name: "test_records_lag_max", Kind: Gauge, Flink: "Reader.Consumer.records-lag-max"}
	testLatency = &Family{Name: "test_latency_seconds", Kind: Histogram}
)

func init() { Register(testPartition, testLagMax, testLatency) }

type reporterFunc func(emit func(Sample))

func (f reporterFunc) Report(emit func(Sample)) { f(emit) }

// Read keeps what JSON can carry and families found by name: a figure
// read on a worker is the same figure on the coordinator.
func TestReadAndJSON(t *testing.T) {
	unregistered := &Family{Name: "test_unregistered", Kind: Gauge}
	figs := Read("src", reporterFunc(func(emit func(Sample)) {
		emit(Sample{Family: testPartition, LabelValues: []string{"orders", "3"}, Value: 42})
		emit(Sample{Family: testLagMax, Value: math.NaN()})
		emit(Sample{Family: unregistered, Value: 1})
		emit(Sample{Family: testLatency, Count: 3, Sum: 1.5, Buckets: map[float64]uint64{1: 2, 0.1: 1, math.Inf(1): 3}})
	}))
	want := []Figure{
		{Operator: "src", Family: "test_currentOffset", Labels: []string{"orders", "3"}, Value: 42},
		{Operator: "src", Family: "test_latency_seconds", Count: 3, Sum: 1.5, Buckets: []Bucket{{0.1, 1}, {1, 2}}},
	}
	if !reflect.DeepEqual(figs, want) {
		t.Fatalf("Read = %+v, want %+v", figs, want)
	}
	b, err := json.Marshal(figs)
	if err != nil {
		t.Fatal(err)
	}
	var back []Figure
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("JSON round trip: %+v, %v", back, err)
	}
	if Lookup("test_currentOffset") != testPartition || Lookup("nope") != nil {
		t.Error("Lookup does not find the families by name")
	}
}

// Flink's identifiers: the REST API's, with the labels' values, and
// its Prometheus reporter's name, the key-value groups' values left to
// labels.
func TestFlinkNames(t *testing.T) {
	for _, c := range []struct {
		f        *Family
		values   []string
		id, prom string
	}{
		{testPartition, []string{"orders", "3"}, "Reader.topic.orders.partition.3.currentOffset", "Reader_topic_partition_currentOffset"},
		{testLagMax, nil, "Reader.Consumer.records-lag-max", "Reader_Consumer_records_lag_max"},
		{testLatency, nil, "test_latency_seconds", "test_latency_seconds"},
	} {
		if got := c.f.FlinkID(c.values); got != c.id {
			t.Errorf("%s: FlinkID = %q, want %q", c.f.Name, got, c.id)
		}
		if got := c.f.FlinkName(); got != c.prom {
			t.Errorf("%s: FlinkName = %q, want %q", c.f.Name, got, c.prom)
		}
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a family name registered twice did not panic")
		}
	}()
	Register(&Family{Name: "test_currentOffset"})
}
