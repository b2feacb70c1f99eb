// Command avroproto reads Avro orders from Kafka and writes Protobuf
// totals, both in the Confluent wire format with their schemas in a
// Schema Registry, exactly once.
//
//	go run ./examples/avroproto
//
// It starts an embedded Kafka broker (franz-go's kfake) and an in-process
// Schema Registry (franz-go's srfake), writes Avro orders (customer,
// amount) to an input topic, registering the Avro schema, and runs a job:
// Avro decoder -> key by customer -> running count and sum per customer
// in keyed state -> Protobuf Total (a dynamic message whose descriptor is
// built in Go: no protoc needed) -> exactly-once Kafka sink, registering
// the .proto schema. The source is bounded, so the job ends by itself.
// Then a read_committed consumer decodes the output with the registry and
// checks it: for every customer the totals 1..n once each, in order, with
// the running sums of its orders.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/formats/avro"
	"github.com/sluicehq/sluice/formats/protobuf"
	"github.com/sluicehq/sluice/formats/registry"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
)

// orderSchema is the Avro schema of the input records.
const orderSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"customer","type":"string"},
 {"name":"amount_cents","type":"long"}]}`

// Order is one input record.
type Order struct {
	Customer    string `avro:"customer"`
	AmountCents int64  `avro:"amount_cents"`
}

// Running is the keyed state of a customer, and what the job emits.
type Running struct {
	Customer string
	Orders   int64
	Cents    int64
}

// totalDescriptor builds shop/total.proto in Go:
//
//	message Total { string customer = 1; int64 orders = 2; int64 cents = 3; }
func totalDescriptor() (protoreflect.MessageDescriptor, error) {
	field := func(name string, n int32, t descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: t.Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String(name)}
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("shop/total.proto"), Package: proto.String("shop"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Total"), Field: []*descriptorpb.FieldDescriptorProto{
			field("customer", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING),
			field("orders", 2, descriptorpb.FieldDescriptorProto_TYPE_INT64),
			field("cents", 3, descriptorpb.FieldDescriptorProto_TYPE_INT64),
		}}},
	}, nil)
	if err != nil {
		return nil, err
	}
	return fd.Messages().ByName("Total"), nil
}

// runningTotals keeps each customer's count and sum in keyed state.
type runningTotals struct{ acc state.ValueState[Running] }

func (r *runningTotals) Open(ctx *sluice.OperatorContext) error {
	var err error
	r.acc, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[Running]{Name: "running"})
	return err
}

func (r *runningTotals) ProcessElement(ctx *sluice.KeyedContext[string], o Order, out sluice.Collector[Running]) error {
	acc, _, err := r.acc.Value()
	if err != nil {
		return err
	}
	acc.Customer, acc.Orders, acc.Cents = ctx.Key(), acc.Orders+1, acc.Cents+o.AmountCents
	if err := r.acc.Update(acc); err != nil {
		return err
	}
	out.Collect(acc)
	return nil
}

// orders is the input: n orders of a few customers, deterministic.
func orders(n int) []Order {
	customers := []string{"ada", "bo", "cleo", "dev", "eli", "fay"}
	out := make([]Order, n)
	for i := range out {
		out[i] = Order{Customer: customers[(i*5+i/7)%len(customers)], AmountCents: int64(100 + (i*37)%900)}
	}
	return out
}

func main() {
	if err := run(context.Background(), 300, 200*time.Millisecond); err != nil {
		fmt.Fprintf(os.Stderr, "avroproto: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int, interval time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return fmt.Errorf("start the embedded broker: %w", err)
	}
	defer cluster.Close()
	seeds := cluster.ListenAddrs()
	fake := srfake.New()
	defer fake.Close()
	fmt.Printf("Embedded Kafka broker at %v, in-process Schema Registry at %s.\n", seeds, fake.URL())

	// [start serdes]
	reg, err := registry.NewClient(fake.URL())
	if err != nil {
		return err
	}
	const input, output = "orders", "totals"
	in, err := avro.New[Order](reg, orderSchema, registry.Topic(input))
	if err != nil {
		return err
	}
	md, err := totalDescriptor()
	if err != nil {
		return err
	}
	out, err := protobuf.NewDynamic(reg, md, registry.Topic(output))
	if err != nil {
		return err
	}
	// [end serdes]

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, t := range []string{input, output} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, t); err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	orderList := orders(n)
	var recs []*kgo.Record
	for _, o := range orderList {
		b, err := in.Append(nil, o)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Topic: input, Key: []byte(o.Customer), Value: b})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("write the orders: %w", err)
	}
	fmt.Printf("Wrote %d Avro orders to %s (subject orders-value).\n", n, input)

	chkDir, err := os.MkdirTemp("", "sluice-avroproto-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(chkDir)
	env := sluice.NewEnvironment(sluice.WithJobName("avroproto"), sluice.WithParallelism(2), sluice.WithLogger(log),
		sluice.WithCheckpointing(interval, chkDir))
	// [start source]
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics(input), in.Decoder(),
		kafkasource.Bounded(), kafkasource.Logger(log))
	// [end source]
	if err != nil {
		return err
	}
	totals := sluice.Process[string, Order, Running](
		sluice.KeyBy(sluice.FromSource(env, src, sluice.NoWatermarks[Order](), "orders", sluice.UID("orders")),
			func(o Order) string { return o.Customer }),
		&runningTotals{}, sluice.Name("running totals"), sluice.UID("totals"))
	toProto := out.Serializer(output, func(*dynamicpb.Message) []byte { return nil })
	snk, err := kafkasink.NewSink(seeds, func(r Running) (*kgo.Record, error) {
		m := dynamicpb.NewMessage(md)
		m.Set(md.Fields().ByName("customer"), protoreflect.ValueOfString(r.Customer))
		m.Set(md.Fields().ByName("orders"), protoreflect.ValueOfInt64(r.Orders))
		m.Set(md.Fields().ByName("cents"), protoreflect.ValueOfInt64(r.Cents))
		rec, err := toProto(m)
		if err == nil {
			rec.Key = []byte(r.Customer)
		}
		return rec, err
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix("avroproto"), kafkasink.Logger(log))
	if err != nil {
		return err
	}
	sluice.SinkTo(totals, snk, sluice.Name("totals"), sluice.UID("sink"))
	start := time.Now()
	if err := env.Execute(ctx); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	fmt.Printf("The job read every order and ended in %v.\n", time.Since(start).Round(time.Millisecond))

	got, err := readTotals(ctx, seeds, output, n, out, md)
	if err != nil {
		return err
	}
	return check(got, orderList)
}

// readTotals reads n Protobuf totals under read_committed, decoded by the
// registry serde, per customer in the order read.
func readTotals(ctx context.Context, seeds []string, topic string, n int, out *registry.Serde[*dynamicpb.Message], md protoreflect.MessageDescriptor) (map[string][]Running, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got := map[string][]Running{}
	seen := 0
	var decErr error
	for seen < n && decErr == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d totals visible: %w", seen, n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			m, err := out.Decode(r.Value)
			if err != nil {
				decErr = errors.Join(decErr, err)
				return
			}
			t := Running{Customer: m.Get(md.Fields().ByName("customer")).String(),
				Orders: m.Get(md.Fields().ByName("orders")).Int(), Cents: m.Get(md.Fields().ByName("cents")).Int()}
			got[t.Customer] = append(got[t.Customer], t)
			seen++
		})
	}
	if decErr != nil {
		return nil, fmt.Errorf("an output record does not decode: %w", decErr)
	}
	// Anything past the n totals would be a duplicate.
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if extra := cl.PollFetches(pctx).NumRecords(); extra > 0 {
		return nil, fmt.Errorf("%d records beyond the %d totals", extra, n)
	}
	return got, nil
}

// check compares the totals with the running counts and sums computed
// from the input directly.
func check(got map[string][]Running, in []Order) error {
	want := map[string][]Running{}
	for _, o := range in {
		prev := Running{Customer: o.Customer}
		if w := want[o.Customer]; len(w) > 0 {
			prev = w[len(w)-1]
		}
		want[o.Customer] = append(want[o.Customer], Running{o.Customer, prev.Orders + 1, prev.Cents + o.AmountCents})
	}
	if len(got) != len(want) {
		return fmt.Errorf("totals for %d customers, want %d", len(got), len(want))
	}
	names := make([]string, 0, len(want))
	for c := range want {
		names = append(names, c)
	}
	slices.Sort(names)
	for _, c := range names {
		w := want[c]
		if !slices.Equal(got[c], w) {
			return fmt.Errorf("customer %s: totals %v, want %v", c, got[c], w)
		}
		last := w[len(w)-1]
		fmt.Printf("  %-5s %3d orders, %8.2f in total\n", c, last.Orders, float64(last.Cents)/100)
	}
	fmt.Printf("Exactly once: every customer's Protobuf totals are 1..n once each, in order, with the right sums (%d records).\n", len(in))
	return nil
}
