package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
)

// emptyCodec encodes every value as no bytes (a tombstone's value).
type emptyCodec struct{}

func (emptyCodec) Append(dst []byte, _ string) ([]byte, error) { return dst, nil }
func (emptyCodec) Decode([]byte) (string, error)             { return "", nil }

// An acknowledged record of a reusing serializer is filled again for a
// later value, emptied: its bytes' capacity kept, nothing else of the
// value before. A record whose write failed, and a record a serializer
// of the user's made, are not reused.
func TestRecordsReusedAfterAcknowledgement(t *testing.T) {
	ser := KeyValueSerializer("t", func(v string) string { return "k-" + v }, codec.String{}, codec.String{})
	res := newResults()
	r1, err := ser("first value")
	if err != nil {
		t.Fatal(err)
	}
	r1.Partition, r1.Offset = 3, 7
	r1.Headers = append(r1.Headers, kgo.RecordHeader{Key: "h", Value: []byte("v")})
	res.promise(r1, nil)
	r2, err := ser("second")
	if err != nil {
		t.Fatal(err)
	}
	if r2 != r1 {
		t.Fatalf("the acknowledged record was not reused")
	}
	if string(r2.Key) != "k-second" || string(r2.Value) != "second" || r2.Topic != "t" || r2.Partition != 0 || r2.Offset != 0 ||
		len(r2.Headers) != 0 || !r2.Timestamp.IsZero() {
		t.Errorf("reused record not emptied: %+v", r2)
	}
	if cap(r2.Value) < len("first value") {
		t.Errorf("reused record's value capacity %d, want the first value's", cap(r2.Value))
	}
	// A failed record is left alone.
	res.promise(r2, errors.New("broker gone"))
	if r3, _ := ser("third"); r3 == r2 {
		t.Errorf("a failed record was reused")
	}
	// A record of the user's own serializer is not touched.
	own := &kgo.Record{Topic: "t", Value: []byte("mine")}
	res.promise(own, nil)
	if string(own.Value) != "mine" || own.Topic != "t" {
		t.Errorf("the user's record was changed: %+v", own)
	}
}

// A reused record keeps Kafka's null key and null value where the
// serializer made them: ValueSerializer writes no key, and a codec that
// encodes a value as no bytes makes a null value (a tombstone), as
// before reuse, not an empty one.
func TestReusedRecordsKeepNullKeyAndValue(t *testing.T) {
	res := newResults()
	vs := ValueSerializer("t", codec.String{})
	r, _ := vs("x")
	res.promise(r, nil)
	r, _ = vs("y")
	if r.Key != nil {
		t.Errorf("ValueSerializer's reused record has key %q (nil: %v), want null", r.Key, r.Key == nil)
	}
	kv := KeyValueSerializer("t", func(v string) string { return v }, codec.String{}, emptyCodec{})
	r, _ = kv("some key")
	res.promise(r, nil)
	r, _ = kv("")
	if r.Key != nil || r.Value != nil {
		t.Errorf("reused record: key %q (nil: %v), value %q (nil: %v); want both null", r.Key, r.Key == nil, r.Value, r.Value == nil)
	}
}
