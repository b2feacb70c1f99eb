// Command enrichment joins a stream of orders with a customer table kept
// in a compacted Kafka topic, Kafka to Kafka, exactly once: the customer
// changelog is a table (package table/kafkatable reads its keys, values
// and tombstones), and each order is joined with the version of its
// customer valid at the order's time (table.TemporalJoin: event time, as
// Flink's temporal join; the join's watermark holds an order back until
// the customer table has caught up with it).
//
//	go run ./examples/enrichment                                # embedded broker
//	KAFKA_BROKERS=127.0.0.1:9092 go run ./examples/enrichment   # your broker
//
// With KAFKA_BROKERS unset it starts an embedded Kafka broker in the
// process (franz-go's kfake). It writes the customer changelog and the
// orders, runs the job with a checkpoint every 200 ms and one injected
// failure midway (the job restarts from its latest checkpoint), reads the
// output under read_committed until every order is there, and checks it:
// every order exactly once, with its customer's name and the tier the
// customer had when the order was placed (some customers move from silver
// to gold while orders come in).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/table"
	"github.com/sluicehq/sluice/table/kafkatable"
)

// Customer is a customer's row: the value of the customer table, keyed
// by customer id.
type Customer struct {
	Name, Tier string
}

// customerCodec reads and writes a customer as "name,tier".
type customerCodec struct{}

func (customerCodec) Append(dst []byte, c Customer) ([]byte, error) {
	return fmt.Appendf(dst, "%s,%s", c.Name, c.Tier), nil
}

func (customerCodec) Decode(b []byte) (Customer, error) {
	name, tier, ok := strings.Cut(string(b), ",")
	if !ok {
		return Customer{}, fmt.Errorf("customer %q: want name,tier", b)
	}
	return Customer{Name: name, Tier: tier}, nil
}

// Order is an order of a customer.
type Order struct {
	ID, Customer string
	Amount       int64
}

// Enriched is an order with its customer's name and tier.
type Enriched struct {
	Order
	Name, Tier string
}

// tick is the id of the records that end the input: written to every
// partition of the orders topic with a timestamp past every order, they
// move the watermark past the last orders (an unbounded source's
// watermark follows its records) and are dropped before the join.
const tick = "tick"

func main() {
	orders := flag.Int("orders", 600, "orders to write")
	interval := flag.Duration("interval", 200*time.Millisecond, "checkpoint interval")
	flag.Parse()
	if err := run(*orders, *interval); err != nil {
		fmt.Fprintf(os.Stderr, "enrichment: %v\n", err)
		os.Exit(1)
	}
}

const customers = 40

func customerName(i int) string { return fmt.Sprintf("customer-%02d", i) }

