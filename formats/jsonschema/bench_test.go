package jsonschema_test

import (
	"testing"

	"github.com/sluicehq/sluice/formats/jsonschema"
	"github.com/sluicehq/sluice/formats/registry"
)

// The record of formats/avro's benchmark, validated by a JSON Schema.
type benchOrder struct {
	ID       int64    `json:"id"`
	Customer string   `json:"customer"`
	Amount   float64  `json:"amount"`
	Items    []string `json:"items"`
}

const benchSchema = `{"title":"bench.BenchOrder","type":"object","properties":{
 "id":{"type":"integer"},"customer":{"type":"string"},"amount":{"type":"number"},
 "items":{"type":"array","items":{"type":"string"}}},"required":["id","customer","amount","items"]}`

var benchValue = benchOrder{ID: 123456789, Customer: "customer-42", Amount: 99.5, Items: []string{"apple", "bread", "cheese"}}

func benchSerde(b *testing.B) *registry.Serde[benchOrder] {
	_, c := newClientB(b)
	s, err := jsonschema.New[benchOrder](c, benchSchema, registry.Topic("bench"))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkJSONSchemaEncode(b *testing.B) {
	s := benchSerde(b)
	buf, err := s.Append(nil, benchValue)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if buf, err = s.Append(buf[:0], benchValue); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}

func BenchmarkJSONSchemaDecode(b *testing.B) {
	s := benchSerde(b)
	buf, err := s.Append(nil, benchValue)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Decode(buf); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}
