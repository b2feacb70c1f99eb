package jsonschema_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/sluicehq/sluice/formats/jsonschema"
	"github.com/sluicehq/sluice/formats/registry"
)

const orderSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"shop.Order","type":"object",
 "properties":{"id":{"type":"integer"},"customer":{"type":"string","minLength":1},"amount":{"type":"number"}},
 "required":["id","customer"]}`

type order struct {
	ID       int64   `json:"id"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
}

func newClient(t *testing.T) (*srfake.Registry, *registry.Client) { return newClientB(t) }

func newClientB(t testing.TB) (*srfake.Registry, *registry.Client) {
	t.Helper()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	c, err := registry.NewClient(reg.URL())
	if err != nil {
		t.Fatal(err)
	}
	return reg, c
}

// Values round-trip; the body is the value's JSON; an invalid value is
// refused on encode, naming subject and id.
func TestRoundTripAndValidation(t *testing.T) {
	reg, c := newClient(t)
	s, err := jsonschema.New[order](c, orderSchema, registry.Topic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	v := order{ID: 1, Customer: "ann", Amount: 3.5}
	b, err := s.Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	ss, ok := reg.GetSchema("orders-value", 1)
	if !ok || ss.Type != sr.TypeJSON {
		t.Fatalf("no JSON schema under orders-value: %+v", ss)
	}
	id, body, _ := registry.ReadHeader(b)
	want, _ := json.Marshal(v)
	if id != ss.ID || string(body) != string(want) {
		t.Fatalf("id %d body %s, want %d %s", id, body, ss.ID, want)
	}
	if got, err := s.Decode(b); err != nil || got != v {
		t.Fatalf("decode %+v %v", got, err)
	}
	_, err = s.Append(nil, order{ID: 2}) // customer is empty: minLength 1
	if !errors.Is(err, registry.ErrEncode) || !strings.Contains(err.Error(), `subject "orders-value"`) {
		t.Fatalf("err %v, want ErrEncode naming the subject", err)
	}
	// RecordNameStrategy uses the title.
	rs, _ := jsonschema.New[order](c, orderSchema, registry.SubjectStrategy(registry.RecordNameStrategy))
	if _, err := rs.Append(nil, v); err != nil || !reg.SubjectExists("shop.Order") {
		t.Fatalf("record name subject: %v", err)
	}
}

// A record that its writer schema refuses is a decode error.
func TestDecodeValidates(t *testing.T) {
	reg, c := newClient(t)
	reg.SeedSchema("x-value", 1, 9, sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object","required":["id"]}`})
	s, _ := jsonschema.New[order](c, orderSchema, registry.Topic("orders"))
	rec := append(registry.AppendHeader(nil, 9), `{"customer":"a"}`...)
	if _, err := s.Decode(rec); !errors.Is(err, registry.ErrDecode) || !strings.Contains(err.Error(), "schema id 9") {
		t.Fatalf("err %v, want ErrDecode naming schema id 9", err)
	}
	rec = append(registry.AppendHeader(nil, 9), `{"id":4,"customer":"a"}`...)
	if got, err := s.Decode(rec); err != nil || got.ID != 4 {
		t.Fatalf("decode %+v %v", got, err)
	}
	if _, err := jsonschema.New[order](c, `{"type": 12}`); !errors.Is(err, registry.ErrInvalidConfig) {
		t.Fatalf("bad schema: err %v", err)
	}
}