func run(numOrders int, interval time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	fmt.Println("Sluice enrichment: orders x customer table (temporal join, event time) -> Kafka, exactly once.")
	var seeds []string
	if v := strings.TrimSpace(os.Getenv("KAFKA_BROKERS")); v != "" {
		seeds = strings.Split(v, ",")
	} else {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return fmt.Errorf("start the embedded broker: %w", err)
		}
		defer c.Close()
		seeds = c.ListenAddrs()
		fmt.Printf("KAFKA_BROKERS is unset: started an embedded Kafka broker (franz-go kfake) at %s.\n", strings.Join(seeds, ","))
	}
	suffix := randomSuffix()
	ordersTopic, customersTopic, output := "orders-"+suffix, "customers-"+suffix, "enriched-"+suffix
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer admCl.Close()
	compact := "compact"
	for _, t := range []string{ordersTopic, customersTopic, output} {
		var conf map[string]*string
		if t == customersTopic {
			conf = map[string]*string{"cleanup.policy": &compact}
		}
		if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 2, 1, conf, t); err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}

	chkDir, err := os.MkdirTemp("", "sluice-enrichment-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(chkDir)
	env := sluice.NewEnvironment(
		sluice.WithJobName("enrichment"),
		sluice.WithParallelism(2),
		sluice.WithLogger(log),
		sluice.WithCheckpointing(interval, chkDir),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(3, 100*time.Millisecond)),
	)
	if err := addPipeline(env, seeds, ordersTopic, customersTopic, output, "enrichment-"+suffix, int64(numOrders/2), log); err != nil {
		return err
	}
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		return err
	}
	defer func() {
		job.Cancel()
		_ = job.Wait()
	}()

	// The changelog (every customer, then gold for every third, some while
	// orders come in) and the orders, interleaved as live topics would
	// get them, each a millisecond after the one before: an order's tier
	// is the one its customer had at the order's time.
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer prod.Close()
	partition := func(key string) int32 { n, _ := strconv.Atoi(key); return int32(n % 2) }
	start := time.Now().Add(-time.Minute)
	var recs []*kgo.Record
	add := func(topic, key, value string) {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: partition(key), Key: []byte(key), Value: []byte(value),
			Timestamp: start.Add(time.Duration(len(recs)) * time.Millisecond)})
	}
	for i := range customers {
		add(customersTopic, strconv.Itoa(i), customerName(i)+",silver")
	}
	want := map[string]wantOrder{}
	gold := map[int]bool{}
	for i := range numOrders {
		c := i * 7 % customers
		id := fmt.Sprintf("o%04d", i)
		tier := "silver"
		if gold[c] {
			tier = "gold"
		}
		want[id] = wantOrder{customer: strconv.Itoa(c), tier: tier}
		add(ordersTopic, strconv.Itoa(c), fmt.Sprintf("%s,%d,%d", id, c, i%90+10))
		if i%(numOrders/customers+1) == 0 && i/customers < customers && (i/customers)%3 == 0 {
			cid := i / customers
			gold[cid] = true
			add(customersTopic, strconv.Itoa(cid), customerName(cid)+",gold")
		}
	}
	end := start.Add(time.Duration(len(recs))*time.Millisecond + time.Second)
	for p := range int32(2) {
		recs = append(recs, &kgo.Record{Topic: ordersTopic, Partition: p, Value: []byte(tick + ",0,0"), Timestamp: end})
	}
	go func() {
		for _, r := range recs {
			if ctx.Err() != nil {
				return
			}
			prod.Produce(ctx, r, nil)
			time.Sleep(time.Millisecond)
		}
	}()
	fmt.Printf("Writing %d customers and %d orders; checkpoints every %v, one failure injected at order %d.\n", customers, numOrders, interval, numOrders/2)

	got, err := consumeCommitted(ctx, seeds, output, numOrders, job)
	if err != nil {
		return err
	}
	job.Cancel()
	if err := job.Wait(); err != nil && !errors.Is(err, sluice.ErrJobCanceled) {
		return fmt.Errorf("job: %w", err)
	}
	return check(got, want, job.Restarts())
}

