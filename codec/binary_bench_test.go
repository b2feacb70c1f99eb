package codec_test

import (
	"testing"

	"github.com/sluicehq/sluice/codec"
)

// BenchmarkCodecs is the encode/decode table of the composite-type codecs
// on the representative records (a small event with strings, integers and
// a time, a nested one, a 1 KiB string payload):
//
//	go test -run '^$' -bench Codecs -benchmem ./codec/
func BenchmarkCodecs(b *testing.B) {
	benchRecord(b, "event", sample)
	benchRecord(b, "nested", sampleN)
	benchRecord(b, "payload", sampleP)
}

func benchRecord[T any](b *testing.B, name string, v T) {
	for _, c := range []struct {
		name string
		c    codec.Codec[T]
	}{{"json", codec.JSON[T]{}}, {"binary", codec.Binary[T]{}}} {
		enc, err := c.c.Append(nil, v)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/"+c.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			b.ReportMetric(float64(len(enc)), "bytes")
			dst := make([]byte, 0, 4096)
			for b.Loop() {
				if dst, err = c.c.Append(dst[:0], v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/"+c.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.c.Decode(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
