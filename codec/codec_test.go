package codec_test

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/sluicehq/sluice/codec"
)

func roundTrip[T comparable](t *testing.T, c codec.Codec[T], v T) {
	t.Helper()
	b, err := c.Append([]byte("prefix"), v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("prefix")) {
		t.Fatalf("Append did not append: %q", b)
	}
	got, err := c.Decode(b[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	if got != v {
		t.Fatalf("round trip of %v gave %v", v, got)
	}
}

type point struct {
	X, Y int
	Name string
}

func TestBuiltins(t *testing.T) {
	roundTrip[string](t, codec.String{}, "héllo\x00world")
	roundTrip[string](t, codec.String{}, "")
	roundTrip[int64](t, codec.Int[int64]{}, math.MinInt64)
	roundTrip[int64](t, codec.Int[int64]{}, -1)
	roundTrip[uint64](t, codec.Int[uint64]{}, math.MaxUint64)
	roundTrip[int8](t, codec.Int[int8]{}, -128)
	roundTrip[point](t, codec.JSON[point]{}, point{1, -2, "p"})

	b, err := codec.Bytes{}.Append(nil, []byte{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.Bytes{}.Decode(b)
	if err != nil || !bytes.Equal(got, []byte{0, 1, 2}) {
		t.Fatalf("bytes: %v %v", got, err)
	}
	b[0] = 9
	if got[0] != 0 {
		t.Fatal("Bytes.Decode kept its input instead of copying it")
	}
}

func TestIntOrderMatchesNumericOrderForNonNegative(t *testing.T) {
	a, _ := codec.Int[int64]{}.Append(nil, 255)
	b, _ := codec.Int[int64]{}.Append(nil, 256)
	if bytes.Compare(a, b) >= 0 {
		t.Fatalf("encoding of 255 (%x) does not sort before 256 (%x)", a, b)
	}
}

func TestDecodeErrors(t *testing.T) {
	if _, err := (codec.Int[int64]{}).Decode([]byte{1, 2, 3}); !errors.Is(err, codec.ErrShortInput) {
		t.Fatalf("short integer: %v", err)
	}
	if _, err := (codec.JSON[point]{}).Decode([]byte("{not json")); err == nil {
		t.Fatal("bad JSON decoded")
	}
	if _, err := (codec.JSON[chan int]{}).Append(nil, make(chan int)); err == nil {
		t.Fatal("a channel encoded as JSON")
	}
}

func TestDefault(t *testing.T) {
	if _, ok := codec.Default[string]().(codec.String); !ok {
		t.Fatal("string")
	}
	if _, ok := codec.Default[[]byte]().(codec.Bytes); !ok {
		t.Fatal("[]byte")
	}
	if _, ok := codec.Default[uint16]().(codec.Int[uint16]); !ok {
		t.Fatal("uint16")
	}
	if _, ok := codec.Default[point]().(codec.Binary[point]); !ok {
		t.Fatal("struct")
	}
	type myInt int
	if _, ok := codec.Default[myInt]().(codec.Binary[myInt]); !ok {
		t.Fatal("named integer types are composite for Default")
	}
	if _, ok := codec.DefaultFor[point](codec.FormatJSON).(codec.JSON[point]); !ok {
		t.Fatal("FormatJSON gives JSON for a struct")
	}
	if _, ok := codec.DefaultKey[point]().(codec.JSON[point]); !ok {
		t.Fatal("composite keys keep JSON")
	}
	if _, ok := codec.DefaultKey[int64]().(codec.Int[int64]); !ok {
		t.Fatal("int64 key")
	}
}

func FuzzIntCodec(f *testing.F) {
	f.Add(int64(0))
	f.Add(int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, v int64) { roundTrip[int64](t, codec.Int[int64]{}, v) })
}
