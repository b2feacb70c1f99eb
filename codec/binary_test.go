package codec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/codec"
)

// event, nested and payload are the representative records of the
// benchmarks: a small event, a nested one, a 1 KiB string payload.
type event struct {
	ID     int64     `json:"id"`
	User   string    `json:"user"`
	Kind   string    `json:"kind,omitempty"`
	Amount float64   `json:"amount"`
	Count  int32     `json:"count"`
	At     time.Time `json:"at"`
}

type item struct {
	SKU string
	Qty int32
}

type nested struct {
	event
	Items  []item
	Meta   map[string]string
	Parent *event
	Raw    []byte
	hidden int
	Skip   string `json:"-"`
}

type payload struct {
	Key  string
	Body string
}

var (
	at      = time.Date(2026, 12, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600))
	sample  = event{ID: 123456789, User: "user-4711", Kind: "click", Amount: 12.5, Count: 3, At: at}
	sampleN = nested{event: sample, Items: []item{{"a-1", 1}, {"b-22", 2}, {"c-333", 3}},
		Meta: map[string]string{"region": "eu", "device": "ios"}, Parent: &event{ID: 1, User: "p", At: at.UTC()}, Raw: []byte{0, 1, 2}, hidden: 5}
	sampleP = payload{Key: "k-1", Body: strings.Repeat("x", 1024)}
)

// viaJSON is what the JSON codec gives back for v: Binary must give the
// same for the types Default picks it for.
func viaJSON[T any](t *testing.T, v T) T {
	t.Helper()
	b, err := codec.JSON[T]{}.Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := codec.JSON[T]{}.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func binaryRoundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	b, err := codec.Binary[T]{}.Append([]byte("prefix"), v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("prefix")) || b[len("prefix")] != codec.TagCBOR {
		t.Fatalf("Append did not append a tagged value: %x", b)
	}
	out, err := codec.Binary[T]{}.Decode(b[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBinaryMatchesJSON(t *testing.T) {
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: binary round trip gave %+v, JSON %+v", name, got, want)
		}
	}
	check("event", binaryRoundTrip(t, sample), viaJSON(t, sample))
	check("nested", binaryRoundTrip(t, sampleN), viaJSON(t, sampleN))
	check("payload", binaryRoundTrip(t, sampleP), viaJSON(t, sampleP))
	check("zero", binaryRoundTrip(t, nested{}), viaJSON(t, nested{}))
	check("pointer", binaryRoundTrip(t, &sample), viaJSON(t, &sample))
	check("nil pointer", binaryRoundTrip[*event](t, nil), viaJSON[*event](t, nil))
	check("slice", binaryRoundTrip(t, []event{sample, {}}), viaJSON(t, []event{sample, {}}))
	check("map", binaryRoundTrip(t, map[string]int{"a": 1, "b": -2}), viaJSON(t, map[string]int{"a": 1, "b": -2}))
	check("float", binaryRoundTrip(t, 0.1), viaJSON(t, 0.1))

	got := binaryRoundTrip(t, sample)
	if got.At.Format(time.RFC3339Nano) != sample.At.Format(time.RFC3339Nano) {
		t.Errorf("time: got %s, want %s (instant and offset)", got.At.Format(time.RFC3339Nano), sample.At.Format(time.RFC3339Nano))
	}
}

// TestBinaryHonoursJSONTags decodes Binary's bytes into a type that only
// shares the JSON field names.
func TestBinaryHonoursJSONTags(t *testing.T) {
	type renamed struct {
		Identifier int64  `cbor:"id"`
		Who        string `json:"user"`
		Kind       *string
	}
	b, err := codec.Binary[event]{}.Append(nil, event{ID: 7, User: "u"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.Binary[renamed]{}.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Identifier != 7 || got.Who != "u" || got.Kind != nil {
		t.Fatalf("decoded %+v: want the id and user fields, kind omitted as empty", got)
	}
}

func TestBinaryReadsJSON(t *testing.T) {
	for _, v := range []nested{sampleN, {}} {
		old, err := codec.JSON[nested]{}.Append(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := codec.Binary[nested]{}.Decode(old)
		if err != nil {
			t.Fatal(err)
		}
		if want := viaJSON(t, v); !reflect.DeepEqual(got, want) {
			t.Fatalf("JSON written value decoded as %+v, want %+v", got, want)
		}
	}
	for _, v := range []any{int64(-3), "s", true, []int{1}, nil} {
		old, _ := json.Marshal(v)
		if _, err := (codec.Binary[any]{}).Decode(old); err != nil {
			t.Errorf("JSON %s: %v", old, err)
		}
	}
	for _, bad := range [][]byte{{}, {0x02, 0}, {0xff}} {
		if _, err := (codec.Binary[event]{}).Decode(bad); err == nil {
			t.Errorf("decoded %x", bad)
		}
	}
	if _, err := (codec.Binary[event]{}).Decode([]byte{0x07}); !errors.Is(err, codec.ErrUnknownFormat) {
		t.Errorf("unknown format byte: %v", err)
	}
	if _, err := (codec.Binary[event]{}).Decode([]byte{codec.TagCBOR, 0xa1}); err == nil {
		t.Error("truncated CBOR decoded")
	}
}

func TestBinaryDeterministic(t *testing.T) {
	a := map[string]int{}
	b := map[string]int{}
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "a", "zz"}
	for i, k := range keys {
		a[k] = i
	}
	for i := len(keys) - 1; i >= 0; i-- {
		b[keys[i]] = i
	}
	type keyed struct {
		Tags map[string]int
		Name string
	}
	first, err := codec.Binary[keyed]{}.Append(nil, keyed{a, "n"})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := codec.Binary[keyed]{}.Append(nil, keyed{b, "n"})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("equal values encoded differently:\n%x\n%x", first, again)
		}
	}
}

func TestBinaryDoesNotRetainInput(t *testing.T) {
	b, _ := codec.Binary[nested]{}.Append(nil, sampleN)
	got, err := codec.Binary[nested]{}.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if !reflect.DeepEqual(got, viaJSON(t, sampleN)) {
		t.Fatalf("decoded value changed with its input: %+v", got)
	}
}

type customJSON struct{ v int }

func (c customJSON) MarshalJSON() ([]byte, error)  { return json.Marshal(c.v) }
func (c *customJSON) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &c.v) }