// addPipeline adds the job to env: the orders read from their topic with
// event time (the Kafka record's timestamp), the customer changelog read
// as a table from its compacted topic, each order joined with the version
// of its customer valid at the order's time, and the result written to
// output in Kafka transactions (the transactional ids start with
// txnPrefix). Its failAt-th order fails the job once (0: never), to show a
// restart. Orders with the id tick end the input: they move the watermark
// and are dropped before the join. The program and its tests build the
// job with it.
func addPipeline(env *sluice.Environment, seeds []string, ordersTopic, customersTopic, output, txnPrefix string, failAt int64, log *slog.Logger) error {
	orderSrc, err := kafkasource.NewSource(seeds, kafkasource.Topics(ordersTopic), func(r *kgo.Record) (Order, error) {
		f := strings.Split(string(r.Value), ",")
		if len(f) != 3 {
			return Order{}, fmt.Errorf("order %q: want id,customer,amount", r.Value)
		}
		amount, err := strconv.ParseInt(f[2], 10, 64)
		return Order{ID: f[0], Customer: f[1], Amount: amount}, err
	}, kafkasource.Logger(log))
	if err != nil {
		return err
	}
	// Event time is the Kafka record's timestamp.
	orderStream := sluice.FromSource(env, orderSrc, sluice.ForBoundedOutOfOrderness[Order](100*time.Millisecond), "orders", sluice.UID("orders"))
	// One injected failure, midway: the job restarts from its latest
	// checkpoint and the output stays exactly once.
	var seen, failed atomic.Int64
	orderStream = sluice.Filter(orderStream, func(o Order) (bool, error) {
		if o.ID == tick {
			return false, nil
		}
		if seen.Add(1) == failAt && failed.Add(1) == 1 {
			return false, fmt.Errorf("injected failure at order %s", o.ID)
		}
		return true, nil
	}, sluice.UID("maybe-fail"))
	// [start tables]
	customerSrc, err := kafkatable.NewSource(seeds, customersTopic, codec.String{}, customerCodec{}, kafkasource.Logger(log))
	if err != nil {
		return err
	}
	// The customer table changes seldom: a partition without news for a
	// while is idle, so it does not hold the orders back.
	customerTable := table.FromChangelog(sluice.FromSource(env, customerSrc,
		sluice.ForBoundedOutOfOrderness[table.Change[string, Customer]](100*time.Millisecond).WithIdleness(300*time.Millisecond),
		"customers", sluice.UID("customers")))
	enriched := table.TemporalJoin(orderStream, func(o Order) string { return o.Customer }, customerTable.Versioned(0),
		func(o Order, c Customer) (Enriched, error) {
			return Enriched{Order: o, Name: c.Name, Tier: c.Tier}, nil
		},
		sluice.UID("enrich"))
	// [end tables]
	snk, err := kafkasink.NewSink(seeds, func(e Enriched) (*kgo.Record, error) {
		return &kgo.Record{Topic: output, Key: []byte(e.ID), Value: []byte(e.Customer + "," + e.Name + "," + e.Tier)}, nil
	}, kafkasink.TransactionalIDPrefix(txnPrefix), kafkasink.Logger(log))
	if err != nil {
		return err
	}
	sluice.SinkTo(enriched, snk, sluice.UID("output"))
	return nil
}

// consumeCommitted reads topic under read_committed until it holds n
// records (and a moment more, to see any duplicate), and returns them.
func consumeCommitted(ctx context.Context, seeds []string, topic string, n int, job *sluice.Job) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var got []*kgo.Record
	for extra := 0; len(got) < n || extra < 3; {
		if len(got) >= n {
			extra++ // three more polls after the last order: duplicates would show
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		select {
		case <-job.Done():
			return nil, fmt.Errorf("the job ended before every order was enriched: %w", job.Wait())
		default:
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d enriched orders visible: %w", len(got), n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	return got, nil
}

// wantOrder is what an order must be enriched with.
type wantOrder struct{ customer, tier string }

// check verifies the output: every order exactly once, with its
// customer's id and name, and the tier the customer had at the order's
// time.
func check(got []*kgo.Record, want map[string]wantOrder, restarts int64) error {
	count := map[string]int{}
	tiers := map[string]int{}
	for _, r := range got {
		id := string(r.Key)
		count[id]++
		f := strings.Split(string(r.Value), ",")
		w, ok := want[id]
		if !ok || len(f) != 3 {
			return fmt.Errorf("unexpected output record %s=%s", r.Key, r.Value)
		}
		ci, _ := strconv.Atoi(w.customer)
		if f[0] != w.customer || f[1] != customerName(ci) {
			return fmt.Errorf("order %s enriched as %s, want customer %s (%s)", id, r.Value, w.customer, customerName(ci))
		}
		if f[2] != w.tier {
			return fmt.Errorf("order %s enriched with tier %s, but its customer was %s at the order's time", id, f[2], w.tier)
		}
		tiers[f[2]]++
	}
	for id := range want {
		if count[id] != 1 {
			return fmt.Errorf("order %s is in the output %d times, want once", id, count[id])
		}
	}
	if restarts < 1 {
		return fmt.Errorf("the job restarted %d times; the injected failure did not happen", restarts)
	}
	fmt.Printf("Exactly once: all %d orders enriched once each, with the tier of their time (%v), across %d restart(s).\n", len(want), tiers, restarts)
	return nil
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
