package kafka

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
)

// NewRecord: key and value of the lengths asked, zero, side by side in
// one buffer without room to grow into each other; a length of 0 leaves
// the field nil.
func TestNewRecord(t *testing.T) {
	for _, n := range [][2]int{{0, 0}, {0, 7}, {5, 0}, {10, 16}, {16, 16}, {1, 63}, {100, 156}, {100, 157}, {40, 40}, {1, 159}, {200, 24}, {3, 5000}, {-1, 4}} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := NewRecord("t", n[0], n[1])
			if r.Topic != "t" {
				t.Fatalf("topic %q", r.Topic)
			}
			for _, f := range []struct {
				name string
				b    []byte
				want int
			}{{"key", r.Key, max(n[0], 0)}, {"value", r.Value, n[1]}} {
				if f.want == 0 && f.b != nil {
					t.Fatalf("%s %v, want nil", f.name, f.b)
				}
				if len(f.b) != f.want || cap(f.b) != f.want || !bytes.Equal(f.b, make([]byte, f.want)) {
					t.Fatalf("%s: len %d cap %d %v; want %d zero bytes, no spare capacity", f.name, len(f.b), cap(f.b), f.b, f.want)
				}
			}
			if len(r.Key) == 0 {
				return
			}
			// Appending to the key must not write over the value.
			for i := range r.Value {
				r.Value[i] = 'v'
			}
			_ = append(r.Key, bytes.Repeat([]byte{'k'}, 8)...)
			if bytes.ContainsRune(r.Value, 'k') {
				t.Fatalf("an append to the key wrote into the value: %q", r.Value)
			}
		})
	}
}

// The library's serializers encode into a shared scratch buffer and copy
// into the record: records made one after another, and concurrently by
// several subtasks, keep their own keys and values.
func TestSerializersRecordsOwnTheirBytes(t *testing.T) {
	kv := KeyValueSerializer("out", func(v string) string { return "key-" + v }, codec.String{}, codec.String{})
	val := ValueSerializer("out", codec.String{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			var want []string
			var recs, recs2 []*kgo.Record
			for i := range 2000 {
				v := fmt.Sprintf("%d-%d-%s", g, i, bytes.Repeat([]byte{'x'}, i%300))
				r, err := kv(v)
				if err != nil {
					errs <- err
					return
				}
				r2, err := val(v)
				if err != nil {
					errs <- err
					return
				}
				want, recs, recs2 = append(want, v), append(recs, r), append(recs2, r2)
			}
			for i, v := range want {
				r, r2 := recs[i], recs2[i]
				if r.Topic != "out" || string(r.Key) != "key-"+v || string(r.Value) != v || r2.Topic != "out" || r2.Key != nil || string(r2.Value) != v {
					errs <- fmt.Errorf("records %d of goroutine %d: %q %q %q / %q %q %q, want out %q %q / out no key %q",
						i, g, r.Topic, r.Key, r.Value, r2.Topic, r2.Key, r2.Value, "key-"+v, v, v)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A value the codec refuses: the record returned with the error carries
// the topic and, from KeyValueSerializer, a copy of the key.
func TestSerializersPartialRecord(t *testing.T) {
	kv := KeyValueSerializer("out", func(v string) string { return v }, codec.String{}, refusing{})
	r, err := kv("k1")
	if err == nil || r == nil || r.Topic != "out" || string(r.Key) != "k1" || r.Value != nil {
		t.Fatalf("got %+v, %v; want the record with topic and key, and the error", r, err)
	}
	if _, err := kv("k2"); err == nil || string(r.Key) != "k1" {
		t.Fatalf("the next record's encoding changed the first one's key to %q", r.Key)
	}
	r, err = ValueSerializer[string]("out", refusing{})("v")
	if err == nil || r == nil || r.Topic != "out" || r.Key != nil || r.Value != nil {
		t.Fatalf("got %+v, %v; want the record with its topic only, and the error", r, err)
	}
}

// refusing is a codec that writes a byte and then refuses.
type refusing struct{}

func (refusing) Append(dst []byte, _ string) ([]byte, error) {
	return append(dst, '!'), errors.New("refused")
}

func (refusing) Decode([]byte) (string, error) { return "", errors.New("refused") }
