package runner

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testutil"
)

// promValue returns the value of the first series of name in a
// Prometheus text exposition whose labels include every one of labels
// (`key="value"`).
func promValue(body, name string, labels ...string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		set, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(","+set+",", ","+l+",")
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); all && err == nil {
			return v, true
		}
	}
	return 0, false
}

// A Kafka-to-Kafka job whose program wires no metrics: the source's
// records lag, pending records and offsets and the sink's figures are on
// /metrics and in the REST API's vertex metrics, by the runtime alone.
// The job reads 30 of the topic's 100 records and then stops taking
// more (its map waits): the lag is the 70 left.
func TestConnectorMetricsWithoutWiring(t *testing.T) {
	const records, taken, job = 100, 30, "connector-metrics"
	ctx := testutil.Context(t, testutil.SafetyNet)
	seeds := testutil.KafkaCluster(t, 1, "in", "out")
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	batch := make([]*kgo.Record, records)
	for i := range batch {
		batch[i] = &kgo.Record{Topic: "in", Value: []byte(strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	env, src, snk := kafkaJob(t, seeds, map[string]string{"pipeline.name": job, "parallelism.default": "1"})
	release := make(chan struct{})
	n := 0
	held := sluice.Map(sluice.FromSource(env, src, sluice.NoWatermarks[string](), "orders", sluice.UID("orders")), func(s string) (string, error) {
		// Chained with the source: while this waits, the reader emits
		// nothing more.
		if n++; n > taken {
			<-release
		}
		return s, nil
	}, sluice.Name("hold"))
	sluice.SinkTo(held, snk, sluice.Name("out"), sluice.UID("out"))

	jobCtx, suspend := context.WithCancel(ctx)
	defer suspend()
	st, done := start(t, jobCtx, env)
	defer func() {
		close(release)
		suspend()
		if err := <-done; !errors.Is(err, sluice.ErrJobSuspended) {
			t.Errorf("Run after ctx was cancelled: %v, want ErrJobSuspended", err)
		}
	}()

	const left = records - taken
	src0 := []string{`job_name="` + job + `"`, `subtask="0"`, `operator="orders"`}
	part0 := append([]string{`topic="in"`, `partition="0"`}, src0...)
	var body string
	testutil.Await(t, "the records lag on /metrics", func() bool {
		_, body = get(t, st.APIURL+"/metrics")
		v, ok := promValue(body, "sluice_kafka_source_records_lag_max", src0...)
		return ok && v == left
	})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sluice_kafka_source_pendingRecords", src0, left},
		{"sluice_kafka_source_recordsLag", part0, left},
		{"sluice_kafka_source_currentOffset", part0, taken},
		{"sluice_kafka_source_highWatermark", part0, records},
		{"sluice_kafka_sink_transactionsCommitted", []string{`job_name="` + job + `"`, `subtask="0"`, `operator="out"`}, 0},
	} {
		if v, ok := promValue(body, c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %t), want %v", c.name, c.labels, v, ok, c.want)
		}
	}

	// The REST API: the same figures under Flink's metric ids.
	c := api.NewClient(st.APIURL, "")
	info, err := c.Job(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	vid := ""
	for _, v := range info.Vertices {
		if strings.HasPrefix(v.Name, "orders") {
			vid = v.ID
		}
	}
	if vid == "" {
		t.Fatalf("no vertex of the source in %+v", info.Vertices)
	}
	ids := []string{"0.orders.KafkaSourceReader.KafkaConsumer.records-lag-max", "0.orders.pendingRecords",
		"0.orders.KafkaSourceReader.topic.in.partition.0.currentOffset", "0.orders.KafkaSourceReader.topic.in.partition.0.records-lag"}
	want := map[string]string{ids[0]: strconv.Itoa(left), ids[1]: strconv.Itoa(left), ids[2]: strconv.Itoa(taken), ids[3]: strconv.Itoa(left)}
	_, listed := get(t, st.APIURL+"/jobs/"+job+"/vertices/"+vid+"/metrics")
	for _, id := range ids {
		if !strings.Contains(listed, `"`+id+`"`) {
			t.Errorf("the vertex's metrics do not list %s: %s", id, listed)
		}
	}
	_, answer := get(t, st.APIURL+"/jobs/"+job+"/vertices/"+vid+"/metrics?get="+url.QueryEscape(strings.Join(ids, ",")))
	var got []api.Metric
	if err := json.Unmarshal([]byte(answer), &got); err != nil {
		t.Fatalf("%v: %s", err, answer)
	}
	for _, m := range got {
		if m.Value == nil || *m.Value != want[m.ID] {
			t.Errorf("%s = %v, want %s", m.ID, m.Value, want[m.ID])
		}
		delete(want, m.ID)
	}
	if len(want) > 0 {
		t.Errorf("not answered: %v (answer %s)", want, answer)
	}
}