func TestDefaultKeepsJSONWhereBinaryDiffers(t *testing.T) {
	type withAny struct{ V any }
	type withCustom struct{ C []customJSON }
	type withBig struct{ N *big.Int }
	type recursive struct {
		Name string
		Next *recursive
	}
	type hiddenAny struct {
		Name string
		v    any
		Skip any `json:"-"`
	}
	_ = hiddenAny{v: 1}.v // unexported: not encoded, does not keep JSON
	for name, c := range map[string]any{
		"interface":   codec.Default[withAny](),
		"MarshalJSON": codec.Default[withCustom](),
		"big.Int":     codec.Default[withBig](),
		"any":         codec.Default[any](),
	} {
		if !strings.Contains(reflect.TypeOf(c).Name(), "JSON[") {
			t.Errorf("%s: Default gave %T, want JSON", name, c)
		}
	}
	for name, c := range map[string]any{
		"recursive":      codec.Default[recursive](),
		"time":           codec.Default[time.Time](),
		"unexported any": codec.Default[hiddenAny](),
		"nested":         codec.Default[nested](),
	} {
		if !strings.Contains(reflect.TypeOf(c).Name(), "Binary[") {
			t.Errorf("%s: Default gave %T, want Binary", name, c)
		}
	}
	r := recursive{"a", &recursive{"b", &recursive{Name: "c"}}}
	if got := binaryRoundTrip(t, r); !reflect.DeepEqual(got, r) {
		t.Errorf("recursive: %+v", got)
	}
}

func TestParseFormat(t *testing.T) {
	for s, want := range map[string]codec.Format{"binary": codec.FormatBinary, " JSON ": codec.FormatJSON} {
		if got, err := codec.ParseFormat(s); err != nil || got != want {
			t.Errorf("%q: %v %v", s, got, err)
		}
		if got, _ := codec.ParseFormat(want.String()); got != want {
			t.Errorf("String of %v does not parse back", want)
		}
	}
	if _, err := codec.ParseFormat("avro"); !errors.Is(err, codec.ErrUnknownFormatName) {
		t.Errorf("avro: %v", err)
	}
}

func FuzzBinaryDecode(f *testing.F) {
	good, _ := codec.Binary[nested]{}.Append(nil, sampleN)
	f.Add(good)
	f.Add([]byte(`{"id":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := codec.Binary[nested]{}.Decode(b)
		if err != nil || len(b) == 0 || b[0] != codec.TagCBOR {
			return
		}
		// What decodes encodes again and gives back the same value.
		again, err := codec.Binary[nested]{}.Append(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		w, err := codec.Binary[nested]{}.Decode(again)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(viaBinaryNorm(v), viaBinaryNorm(w)) {
			t.Fatalf("re-encoding changed %+v into %+v", v, w)
		}
	})
}

// viaBinaryNorm clears what a round trip does not keep exactly (the time
// zone's name, nil against empty) for comparison.
func viaBinaryNorm(n nested) string {
	b, _ := codec.Binary[nested]{}.Append(nil, n)
	return string(b)
}
