// Command enrichment joins a stream of orders with a customer changelog
// held in keyed state, Kafka to Kafka, exactly once: the two topics are
// keyed by customer id and connected (sluice.ConnectKeyed +
// KeyedCoProcess); the customer side keeps the latest version of each
// customer in keyed state, the order side enriches each order with it, or
// keeps the order in keyed state until its customer arrives.
//
//	go run ./examples/enrichment                                # embedded broker
//	KAFKA_BROKERS=127.0.0.1:9092 go run ./examples/enrichment   # your broker
//
// With KAFKA_BROKERS unset it starts an embedded Kafka broker in the
// process (franz-go's kfake). It writes the customer changelog and the
// orders, runs the job with a checkpoint every 200 ms and one injected
// failure midway (the job restarts from its latest checkpoint), reads the
// output under read_committed until every order is there, and checks it:
// every order exactly once, with its customer's name.
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
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
)

// Customer is a changelog record: the latest version of a customer.
type Customer struct {
	ID, Name, Tier string
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

// enrich keeps each customer's latest version in keyed state and enriches
// the orders of that customer; orders that arrive before their customer
// wait in keyed state.
type enrich struct {
	customer state.ValueState[Customer]
	waiting  state.ListState[Order]
}

func (e *enrich) Open(ctx *sluice.OperatorContext) error {
	var err error
	if e.customer, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[Customer]{Name: "customer"}); err != nil {
		return err
	}
	e.waiting, err = state.GetListState(ctx.KeyedState, state.ListStateDescriptor[Order]{Name: "waiting-orders"})
	return err
}

// ProcessElement1 takes an order.
func (e *enrich) ProcessElement1(_ *sluice.KeyedContext[string], o Order, out sluice.Collector[Enriched]) error {
	c, ok, err := e.customer.Value()
	if err != nil {
		return err
	}
	if !ok {
		return e.waiting.Add(o)
	}
	out.Collect(Enriched{Order: o, Name: c.Name, Tier: c.Tier})
	return nil
}

// ProcessElement2 takes a changelog record.
func (e *enrich) ProcessElement2(_ *sluice.KeyedContext[string], c Customer, out sluice.Collector[Enriched]) error {
	if err := e.customer.Update(c); err != nil {
		return err
	}
	waiting, err := e.waiting.Get()
	if err != nil {
		return err
	}
	for _, o := range waiting {
		out.Collect(Enriched{Order: o, Name: c.Name, Tier: c.Tier})
	}
	return e.waiting.Clear()
}

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

	fmt.Println("Sluice enrichment: orders x customer changelog (keyed co-process, keyed state) -> Kafka, exactly once.")
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
	for _, t := range []string{ordersTopic, customersTopic, output} {
		if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 2, 1, nil, t); err != nil {
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

	// The changelog (every customer, then a new tier for every third) and
	// the orders, interleaved as live topics would get them.
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer prod.Close()
	var recs []*kgo.Record
	for i := range customers {
		recs = append(recs, &kgo.Record{Topic: customersTopic, Key: []byte(strconv.Itoa(i)), Value: []byte(customerName(i) + ",silver")})
	}
	want := map[string]string{} // order id -> customer id
	for i := range numOrders {
		c := strconv.Itoa(i * 7 % customers)
		id := fmt.Sprintf("o%04d", i)
		want[id] = c
		recs = append(recs, &kgo.Record{Topic: ordersTopic, Key: []byte(c), Value: fmt.Appendf(nil, "%s,%s,%d", id, c, i%90+10)})
		if i%(numOrders/customers+1) == 0 && i/customers < customers && (i/customers)%3 == 0 {
			cid := i / customers
			recs = append(recs, &kgo.Record{Topic: customersTopic, Key: []byte(strconv.Itoa(cid)), Value: []byte(customerName(cid) + ",gold")})
		}
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

// addPipeline adds the job to env: the orders and the customer changelog
// read from their topics, keyed by customer and connected, enriched, and
// written to output in Kafka transactions (the transactional ids start
// with txnPrefix). Its failAt-th order fails the job once (0: never), to
// show a restart. The program and its tests build the job with it.
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
	customerSrc, err := kafkasource.NewSource(seeds, kafkasource.Topics(customersTopic), func(r *kgo.Record) (Customer, error) {
		f := strings.Split(string(r.Value), ",")
		if len(f) != 2 {
			return Customer{}, fmt.Errorf("customer %q: want name,tier", r.Value)
		}
		return Customer{ID: string(r.Key), Name: f[0], Tier: f[1]}, nil
	}, kafkasource.Logger(log))
	if err != nil {
		return err
	}
	orderStream := sluice.FromSource(env, orderSrc, sluice.NoWatermarks[Order](), "orders", sluice.UID("orders"))
	// One injected failure, midway: the job restarts from its latest
	// checkpoint and the output stays exactly once.
	var seen, failed atomic.Int64
	orderStream = sluice.Map(orderStream, func(o Order) (Order, error) {
		if seen.Add(1) == failAt && failed.Add(1) == 1 {
			return o, fmt.Errorf("injected failure at order %s", o.ID)
		}
		return o, nil
	}, sluice.UID("maybe-fail"))
	customerStream := sluice.FromSource(env, customerSrc, sluice.NoWatermarks[Customer](), "customers", sluice.UID("customers"))
	enriched := sluice.KeyedCoProcess(sluice.ConnectKeyed(
		sluice.KeyBy(orderStream, func(o Order) string { return o.Customer }),
		sluice.KeyBy(customerStream, func(c Customer) string { return c.ID })),
		sluice.KeyedCoProcessFunction[string, Order, Customer, Enriched](&enrich{}), sluice.UID("enrich"))
	snk, err := kafkasink.NewSink(seeds, func(e Enriched) (*kgo.Record, error) {
		return &kgo.Record{Topic: output, Key: []byte(e.ID), Value: []byte(e.Customer + "," + e.Name + "," + e.Tier)}, nil
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(txnPrefix), kafkasink.Logger(log))
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

// check verifies the output: every order exactly once, with its
// customer's id and name.
func check(got []*kgo.Record, want map[string]string, restarts int64) error {
	count := map[string]int{}
	tiers := map[string]int{}
	for _, r := range got {
		id := string(r.Key)
		count[id]++
		f := strings.Split(string(r.Value), ",")
		c, ok := want[id]
		if !ok || len(f) != 3 {
			return fmt.Errorf("unexpected output record %s=%s", r.Key, r.Value)
		}
		ci, _ := strconv.Atoi(c)
		if f[0] != c || f[1] != customerName(ci) {
			return fmt.Errorf("order %s enriched as %s, want customer %s (%s)", id, r.Value, c, customerName(ci))
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
	fmt.Printf("Exactly once: all %d orders enriched once each (tiers %v) across %d restart(s).\n", len(want), tiers, restarts)
	return nil
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
