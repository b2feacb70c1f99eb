package source

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/codec"
)

// ErrCorruptRecord is returned (wrapped) by RecordCodec.Decode when its input
// is not the encoding of a Record (a varint overflows, or bytes are left over
// after the payload). Truncated input wraps codec.ErrShortInput instead.
var ErrCorruptRecord = errors.New("source: corrupt record")

// Record is the record of the benchmarks and demos, made by RandomRecords.
type Record struct {
	// Key is in [0, distinctKeys).
	Key int64
	// Seq is the record's datagen index.
	Seq int64
	// Payload is payloadSize pseudo-random alphanumeric bytes.
	Payload string
}

// payloadWindow is the number of distinct payload offsets: RandomRecords
// builds one string of payloadSize+payloadWindow bytes and slices it.
const payloadWindow = 1024

const payloadAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// RandomRecords returns a generator for NewDatagen whose record for an index
// is a function of (seed, index) alone: Key is a hash of both modulo
// distinctKeys, Seq is the index and Payload a substring, at an offset
// hashed from both, of one pseudo-random string built once from the seed.
// Generating a record allocates nothing, and the generator is safe for
// concurrent use.
//
// It panics if payloadSize < 0 or distinctKeys < 1.
func RandomRecords(seed int64, payloadSize int, distinctKeys int) func(index int64) Record {
	if payloadSize < 0 {
		panic(fmt.Sprintf("source.RandomRecords: payloadSize %d < 0", payloadSize))
	}
	if distinctKeys < 1 {
		panic(fmt.Sprintf("source.RandomRecords: distinctKeys %d < 1", distinctKeys))
	}
	seedMix := splitmix64(uint64(seed))
	var text string
	if payloadSize > 0 {
		b := make([]byte, payloadSize+payloadWindow)
		x := seedMix
		for i := range b {
			x = splitmix64(x)
			b[i] = payloadAlphabet[x%uint64(len(payloadAlphabet))]
		}
		text = string(b)
	}
	keys := uint64(distinctKeys)
	return func(index int64) Record {
		h := splitmix64(seedMix ^ uint64(index))
		r := Record{Key: int64(h % keys), Seq: index}
		if payloadSize > 0 {
			off := splitmix64(h) % payloadWindow
			r.Payload = text[off : off+uint64(payloadSize)]
		}
		return r
	}
}

// splitmix64 is the SplitMix64 finalizer: a fast bijective mix of 64 bits.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// RecordCodec is the compact binary codec for Record: Key and Seq as zig-zag
// varints, then the payload length as a varint and the payload bytes.
type RecordCodec struct{}

var _ codec.Codec[Record] = RecordCodec{}

// Append appends the encoding of r to dst.
func (RecordCodec) Append(dst []byte, r Record) ([]byte, error) {
	dst = binary.AppendVarint(dst, r.Key)
	dst = binary.AppendVarint(dst, r.Seq)
	dst = binary.AppendUvarint(dst, uint64(len(r.Payload)))
	return append(dst, r.Payload...), nil
}

// Decode decodes a Record from exactly the bytes in src. The payload is
// copied, so src may be reused afterwards.
func (RecordCodec) Decode(src []byte) (Record, error) {
	var r Record
	total := len(src)
	key, n := binary.Varint(src)
	if n <= 0 {
		return Record{}, varintErr("key", total, n)
	}
	src = src[n:]
	seq, n := binary.Varint(src)
	if n <= 0 {
		return Record{}, varintErr("seq", total, n)
	}
	src = src[n:]
	size, n := binary.Uvarint(src)
	if n <= 0 {
		return Record{}, varintErr("payload length", total, n)
	}
	src = src[n:]
	if size > uint64(len(src)) {
		return Record{}, fmt.Errorf("decode Record (%d bytes): payload of %d bytes, only %d left: %w",
			total, size, len(src), codec.ErrShortInput)
	}
	if size < uint64(len(src)) {
		return Record{}, fmt.Errorf("decode Record (%d bytes): %d bytes left over after the payload: %w",
			total, uint64(len(src))-size, ErrCorruptRecord)
	}
	r.Key, r.Seq, r.Payload = key, seq, string(src)
	return r, nil
}

// varintErr explains a failed binary.(U)varint read of field (n <= 0).
func varintErr(field string, total, n int) error {
	if n == 0 {
		return fmt.Errorf("decode Record (%d bytes): %s: varint truncated: %w", total, field, codec.ErrShortInput)
	}
	return fmt.Errorf("decode Record (%d bytes): %s: varint overflows 64 bits: %w", total, field, ErrCorruptRecord)
}
