package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
)

// The _metadata file is the JSON of Metadata followed by a trailer:
//
//	crc32c(body) uint32 LE | len(body) uint64 LE | "SLUICEMD"
//
// A file cut anywhere loses its trailer or disagrees with it, so torn and
// truncated metadata are always detected.
const (
	// MetadataName is the name of the _metadata object of a checkpoint or
	// savepoint; its presence is what makes the checkpoint complete.
	MetadataName  = "_metadata"
	metadataMagic = "SLUICEMD"
	// magicLen is the length every trailer magic has.
	magicLen   = len(metadataMagic)
	trailerLen = 4 + 8 + magicLen
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C (Castagnoli) that state handles and trailers
// record.
func Checksum(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// EncodeMetadata validates md and returns the bytes of its _metadata file.
func EncodeMetadata(md *Metadata) ([]byte, error) {
	if err := md.Validate(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(md)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint %d metadata: %w", md.CheckpointID, err)
	}
	return Frame(body, metadataMagic), nil
}

// DecodeMetadata checks the trailer of a _metadata file and decodes it.
func DecodeMetadata(data []byte) (*Metadata, error) {
	body, err := Unframe(data, metadataMagic, "metadata")
	if err != nil {
		return nil, err
	}
	var md Metadata
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&md); err != nil {
		return nil, fmt.Errorf("%w: metadata JSON: %v", ErrCorrupt, err)
	}
	if err := md.Validate(); err != nil {
		return nil, err
	}
	return &md, nil
}

// Frame appends the trailer (crc32c, length, magic) to body. magic is 8
// bytes and names the kind of file ("SLUICEMD" for _metadata); the job
// result uses the same framing with a magic of its own.
func Frame(body []byte, magic string) []byte {
	if len(magic) != magicLen {
		panic(fmt.Sprintf("snapshot.Frame: magic %q is not %d bytes", magic, magicLen))
	}
	out := make([]byte, 0, len(body)+trailerLen)
	out = append(out, body...)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(body)))
	return append(out, magic...)
}

// Unframe checks the trailer Frame appended to data and returns the body;
// what names the file kind in errors. A torn, truncated or altered file
// fails with an error wrapping ErrCorrupt.
func Unframe(data []byte, magic, what string) ([]byte, error) {
	if len(data) < trailerLen {
		return nil, fmt.Errorf("%w: %s of %d bytes is shorter than its trailer", ErrTruncated, what, len(data))
	}
	tr := data[len(data)-trailerLen:]
	if !bytes.Equal(tr[12:], []byte(magic)) {
		return nil, fmt.Errorf("%w: %s trailer missing (torn or truncated write)", ErrTruncated, what)
	}
	body := data[:len(data)-trailerLen]
	if n := binary.LittleEndian.Uint64(tr[4:12]); n != uint64(len(body)) {
		return nil, fmt.Errorf("%w: %s body is %d bytes, trailer says %d", ErrTruncated, what, len(body), n)
	}
	if sum := crc32.Checksum(body, castagnoli); sum != binary.LittleEndian.Uint32(tr[:4]) {
		return nil, fmt.Errorf("%w: %s crc32c %08x, trailer says %08x", ErrChecksumMismatch, what, sum, binary.LittleEndian.Uint32(tr[:4]))
	}
	return body, nil
}
