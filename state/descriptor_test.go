package state_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

type rec struct{ A int }

// The binary default reads what the JSON default of earlier versions
// wrote, so a state restored with codec.JSON is compatible with
// codec.Binary of the same type; not the other way round, nor for
// another type.
func TestBinaryCodecReadsJSONState(t *testing.T) {
	meta := func(c any) state.StateMeta {
		return state.StateMeta{Name: "s", Kind: state.KindValue, ValueCodec: state.CodecID(c)}
	}
	jsonM, binM := meta(codec.JSON[rec]{}), meta(codec.Binary[rec]{})
	if err := jsonM.Compatible(binM); err != nil {
		t.Errorf("JSON state under Binary: %v", err)
	}
	if err := binM.Compatible(jsonM); !errors.Is(err, state.ErrIncompatibleState) {
		t.Errorf("Binary state under JSON: %v, want incompatible", err)
	}
	if err := meta(codec.JSON[int]{}).Compatible(binM); !errors.Is(err, state.ErrIncompatibleState) {
		t.Errorf("JSON of another type under Binary: %v, want incompatible", err)
	}
	for _, pair := range [][2]state.StateMeta{{jsonM, binM}, {binM, jsonM}} {
		m, err := pair[0].Merge(pair[1])
		if err != nil || m.ValueCodec != binM.ValueCodec {
			t.Errorf("merge of %s and %s: %s, %v; want Binary", pair[0].ValueCodec, pair[1].ValueCodec, m.ValueCodec, err)
		}
	}
	if _, err := jsonM.Merge(meta(codec.String{})); !errors.Is(err, state.ErrIncompatibleState) {
		t.Errorf("merge of JSON and String: %v", err)
	}
}

// A map state's user keys keep JSON (codec.DefaultKey): their bytes are
// looked up, so they stay those earlier versions wrote.
func TestMapStateUserKeysKeepJSON(t *testing.T) {
	m, err := state.MapStateDescriptor[rec, rec]{Name: "m"}.Meta()
	if err != nil {
		t.Fatal(err)
	}
	if m.UserKeyCodec != state.CodecID(codec.JSON[rec]{}) || m.ValueCodec != state.CodecID(codec.Binary[rec]{}) {
		t.Errorf("map state codecs: keys %s, values %s", m.UserKeyCodec, m.ValueCodec)
	}
}
