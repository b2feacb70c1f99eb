package integration

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/formats/avro"
	"github.com/sluicehq/sluice/formats/jsonschema"
	"github.com/sluicehq/sluice/formats/protobuf"
	"github.com/sluicehq/sluice/formats/registry"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
)

// registryURL returns SCHEMA_REGISTRY_URL; when it is unset the test is
// skipped with directions, or fails when CI=true.
func registryURL(t *testing.T) string {
	t.Helper()
	v := strings.TrimSpace(os.Getenv("SCHEMA_REGISTRY_URL"))
	if v == "" {
		const how = "start one with `scripts/registry start` and export the SCHEMA_REGISTRY_URL=... line it prints, " +
			"or run the tests under scripts/with-registry (make test does)"
		if os.Getenv("CI") == "true" {
			t.Fatalf("SCHEMA_REGISTRY_URL is unset and CI=true: %s", how)
		}
		t.Skipf("SCHEMA_REGISTRY_URL is unset: %s", how)
	}
	return v
}

const orderAvro = `{"type":"record","name":"Order","namespace":"sluice.it","fields":[
 {"name":"customer","type":"string"},{"name":"amount","type":"double"}]}`

const orderJSONSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"sluice.it.Order","type":"object",
 "properties":{"customer":{"type":"string","minLength":1},"amount":{"type":"number"}},"required":["customer","amount"]}`

const totalAvro = `{"type":"record","name":"Total","namespace":"sluice.it","fields":[
 {"name":"customer","type":"string"},{"name":"orders","type":"long"}]}`

const totalJSONSchema = `{"title":"sluice.it.Total","type":"object",
 "properties":{"customer":{"type":"string"},"orders":{"type":"integer","minimum":1}},"required":["customer","orders"]}`

// Order and Total are the Go shapes of the Avro and JSON Schema records.
type Order struct {
	Customer string  `avro:"customer" json:"customer"`
	Amount   float64 `avro:"amount" json:"amount"`
}

type Total struct {
	Customer string `avro:"customer" json:"customer"`
	Orders   int64  `avro:"orders" json:"orders"`
}

// itProtoFile is sluice/it.proto: message Order {string customer = 1;
// double amount = 2;} message Total {string customer = 1; int64 orders = 2;}
func itProtoFile(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	f := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String(name)}
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("sluice/it.proto"), Package: proto.String("sluice.it"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Order"), Field: []*descriptorpb.FieldDescriptorProto{
				f("customer", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING), f("amount", 2, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE)}},
			{Name: proto.String("Total"), Field: []*descriptorpb.FieldDescriptorProto{
				f("customer", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING), f("orders", 2, descriptorpb.FieldDescriptorProto_TYPE_INT64)}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// countOrders counts the orders of each customer in keyed state.
type countOrders struct{ n state.ValueState[int64] }

func (c *countOrders) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.n, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "orders"})
	return err
}

func (c *countOrders) ProcessElement(ctx *sluice.KeyedContext[string], _ Order, out sluice.Collector[Total]) error {
	n, _, err := c.n.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.n.Update(n); err != nil {
		return err
	}
	out.Collect(Total{Customer: ctx.Key(), Orders: n})
	return nil
}

// registryCase is one pipeline: records of In in one format, counted per
// customer, written out as Out in another.
type registryCase[In, Out any] struct {
	in       *registry.Serde[In]
	toOrder  func(In) Order
	out      *registry.Serde[Out]
	fromOrd  func(Order) In
	toOut    func(Total) Out
	fromOut  func(Out) Total
	shuffled codec.Codec[Order] // the codec of the orders' keyed exchange
}

// runRegistryCase produces orders (plus one record whose schema id the
// registry does not know, skipped by the source's policy), runs the job
// with a checkpoint every 100 ms and the exactly-once sink, and checks
// that a read_committed consumer sees for every customer the totals 1..n
// once each, in order.
func runRegistryCase[In, Out any](t *testing.T, c registryCase[In, Out]) {
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	input, output := createTopic(ctx, t, adm, 2), createTopic(ctx, t, adm, 2)
	customers := []string{"ann", "bob", "cy", "dee", "eve"}
	want := map[string]int{}
	var recs []*kgo.Record
	for i := range 60 {
		o := Order{Customer: customers[(i*7)%len(customers)], Amount: float64(i) + 0.5}
		if i%3 == 0 {
			o.Customer = customers[i%2]
		}
		want[o.Customer]++
		b, err := c.in.AppendTo(nil, input, c.fromOrd(o))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: input, Key: []byte(o.Customer), Value: b})
		if i == 30 {
			recs = append(recs, &kgo.Record{Topic: input, Key: []byte("x"), Value: append(registry.AppendHeader(nil, 987654), 0)})
		}
	}
	if err := newClient(t).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := sluice.NewEnvironment(sluice.WithLogger(quiet), sluice.WithParallelism(2),
		sluice.WithCheckpointing(100*time.Millisecond, t.TempDir()), sluice.WithRestartStrategy(sluice.NoRestart()))
	src, err := kafkasource.NewSource(brokers(t), kafkasource.Topics(input), c.in.Decoder(),
		kafkasource.Bounded(), kafkasource.Logger(quiet), kafkasource.OnBadRecord(kafkasource.SkipBadRecords()))
	if err != nil {
		t.Fatal(err)
	}
	orders := sluice.Map(sluice.FromSource(env, src, sluice.NoWatermarks[In](), "orders", sluice.UID("orders")),
		func(v In) (Order, error) { return c.toOrder(v), nil }, sluice.UID("to-order"), sluice.WithCodec(c.shuffled))
	totals := sluice.Process[string, Order, Total](sluice.KeyBy(orders, func(o Order) string { return o.Customer }),
		&countOrders{}, sluice.UID("count"))
	outSer := c.out.Serializer(output, nil)
	snk, err := kafkasink.NewSink(brokers(t), func(tot Total) (*kgo.Record, error) {
		r, err := outSer(c.toOut(tot))
		if err == nil {
			r.Key = []byte(tot.Customer)
		}
		return r, err
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(uniqueName(t, "registry")),
		kafkasink.TransactionTimeout(15*time.Minute), kafkasink.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	sluice.SinkTo(totals, snk, sluice.UID("out"))
	jctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := env.Execute(jctx); err != nil {
		t.Fatalf("job: %v", err)
	}

	n := 0
	for _, k := range want {
		n += k
	}
	cl := newClient(t, kgo.ConsumeTopics(output), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := map[string][]int64{}
	for seen := 0; seen < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d totals visible: %v", seen, n, ctx.Err())
		}
		var decErr error
		fs.EachRecord(func(r *kgo.Record) {
			v, err := c.out.Decode(r.Value)
			if err != nil {
				decErr = err
				return
			}
			tot := c.fromOut(v)
			got[tot.Customer] = append(got[tot.Customer], tot.Orders)
			seen++
		})
		if decErr != nil {
			t.Fatalf("output record: %v", decErr)
		}
	}
	for cust, k := range want {
		if len(got[cust]) != k {
			t.Fatalf("customer %s: totals %v, want 1..%d", cust, got[cust], k)
		}
		for i, v := range got[cust] {
			if v != int64(i+1) {
				t.Fatalf("customer %s: totals %v, want 1..%d once each in order", cust, got[cust], k)
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("totals for %d customers, want %d", len(got), len(want))
	}
	// Nothing more than the n totals is committed.
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	defer pcancel()
	if extra := cl.PollFetches(pctx).NumRecords(); extra != 0 {
		t.Fatalf("%d records beyond the %d totals", extra, n)
	}
}

// Jobs read records of each format from a real broker, with schemas in a
// real Schema Registry (Apicurio's Confluent-compatible API), keep a
// count per customer and write the totals in another format, exactly
// once: Avro to Protobuf, Protobuf to JSON Schema, JSON Schema to Avro.
// The orders' keyed exchange is encoded by a registry serde too.
func TestRegistryFormatsJob(t *testing.T) {
	url := registryURL(t)
	reg, err := registry.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	fd := itProtoFile(t)
	orderMD, totalMD := fd.Messages().ByName("Order"), fd.Messages().ByName("Total")
	topic := func(p string) registry.SerdeOption { return registry.Topic(uniqueName(t, p)) }
	avroOrders, err := avro.New[Order](reg, orderAvro, topic("shuffle-avro"))
	if err != nil {
		t.Fatal(err)
	}
	avroTotals, err := avro.New[Total](reg, totalAvro)
	if err != nil {
		t.Fatal(err)
	}
	jsonOrders, err := jsonschema.New[Order](reg, orderJSONSchema, topic("shuffle-json"))
	if err != nil {
		t.Fatal(err)
	}
	jsonTotals, err := jsonschema.New[Total](reg, totalJSONSchema)
	if err != nil {
		t.Fatal(err)
	}
	protoOrders, err := protobuf.NewDynamic(reg, orderMD, topic("shuffle-proto"))
	if err != nil {
		t.Fatal(err)
	}
	protoTotals, err := protobuf.NewDynamic(reg, totalMD)
	if err != nil {
		t.Fatal(err)
	}
	same := func(o Order) Order { return o }
	pbOrder := func(o Order) *dynamicpb.Message {
		m := dynamicpb.NewMessage(orderMD)
		m.Set(orderMD.Fields().ByName("customer"), protoreflect.ValueOfString(o.Customer))
		m.Set(orderMD.Fields().ByName("amount"), protoreflect.ValueOfFloat64(o.Amount))
		return m
	}
	fromPBOrder := func(m *dynamicpb.Message) Order {
		return Order{Customer: m.Get(orderMD.Fields().ByName("customer")).String(), Amount: m.Get(orderMD.Fields().ByName("amount")).Float()}
	}
	pbTotal := func(tot Total) *dynamicpb.Message {
		m := dynamicpb.NewMessage(totalMD)
		m.Set(totalMD.Fields().ByName("customer"), protoreflect.ValueOfString(tot.Customer))
		m.Set(totalMD.Fields().ByName("orders"), protoreflect.ValueOfInt64(tot.Orders))
		return m
	}
	fromPBTotal := func(m *dynamicpb.Message) Total {
		return Total{Customer: m.Get(totalMD.Fields().ByName("customer")).String(), Orders: m.Get(totalMD.Fields().ByName("orders")).Int()}
	}
	sameT := func(tot Total) Total { return tot }

	t.Run("avro-to-protobuf", func(t *testing.T) {
		runRegistryCase(t, registryCase[Order, *dynamicpb.Message]{in: avroOrders, toOrder: same, fromOrd: same,
			out: protoTotals, toOut: pbTotal, fromOut: fromPBTotal, shuffled: avroOrders})
	})
	t.Run("protobuf-to-jsonschema", func(t *testing.T) {
		runRegistryCase(t, registryCase[*dynamicpb.Message, Total]{in: protoOrders, toOrder: fromPBOrder, fromOrd: pbOrder,
			out: jsonTotals, toOut: sameT, fromOut: sameT, shuffled: jsonOrders})
	})
	t.Run("jsonschema-to-avro", func(t *testing.T) {
		runRegistryCase(t, registryCase[Order, Total]{in: jsonOrders, toOrder: same, fromOrd: same,
			out: avroTotals, toOut: sameT, fromOut: sameT, shuffled: avroOrders})
	})

	// The registry's own errors reach the caller: an unknown id, a
	// subject without the schema when auto-registration is off.
	_, err = avroOrders.Decode(append(registry.AppendHeader(nil, 987654), 0))
	if !errors.Is(err, registry.ErrUnknownSchema) {
		t.Fatalf("unknown id: %v, want ErrUnknownSchema", err)
	}
	off, _ := avro.New[Order](reg, orderAvro, topic("unregistered"), registry.AutoRegister(false))
	if _, err := off.Append(nil, Order{Customer: "a"}); !errors.Is(err, registry.ErrNotRegistered) {
		t.Fatalf("auto-register off: %v, want ErrNotRegistered", err)
	}
}
