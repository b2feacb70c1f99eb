package decode

import (
	"bytes"
	"testing"
)

// Decoders are tried in registration order; one that refuses passes the
// entry on; a kind registered twice panics.
func TestRegistry(t *testing.T) {
	RegisterPosition("test-a", func(e []byte) (Position, bool) {
		return Position{Text: "a"}, bytes.HasPrefix(e, []byte("a"))
	})
	RegisterPosition("test-any", func(e []byte) (Position, bool) { return Position{Text: "any"}, len(e) > 0 })
	for entry, want := range map[string]string{"abc": "test-a", "xyz": "test-any", "": ""} {
		kind, p, ok := DecodePosition([]byte(entry))
		if kind != want || ok != (want != "") || (ok && p.Text == "") {
			t.Errorf("DecodePosition(%q) = %q %+v %t, want kind %q", entry, kind, p, ok, want)
		}
	}
	RegisterCommittable("test-c", func(b []byte) (Committable, bool) { return Committable{Value: len(b), Text: "c"}, len(b) == 1 })
	if kind, c, ok := DecodeCommittable([]byte("x")); kind != "test-c" || !ok || c.Value != 1 {
		t.Errorf("DecodeCommittable: %q %+v %t", kind, c, ok)
	}
	if _, _, ok := DecodeCommittable([]byte("xy")); ok {
		t.Error("a committable no decoder takes was decoded")
	}
	// By kind: only that kind's decoder is asked.
	RegisterCommittable("test-any-c", func(b []byte) (Committable, bool) { return Committable{Text: "any"}, true })
	if c, ok := DecodeCommittableKind("test-c", []byte("x")); !ok || c.Value != 1 {
		t.Errorf("DecodeCommittableKind(test-c, x): %+v %t", c, ok)
	}
	if c, ok := DecodeCommittableKind("test-c", []byte("xy")); ok {
		t.Errorf("DecodeCommittableKind(test-c, xy) = %+v, want refused though test-any-c takes anything", c)
	}
	if _, ok := DecodeCommittableKind("test-none", []byte("x")); ok {
		t.Error("a committable of an unregistered kind was decoded")
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a kind twice did not panic")
		}
	}()
	RegisterPosition("test-a", func([]byte) (Position, bool) { return Position{}, false })
}
