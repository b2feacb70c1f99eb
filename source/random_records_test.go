package source

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/codec"
)

func TestRandomRecordsDeterministic(t *testing.T) {
	a, b := RandomRecords(7, 32, 100), RandomRecords(7, 32, 100)
	other := RandomRecords(8, 32, 100)
	sameAsOther := 0
	for i := range int64(1000) {
		ra, rb := a(i), b(i)
		if ra != rb {
			t.Fatalf("index %d: same seed gives %+v and %+v", i, ra, rb)
		}
		if ra.Seq != i {
			t.Fatalf("index %d: Seq %d", i, ra.Seq)
		}
		if ra == other(i) {
			sameAsOther++
		}
	}
	if sameAsOther > 10 {
		t.Fatalf("seeds 7 and 8 give the same record for %d of 1000 indexes", sameAsOther)
	}
}

func TestRandomRecordsPayloadAndKeys(t *testing.T) {
	for _, tc := range []struct{ payload, keys int }{{0, 1}, {1, 3}, {100, 1000}, {5000, 7}} {
		gen := RandomRecords(3, tc.payload, tc.keys)
		keys := map[int64]bool{}
		payloads := map[string]bool{}
		n := 20 * tc.keys
		if n < 2000 {
			n = 2000
		}
		for i := range int64(n) {
			r := gen(i)
			if len(r.Payload) != tc.payload {
				t.Fatalf("payload %d: record %d has a %d-byte payload", tc.payload, i, len(r.Payload))
			}
			if strings.Trim(r.Payload, payloadAlphabet) != "" {
				t.Fatalf("payload %q is not alphanumeric", r.Payload)
			}
			if r.Key < 0 || r.Key >= int64(tc.keys) {
				t.Fatalf("keys %d: record %d has key %d", tc.keys, i, r.Key)
			}
			keys[r.Key] = true
			payloads[r.Payload] = true
		}
		if len(keys) != tc.keys {
			t.Fatalf("%d distinct keys in %d records, want %d", len(keys), n, tc.keys)
		}
		if tc.payload >= 8 && len(payloads) < payloadWindow/2 {
			t.Fatalf("payload %d: only %d distinct payloads in %d records", tc.payload, len(payloads), n)
		}
	}
}

func TestRandomRecordsPanicsOnBadArguments(t *testing.T) {
	for _, tc := range []struct{ payload, keys int }{{-1, 1}, {1, 0}, {1, -5}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RandomRecords(_, %d, %d) did not panic", tc.payload, tc.keys)
				}
			}()
			RandomRecords(1, tc.payload, tc.keys)
		}()
	}
}

var sinkRec Record

func TestRandomRecordsAllocs(t *testing.T) {
	gen := RandomRecords(1, 100, 1000)
	i := int64(0)
	if allocs := testing.AllocsPerRun(1000, func() {
		sinkRec = gen(i)
		i++
	}); allocs != 0 {
		t.Fatalf("generating a record allocates %v times", allocs)
	}
}

func TestRecordCodecRoundTrip(t *testing.T) {
	c := RecordCodec{}
	gen := RandomRecords(5, 64, 10)
	records := []Record{
		{},
		{Key: -1, Seq: -1},
		{Key: 1<<63 - 1, Seq: -1 << 63, Payload: "x"},
		{Key: 3, Seq: 4, Payload: strings.Repeat("é", 300)},
		gen(0), gen(12345),
	}
	var buf []byte
	for _, r := range records {
		var err error
		buf, err = c.Append(buf[:0], r)
		if err != nil {
			t.Fatalf("Append(%+v): %v", r, err)
		}
		got, err := c.Decode(buf)
		if err != nil {
			t.Fatalf("Decode(Append(%+v)): %v", r, err)
		}
		if got != r {
			t.Fatalf("round trip of %+v gives %+v", r, got)
		}
		// The payload must not alias the input buffer.
		for i := range buf {
			buf[i] = 0xff
		}
		if got != r {
			t.Fatalf("decoded record changed with its input buffer: %+v", got)
		}
	}
	// Append appends.
	out, _ := c.Append([]byte("prefix"), Record{Key: 1, Payload: "p"})
	if !bytes.HasPrefix(out, []byte("prefix")) {
		t.Fatalf("Append lost dst: %q", out)
	}
}

func TestRecordCodecCorrupt(t *testing.T) {
	c := RecordCodec{}
	full, _ := c.Append(nil, Record{Key: 300, Seq: 70000, Payload: "hello"})
	overflow := bytes.Repeat([]byte{0xff}, 11)
	for _, tc := range []struct {
		name  string
		input []byte
		want  error
		field string
	}{
		{"empty", nil, codec.ErrShortInput, "key"},
		{"key cut", full[:1], codec.ErrShortInput, "key"},
		{"seq cut", full[:3], codec.ErrShortInput, "seq"},
		{"length missing", full[:5], codec.ErrShortInput, "payload length"},
		{"payload cut", full[:len(full)-1], codec.ErrShortInput, "payload of 5 bytes, only 4 left"},
		{"trailing bytes", append(full[:len(full):len(full)], 'x'), ErrCorruptRecord, "1 bytes left over"},
		{"key overflow", overflow, ErrCorruptRecord, "key: varint overflows"},
		{"seq overflow", append([]byte{2}, overflow...), ErrCorruptRecord, "seq: varint overflows"},
		{"length overflow", append([]byte{2, 4}, overflow...), ErrCorruptRecord, "payload length: varint overflows"},
		{"huge length", []byte{2, 4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, codec.ErrShortInput, "only 0 left"},
	} {
		_, err := c.Decode(tc.input)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Decode error %v, want %v", tc.name, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "decode Record") {
			t.Errorf("%s: error %q does not say %q", tc.name, err, tc.field)
		}
	}
}

func FuzzRecordCodec(f *testing.F) {
	c := RecordCodec{}
	for _, r := range []Record{{}, {Key: -5, Seq: 9, Payload: "abc"}, RandomRecords(1, 20, 5)(3)} {
		b, _ := c.Append(nil, r)
		f.Add(b)
	}
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := c.Decode(data)
		if err != nil {
			if !errors.Is(err, codec.ErrShortInput) && !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("Decode error %v wraps neither ErrShortInput nor ErrCorruptRecord", err)
			}
			return
		}
		// Whatever decodes re-encodes to something that decodes the same.
		b, err := c.Append(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := c.Decode(b)
		if err != nil || r2 != r {
			t.Fatalf("re-decode of %+v gives %+v, %v", r, r2, err)
		}
		if len(b) > len(data) {
			t.Fatalf("canonical encoding of %+v (%d bytes) longer than an accepted one (%d)", r, len(b), len(data))
		}
	})
}

func BenchmarkRandomRecords(b *testing.B) {
	gen := RandomRecords(1, 100, 1000)
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		sinkRec = gen(i)
		i++
	}
}

func BenchmarkRecordCodec(b *testing.B) {
	c := RecordCodec{}
	r := RandomRecords(1, 100, 1000)(12345)
	enc, _ := c.Append(nil, r)
	b.Run("Append", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			buf, _ = c.Append(buf[:0], r)
		}
	})
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			sinkRec, _ = c.Decode(enc)
		}
	})
}
