package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/kafkatest"
	"github.com/sluicehq/sluice/state"
)

func enrichHarness(t *testing.T, opts ...sluicetest.Option) *sluicetest.TwoInputHarness[Order, Customer, Enriched] {
	return sluicetest.KeyedCoProcess(t, func(o Order) string { return o.Customer }, func(c Customer) string { return c.ID },
		sluice.KeyedCoProcessFunction[string, Order, Customer, Enriched](&enrich{}),
		append(opts, sluicetest.WithOperatorOptions(sluice.UID("enrich")))...)
}

// The enrich function in a harness: an order waits in keyed state for
// its customer and goes out when the customer arrives; later orders take
// the customer's latest version; the waiting order survives a snapshot.
func TestEnrich(t *testing.T) {
	h := enrichHarness(t, sluicetest.WithParallelism(2))
	h.ProcessElement1(Order{ID: "o1", Customer: "7", Amount: 10}, sluicetest.NoTimestamp)
	if got := h.Values(); len(got) != 0 {
		t.Fatalf("enriched before the customer came: %v", got)
	}
	waiting := sluicetest.List(h, "7", state.ListStateDescriptor[Order]{Name: "waiting-orders"})
	if len(waiting) != 1 || waiting[0].ID != "o1" {
		t.Fatalf("waiting orders of customer 7: %v", waiting)
	}
	r := enrichHarness(t, sluicetest.RestoreFrom(h.Snapshot().Path), sluicetest.WithParallelism(3))
	r.ProcessElement2(Customer{ID: "7", Name: "Ann", Tier: "silver"}, sluicetest.NoTimestamp)
	r.ProcessElement2(Customer{ID: "7", Name: "Ann", Tier: "gold"}, sluicetest.NoTimestamp)
	r.ProcessElement1(Order{ID: "o2", Customer: "7", Amount: 20}, sluicetest.NoTimestamp)
	want := []Enriched{
		{Order: Order{ID: "o1", Customer: "7", Amount: 10}, Name: "Ann", Tier: "silver"},
		{Order: Order{ID: "o2", Customer: "7", Amount: 20}, Name: "Ann", Tier: "gold"},
	}
	if got := r.Values(); !slices.Equal(got, want) {
		t.Fatalf("enriched %v, want %v", got, want)
	}
	if got := sluicetest.List(r, "7", state.ListStateDescriptor[Order]{Name: "waiting-orders"}); len(got) != 0 {
		t.Fatalf("orders still waiting: %v", got)
	}
}

// The whole job on a Kafka cluster (embedded; a real one with
// SLUICE_TEST_KAFKA=real), crashed after 100 orders and at its first
// checkpoint after that, before the commit: every order comes out once,
// with its customer's name.
func TestEnrichmentExactlyOnce(t *testing.T) {
	const numOrders = 300
	k := kafkatest.Start(t)
	ordersTopic, customersTopic, out := k.Topic(t, "orders", 2), k.Topic(t, "customers", 2), k.Topic(t, "enriched", 2)
	var custs, orders []*kgo.Record
	for i := range customers {
		custs = append(custs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(customerName(i) + ",silver")})
	}
	var want []string
	for i := range numOrders {
		c := i * 7 % customers
		id := fmt.Sprintf("o%04d", i)
		orders = append(orders, &kgo.Record{Key: []byte(strconv.Itoa(c)), Value: fmt.Appendf(nil, "%s,%d,%d", id, c, i%90+10)})
		want = append(want, fmt.Sprintf("%s,%d,%s", id, c, customerName(c)))
	}
	k.Produce(t, ordersTopic, orders...) // the orders first: most wait for their customer
	k.Produce(t, customersTopic, custs...)
	reader := k.CommittedReader(t, out)
	committed := func() []string {
		var got []string
		for _, r := range reader.Read() {
			f := strings.Split(string(r.Value), ",") // customer,name,tier
			got = append(got, fmt.Sprintf("%s,%s,%s", r.Key, f[0], f[1]))
		}
		return got
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := sluicetest.RunJob(t, func(env *sluice.Environment) error {
		return addPipeline(env, k.Seeds(), ordersTopic, customersTopic, out, out, 0, quiet)
	},
		sluicetest.Checkpointing(30*time.Millisecond),
		sluicetest.JobOptions(sluice.WithParallelism(2)),
		sluicetest.CrashAt(sluicetest.AfterRecords("orders", 100), sluicetest.AtCheckpoint(1)),
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
