package table

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// A table's own records decode to what was encoded, and every cut or
// padded encoding is refused as a corrupt snapshot naming the record.
func TestFieldRecordsRefuseCorruptInput(t *testing.T) {
	c := versionsCodec[string]{codec.String{}}
	in := []version[string]{{Ts: 5, Value: "a"}, {Ts: -3, Deleted: true}, {Ts: 9, Value: "bcd"}}
	b, err := c.Append(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decode(b)
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("Decode = %v, %v; want %v", got, err, in)
	}
	bad := [][]byte{append(append([]byte{}, b...), 0)}
	for n := 0; n < len(b); n++ {
		bad = append(bad, b[:n])
	}
	for _, x := range bad {
		_, err := c.Decode(x)
		if !errors.Is(err, state.ErrCorruptSnapshot) || !strings.Contains(err.Error(), "table versions") {
			t.Errorf("Decode(%x) = %v, want a corrupt snapshot naming the table versions", x, err)
		}
	}
}
