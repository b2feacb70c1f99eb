package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/kafkatest"
)

// The whole job on a Kafka cluster (embedded; a real one with
// SLUICE_TEST_KAFKA=real), crashed twice, each time 100 orders after its
// start: every order comes out once,
// with its customer's name and the tier the customer had at the order's
// time (every third customer turns gold after its first orders). Both
// crashes come before the end of the input, whose last records move the
// watermark: as in Flink, a source's watermark starts over after a
// restore and moves only with records read after it, so a job restored
// past the end of a finite input would wait for more.
func TestEnrichmentExactlyOnce(t *testing.T) {
	const numOrders = 300
	k := kafkatest.Start(t)
	ordersTopic, customersTopic, out := k.Topic(t, "orders", 2), k.Topic(t, "customers", 2), k.Topic(t, "enriched", 2)
	base := time.Now().Add(-time.Minute)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	var custs, orders []*kgo.Record
	for i := range customers {
		custs = append(custs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(customerName(i) + ",silver"), Timestamp: at(0)})
	}
	var want []string
	for i := range numOrders {
		c := i * 7 % customers
		id := fmt.Sprintf("o%04d", i)
		tier := "silver"
		if c%3 == 0 && i >= numOrders/2 {
			tier = "gold"
		}
		orders = append(orders, &kgo.Record{Key: []byte(strconv.Itoa(c)), Value: fmt.Appendf(nil, "%s,%d,%d", id, c, i%90+10), Timestamp: at(10 + 10*i)})
		want = append(want, fmt.Sprintf("%s,%d,%s,%s", id, c, customerName(c), tier))
	}
	for c := 0; c < customers; c += 3 { // gold from the middle of the orders on
		custs = append(custs, &kgo.Record{Key: []byte(strconv.Itoa(c)), Value: []byte(customerName(c) + ",gold"), Timestamp: at(10 + 10*numOrders/2 - 5)})
	}
	for c := range customers { // one tick per key: every partition of the orders gets one
		orders = append(orders, &kgo.Record{Key: []byte(strconv.Itoa(c)), Value: []byte(tick + ",0,0"), Timestamp: at(10*numOrders + 2000)})
	}
	k.Produce(t, customersTopic, custs...)
	k.Produce(t, ordersTopic, orders...)
	reader := k.CommittedReader(t, out)
	committed := func() []string {
		var got []string
		for _, r := range reader.Read() {
			got = append(got, fmt.Sprintf("%s,%s", r.Key, r.Value)) // id,customer,name,tier
		}
		return got
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := sluicetest.RunJob(t, func(env *sluice.Environment) error {
		return addPipeline(env, k.Seeds(), ordersTopic, customersTopic, out, out, 0, quiet)
	},
		sluicetest.Checkpointing(30*time.Millisecond),
		sluicetest.JobOptions(sluice.WithParallelism(2)),
		sluicetest.CrashAt(sluicetest.AfterRecords("orders", 100), sluicetest.AfterRecords("orders", 100)),
		sluicetest.Until(func() bool { return len(committed()) >= numOrders }))
	t.Logf("%d runs: %v", run.Runs, run.Crashes)
	sluicetest.AssertExactlyOnce(t, committed(), want)
}

// The program itself runs to its end on the embedded broker, through its
// injected failure, and its own exactly-once check of the output passes.
func TestEnrichmentProgram(t *testing.T) {
	t.Setenv("KAFKA_BROKERS", "")
	os.Unsetenv("KAFKA_BROKERS")
	if err := run(300, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
