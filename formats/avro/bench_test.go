package avro_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/formats/avro"
	"github.com/sluicehq/sluice/formats/registry"
)

// benchOrder is the record of every format's benchmark (formats/...):
// an id, a customer, an amount, three items.
type benchOrder struct {
	ID       int64    `avro:"id" json:"id"`
	Customer string   `avro:"customer" json:"customer"`
	Amount   float64  `avro:"amount" json:"amount"`
	Items    []string `avro:"items" json:"items"`
}

const benchSchema = `{"type":"record","name":"BenchOrder","namespace":"bench","fields":[
 {"name":"id","type":"long"},{"name":"customer","type":"string"},{"name":"amount","type":"double"},
 {"name":"items","type":{"type":"array","items":"string"}}]}`

var benchValue = benchOrder{ID: 123456789, Customer: "customer-42", Amount: 99.5, Items: []string{"apple", "bread", "cheese"}}

func benchSerde(b *testing.B) codec.Codec[benchOrder] {
	reg := srfake.New()
	b.Cleanup(reg.Close)
	c, err := registry.NewClient(reg.URL())
	if err != nil {
		b.Fatal(err)
	}
	s, err := avro.New[benchOrder](c, benchSchema, registry.Topic("bench"))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func benchEncode(b *testing.B, c codec.Codec[benchOrder]) {
	buf, err := c.Append(nil, benchValue) // registers the schema
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if buf, err = c.Append(buf[:0], benchValue); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}

func benchDecode(b *testing.B, c codec.Codec[benchOrder]) {
	buf, err := c.Append(nil, benchValue)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Decode(buf); err != nil { // fetches the schema by id
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroEncode(b *testing.B) { benchEncode(b, benchSerde(b)) }
func BenchmarkAvroDecode(b *testing.B) { benchDecode(b, benchSerde(b)) }

// The JSON codec (no registry) on the same record, for comparison.
func BenchmarkJSONCodecEncode(b *testing.B) { benchEncode(b, codec.JSON[benchOrder]{}) }
func BenchmarkJSONCodecDecode(b *testing.B) { benchDecode(b, codec.JSON[benchOrder]{}) }
