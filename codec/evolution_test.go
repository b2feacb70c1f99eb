package codec_test

import (
	"testing"

	"github.com/sluicehq/sluice/codec"
)

// What a changed struct reads of the bytes its earlier version wrote,
// through Binary (the default codec of keyed state, window contents and
// records for composite types) and JSON. A state's snapshot records its
// codec with the type's name (state.CodecID): a struct changed under the
// same name restores, and its bytes are read as these tests say; a struct
// of another name is refused (state.ErrIncompatibleState, the state
// package's incompatible-state test). docs/state.md lists these cases.

type accV1 struct {
	User  string `json:"user"`
	Count int64  `json:"count"`
}

type accAdded struct { // a field added
	User  string `json:"user"`
	Count int64  `json:"count"`
	Last  int64  `json:"last"`
}

type accRemoved struct { // Count removed
	User string `json:"user"`
}

type accRenamedTagged struct { // the Go field renamed, its tag kept
	User   string `json:"user"`
	Clicks int64  `json:"count"`
}

type accRenamed struct { // the field renamed with its tag
	User   string `json:"user"`
	Clicks int64  `json:"clicks"`
}

type accRetyped struct { // Count's type changed
	User  string `json:"user"`
	Count string `json:"count"`
}

type accWidened struct { // int64 to float64
	User  string  `json:"user"`
	Count float64 `json:"count"`
}

func written(t *testing.T, c codec.Codec[accV1]) []byte {
	t.Helper()
	b, err := c.Append(nil, accV1{User: "ann", Count: 7})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func read[T any](t *testing.T, b []byte, c codec.Codec[T]) (T, error) {
	t.Helper()
	return c.Decode(b)
}

func TestEvolutionFieldAddedRestoresWithZero(t *testing.T) {
	for name, b := range map[string][]byte{"binary": written(t, codec.Binary[accV1]{}), "json": written(t, codec.JSON[accV1]{})} {
		v, err := read(t, b, codec.Codec[accAdded](codec.Binary[accAdded]{}))
		if name == "json" {
			v, err = read(t, b, codec.Codec[accAdded](codec.JSON[accAdded]{}))
		}
		if err != nil || v != (accAdded{User: "ann", Count: 7, Last: 0}) {
			t.Errorf("%s: %+v, %v; want the old fields and the new one zero", name, v, err)
		}
	}
}

func TestEvolutionFieldRemovedRestores(t *testing.T) {
	v, err := read(t, written(t, codec.Binary[accV1]{}), codec.Codec[accRemoved](codec.Binary[accRemoved]{}))
	if err != nil || v != (accRemoved{User: "ann"}) {
		t.Errorf("%+v, %v; want the remaining field, the removed one ignored", v, err)
	}
}

func TestEvolutionFieldRenamedKeepsItsValueOnlyByTag(t *testing.T) {
	b := written(t, codec.Binary[accV1]{})
	v, err := read(t, b, codec.Codec[accRenamedTagged](codec.Binary[accRenamedTagged]{}))
	if err != nil || v.Clicks != 7 {
		t.Errorf("renamed, tag kept: %+v, %v; want the value by its tag", v, err)
	}
	w, err := read(t, b, codec.Codec[accRenamed](codec.Binary[accRenamed]{}))
	if err != nil || w != (accRenamed{User: "ann", Clicks: 0}) {
		t.Errorf("renamed with its tag: %+v, %v; want the value lost without an error (a new field)", w, err)
	}
}

func TestEvolutionFieldTypeChangedFails(t *testing.T) {
	if v, err := read(t, written(t, codec.Binary[accV1]{}), codec.Codec[accRetyped](codec.Binary[accRetyped]{})); err == nil {
		t.Errorf("int64 read as string: %+v, want an error", v)
	}
	v, err := read(t, written(t, codec.Binary[accV1]{}), codec.Codec[accWidened](codec.Binary[accWidened]{}))
	if err != nil || v.Count != 7 {
		t.Errorf("int64 read as float64: %+v, %v; want 7", v, err)
	}
}
