package registry

import (
	"encoding/binary"
	"fmt"
)

// magic is the first byte of the Confluent wire format.
const magic = 0

// HeaderSize is the length of the header before a format's body: the
// magic byte and the big-endian 4-byte schema id.
const HeaderSize = 5

// AppendHeader appends the Confluent header for schema id to dst.
func AppendHeader(dst []byte, id int) []byte {
	return append(dst, magic, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

// ReadHeader splits b into the schema id of its header and the body after
// it; bytes that are not in the wire format give an error wrapping
// ErrBadWireFormat.
func ReadHeader(b []byte) (id int, body []byte, err error) {
	if len(b) < HeaderSize {
		return 0, nil, fmt.Errorf("%w: %d bytes, the header needs %d", ErrBadWireFormat, len(b), HeaderSize)
	}
	if b[0] != magic {
		return 0, nil, fmt.Errorf("%w: first byte is %#x, not the magic byte 0", ErrBadWireFormat, b[0])
	}
	return int(binary.BigEndian.Uint32(b[1:HeaderSize])), b[HeaderSize:], nil
}

// AppendIndexes appends Protobuf message indexes (the path of the message
// in its file: [i] for the i-th top-level message, [i, j] for its j-th
// nested message) as Confluent writes them: a zig-zag varint count, then
// each index; [0] is the single byte 0.
func AppendIndexes(dst []byte, indexes []int) []byte {
	if len(indexes) == 1 && indexes[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(indexes)))
	for _, i := range indexes {
		dst = binary.AppendVarint(dst, int64(i))
	}
	return dst
}

// maxIndexes bounds the message index path read from a record (messages
// nested deeper are not plausible; the bound keeps a corrupt count from
// allocating).
const maxIndexes = 64

// ReadIndexes reads Protobuf message indexes from the start of b and
// returns them and the rest.
func ReadIndexes(b []byte) (indexes []int, rest []byte, err error) {
	n, w := binary.Varint(b)
	if w <= 0 {
		return nil, nil, fmt.Errorf("%w: malformed message index count", ErrBadWireFormat)
	}
	b = b[w:]
	if n == 0 {
		return []int{0}, b, nil
	}
	if n < 0 || n > maxIndexes {
		return nil, nil, fmt.Errorf("%w: message index count %d out of range [0, %d]", ErrBadWireFormat, n, maxIndexes)
	}
	indexes = make([]int, n)
	for i := range indexes {
		v, w := binary.Varint(b)
		if w <= 0 || v < 0 {
			return nil, nil, fmt.Errorf("%w: malformed message index %d", ErrBadWireFormat, i)
		}
		indexes[i] = int(v)
		b = b[w:]
	}
	return indexes, b, nil
}
