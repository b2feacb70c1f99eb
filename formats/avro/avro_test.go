package avro_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/sluicehq/sluice/formats/avro"
	"github.com/sluicehq/sluice/formats/registry"
)

const orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"customer","type":"string"},
 {"name":"amount","type":"double"}]}`

// orderV2 adds a field with a default: readers of v2 read v1's records.
const orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"customer","type":"string"},
 {"name":"amount","type":"double"},
 {"name":"note","type":"string","default":"none"}]}`

type orderV1T struct {
	ID       int64   `avro:"id"`
	Customer string  `avro:"customer"`
	Amount   float64 `avro:"amount"`
}

type orderV2T struct {
	ID       int64   `avro:"id"`
	Customer string  `avro:"customer"`
	Amount   float64 `avro:"amount"`
	Note     string  `avro:"note"`
}

func newClient(t *testing.T, opts ...srfake.Option) (*srfake.Registry, *registry.Client) {
	t.Helper()
	reg := srfake.New(opts...)
	t.Cleanup(reg.Close)
	c, err := registry.NewClient(reg.URL(), registry.LookupTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return reg, c
}

// The serde as a codec and as the Kafka functions: values round-trip,
// the bytes are the Confluent header with the id the registry gave the
// subject, then the plain Avro encoding.
func TestRoundTripAndWireFormat(t *testing.T) {
	reg, c := newClient(t)
	s, err := avro.New[orderV1T](c, orderV1, registry.Topic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	v := orderV1T{ID: 7, Customer: "ann", Amount: 12.5}
	b, err := s.Append([]byte("pre"), v)
	if err != nil {
		t.Fatal(err)
	}
	b = b[3:]
	ss, ok := reg.GetSchema("orders-value", 1)
	if !ok {
		t.Fatal("schema not registered under orders-value version 1")
	}
	id, body, err := registry.ReadHeader(b)
	if err != nil || id != ss.ID {
		t.Fatalf("header id %d err %v, want the registered id %d", id, err, ss.ID)
	}
	// The body is Avro binary: long zig-zag 7 = 0x0e, string "ann", double.
	if body[0] != 0x0e || body[1] != 6 || string(body[2:5]) != "ann" || len(body) != 5+8 {
		t.Fatalf("body %x is not the Avro encoding of %+v", body, v)
	}
	got, err := s.Decode(b)
	if err != nil || got != v {
		t.Fatalf("decode: %+v %v, want %+v", got, err, v)
	}

	rec, err := s.Serializer("orders", func(o orderV1T) []byte { return []byte(o.Customer) })(v)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Topic != "orders" || string(rec.Key) != "ann" || !reflect.DeepEqual(rec.Value, b) {
		t.Fatalf("record %+v, want topic orders, key ann, value %x", rec, b)
	}
	got, err = s.Decoder()(rec)
	if err != nil || got != v {
		t.Fatalf("decoder: %+v %v", got, err)
	}
}

// A reader of v2 reads v1's records with v2's default; v1's reader reads
// v2's records without the new field (Avro resolution, both directions).
func TestSchemaEvolution(t *testing.T) {
	_, c := newClient(t)
	w1, err := avro.New[orderV1T](c, orderV1, registry.Topic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	w2, err := avro.New[orderV2T](c, orderV2, registry.Topic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	b1, err := w1.Append(nil, orderV1T{ID: 1, Customer: "a", Amount: 1})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := w2.Append(nil, orderV2T{ID: 2, Customer: "b", Amount: 2, Note: "rush"})
	if err != nil {
		t.Fatal(err)
	}
	id1, _, _ := registry.ReadHeader(b1)
	id2, _, _ := registry.ReadHeader(b2)
	if id1 == id2 {
		t.Fatalf("both versions have schema id %d", id1)
	}
	if got, err := w2.Decode(b1); err != nil || got != (orderV2T{ID: 1, Customer: "a", Amount: 1, Note: "none"}) {
		t.Fatalf("v2 reading v1: %+v %v", got, err)
	}
	if got, err := w1.Decode(b2); err != nil || got != (orderV1T{ID: 2, Customer: "b", Amount: 2}) {
		t.Fatalf("v1 reading v2: %+v %v", got, err)
	}

	// UseLatest writes with v2 even from the v1 reader type: the new
	// field gets its Go zero value.
	l, err := avro.New[orderV2T](c, orderV1, registry.Topic("orders"), registry.UseLatest())
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Append(nil, orderV2T{ID: 3, Customer: "c", Amount: 3, Note: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if id, _, _ := registry.ReadHeader(b); id != id2 {
		t.Fatalf("UseLatest wrote schema id %d, want the latest %d", id, id2)
	}
	if got, err := w2.Decode(b); err != nil || got.Note != "x" {
		t.Fatalf("reading the UseLatest record: %+v %v", got, err)
	}
}

// An id the registry does not know: ErrUnknownSchema, naming the id.
func TestUnknownSchemaID(t *testing.T) {
	_, c := newClient(t)
	s, err := avro.New[orderV1T](c, orderV1, registry.Topic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	b := registry.AppendHeader(nil, 4242)
	_, err = s.Decode(append(b, 0x0e, 0, 0))
	if !errors.Is(err, registry.ErrUnknownSchema) || !strings.Contains(err.Error(), "schema id 4242") {
		t.Fatalf("err %v, want ErrUnknownSchema naming schema id 4242", err)
	}
	_, err = s.Decode([]byte{1, 2, 3})
	if !errors.Is(err, registry.ErrBadWireFormat) {
		t.Fatalf("err %v, want ErrBadWireFormat", err)
	}
}

// A body that does not decode names subject, version and id.
func TestDecodeErrorNamesSchema(t *testing.T) {
	_, c := newClient(t)
	s, err := avro.New[orderV1T](c, orderV1, registry.Topic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Append(nil, orderV1T{ID: 1, Customer: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	id, _, _ := registry.ReadHeader(b)
	_, err = s.Decode(b[:8]) // cut inside the string
	want := `subject "orders-value", version 1, schema id ` + strconv.Itoa(id)
	if !errors.Is(err, registry.ErrDecode) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want ErrDecode naming %s", err, want)
	}
}

// Auto-registration off: an unregistered schema is refused, naming the
// subject; once registered, it is found and not registered again.
func TestAutoRegisterOff(t *testing.T) {
	reg, c := newClient(t)
	s, err := avro.New[orderV1T](c, orderV1, registry.Topic("orders"), registry.AutoRegister(false))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Append(nil, orderV1T{})
	if !errors.Is(err, registry.ErrNotRegistered) || !strings.Contains(err.Error(), `subject "orders-value"`) {
		t.Fatalf("err %v, want ErrNotRegistered naming subject orders-value", err)
	}
	if reg.SubjectExists("orders-value") {
		t.Fatal("the schema was registered with auto-registration off")
	}
	id, _, err := reg.RegisterSchema("orders-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Append(nil, orderV1T{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := registry.ReadHeader(b); got != id {
		t.Fatalf("wrote id %d, want the registered %d", got, id)
	}
}

// The three subject name strategies name the subjects Confluent's do.
func TestSubjectStrategies(t *testing.T) {
	reg, c := newClient(t)
	for _, tc := range []struct {
		opts    []registry.SerdeOption
		subject string
	}{
		{nil, "orders-value"},
		{[]registry.SerdeOption{registry.Key()}, "orders-key"},
		{[]registry.SerdeOption{registry.SubjectStrategy(registry.RecordNameStrategy)}, "shop.Order"},
		{[]registry.SerdeOption{registry.SubjectStrategy(registry.TopicRecordNameStrategy)}, "orders-shop.Order"},
		{[]registry.SerdeOption{registry.Subject("fixed")}, "fixed"},
	} {
		s, err := avro.New[orderV1T](c, orderV1, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Serializer("orders", nil)(orderV1T{ID: 1}); err != nil {
			t.Fatal(err)
		}
		if !reg.SubjectExists(tc.subject) {
			t.Fatalf("options %d: subject %s not registered", len(tc.opts), tc.subject)
		}
	}
	// TopicNameStrategy as a codec without a topic: a configuration error.
	s, _ := avro.New[orderV1T](c, orderV1)
	if _, err := s.Append(nil, orderV1T{}); !errors.Is(err, registry.ErrInvalidConfig) {
		t.Fatalf("err %v, want ErrInvalidConfig", err)
	}
}

// Basic and bearer authentication reach the registry; without it the
// request is refused (and not retried until the timeout).
func TestAuth(t *testing.T) {
	for _, tc := range []struct {
		header string
		opt    registry.ClientOption
	}{
		{"Basic dTpw", registry.BasicAuth("u", "p")},
		{"Bearer tok", registry.BearerToken("tok")},
	} {
		reg := srfake.New(srfake.WithAuth(tc.header))
		defer reg.Close()
		good, _ := registry.NewClient(reg.URL(), tc.opt)
		s, _ := avro.New[orderV1T](good, orderV1, registry.Topic("t"))
		if _, err := s.Append(nil, orderV1T{}); err != nil {
			t.Fatalf("%s: %v", tc.header, err)
		}
		bad, _ := registry.NewClient(reg.URL())
		s, _ = avro.New[orderV1T](bad, orderV1, registry.Topic("t2"))
		start := time.Now()
		_, err := s.Append(nil, orderV1T{})
		if err == nil || !strings.Contains(err.Error(), `subject "t2-value"`) || time.Since(start) > 20*time.Second {
			t.Fatalf("%s without credentials: %v", tc.header, err)
		}
	}
}

// A registry that does not answer: ErrRegistry after the lookup timeout.
func TestRegistryUnreachable(t *testing.T) {
	reg := srfake.New()
	url := reg.URL()
	reg.Close()
	c, _ := registry.NewClient(url, registry.LookupTimeout(300*time.Millisecond), registry.Logger(discard()))
	s, _ := avro.New[orderV1T](c, orderV1, registry.Topic("t"))
	if _, err := s.Decode(append(registry.AppendHeader(nil, 1), 0)); !errors.Is(err, registry.ErrRegistry) || errors.Is(err, registry.ErrUnknownSchema) {
		t.Fatalf("err %v, want ErrRegistry", err)
	}
}

// A type that does not fit the schema is refused when the serde is made.
func TestTypeMismatch(t *testing.T) {
	_, c := newClient(t)
	type wrong struct {
		ID string `avro:"id"`
	}
	if _, err := avro.New[wrong](c, orderV1); !errors.Is(err, registry.ErrInvalidConfig) {
		t.Fatalf("err %v, want ErrInvalidConfig", err)
	}
	if _, err := avro.New[orderV1T](c, `{"type":"record"`); !errors.Is(err, registry.ErrInvalidConfig) {
		t.Fatalf("err %v, want ErrInvalidConfig", err)
	}
}

// KeyValueSerializer encodes key and value under their own subjects.
func TestKeyValueSerializer(t *testing.T) {
	reg, c := newClient(t)
	keys, err := avro.New[string](c, `"string"`, registry.Key())
	if err != nil {
		t.Fatal(err)
	}
	values, err := avro.New[orderV1T](c, orderV1)
	if err != nil {
		t.Fatal(err)
	}
	v := orderV1T{ID: 3, Customer: "cy", Amount: 1}
	rec, err := registry.KeyValueSerializer("orders", keys, func(o orderV1T) string { return o.Customer }, values)(v)
	if err != nil {
		t.Fatal(err)
	}
	if !reg.SubjectExists("orders-key") || !reg.SubjectExists("orders-value") || rec.Topic != "orders" {
		t.Fatalf("subjects or topic wrong: %+v", rec)
	}
	if k, err := keys.Decoder()(rec); err != nil || k != "cy" {
		t.Fatalf("key %q %v", k, err)
	}
	if got, err := values.Decoder()(rec); err != nil || got != v {
		t.Fatalf("value %+v %v", got, err)
	}
}

// One serde shared by goroutines (parallel subtasks): the first encode
// and decode of each resolve the schema once, under -race.
func TestConcurrentUse(t *testing.T) {
	_, c := newClient(t)
	s, err := avro.New[orderV1T](c, orderV1, registry.Topic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 50 {
				v := orderV1T{ID: int64(g*1000 + i), Customer: "c"}
				b, err := s.Append(nil, v)
				if err == nil {
					var got orderV1T
					if got, err = s.Decode(b); err == nil && got != v {
						err = errors.New("round trip changed the value")
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
