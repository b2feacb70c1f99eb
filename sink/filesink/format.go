package filesink

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
)

// The layout of a data file (in progress or committed):
//
//	header  = "SLFS" version(1 byte, = 1)
//	record  = 0x01 uvarint(len(payload)) payload      (payload: the codec's bytes)
//	footer  = 0x00 count(uint64 BE) crc(uint32 BE)
//	file    = header record* footer
//
// count is the number of records and crc the CRC-32C (Castagnoli) of every
// byte before the footer. A file without its footer was never handed over.
// The committable carries the size and the CRC-32C of the whole file,
// footer included. Payloads are length-prefixed, so any bytes round-trip.
const (
	fileMagic     = "SLFS"
	fileVersion   = 1
	headerLen     = len(fileMagic) + 1
	recordMarker  = 0x01
	footerMarker  = 0x00
	footerLen     = 1 + 8 + 4
	maxRecordSize = 1 << 31 // sanity bound when reading a length prefix
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendHeader(dst []byte) []byte {
	return append(append(dst, fileMagic...), fileVersion)
}

func appendRecordPrefix(dst []byte, n int) []byte {
	dst = append(dst, recordMarker)
	return binary.AppendUvarint(dst, uint64(n))
}

func appendFooter(dst []byte, count uint64, crc uint32) []byte {
	dst = append(dst, footerMarker)
	dst = binary.BigEndian.AppendUint64(dst, count)
	return binary.BigEndian.AppendUint32(dst, crc)
}

// checksumWriter writes to a file and keeps the running CRC-32C and size
// of everything written.
type checksumWriter struct {
	f    *os.File
	crc  uint32
	size int64
}

func (w *checksumWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.crc = crc32.Update(w.crc, castagnoli, p[:n])
	w.size += int64(n)
	return n, err
}

// parseRecords checks the layout of a whole data file and calls fn with the
// payload of every record in order. The payload slice is only valid during
// the call.
func parseRecords(data []byte, fn func(payload []byte) error) error {
	if len(data) < headerLen+footerLen {
		return fmt.Errorf("%d bytes is shorter than header and footer: %w", len(data), ErrCorrupt)
	}
	if string(data[:len(fileMagic)]) != fileMagic {
		return fmt.Errorf("bad magic %q: %w", data[:len(fileMagic)], ErrCorrupt)
	}
	if v := data[len(fileMagic)]; v != fileVersion {
		return fmt.Errorf("unknown format version %d: %w", v, ErrCorrupt)
	}
	var count uint64
	pos := headerLen
	for {
		if pos >= len(data) {
			return fmt.Errorf("no footer after %d records (truncated): %w", count, ErrCorrupt)
		}
		switch data[pos] {
		case recordMarker:
			n, k := binary.Uvarint(data[pos+1:])
			if k <= 0 || n > maxRecordSize || uint64(len(data)-pos-1-k) < n {
				return fmt.Errorf("record %d at offset %d: bad or truncated length: %w", count, pos, ErrCorrupt)
			}
			start := pos + 1 + k
			end := start + int(n)
			if err := fn(data[start:end]); err != nil {
				return fmt.Errorf("record %d: %w", count, err)
			}
			count++
			pos = end
		case footerMarker:
			if rest := len(data) - pos; rest != footerLen {
				return fmt.Errorf("footer at offset %d has %d bytes, want %d: %w", pos, rest, footerLen, ErrCorrupt)
			}
			wantCount := binary.BigEndian.Uint64(data[pos+1:])
			wantCRC := binary.BigEndian.Uint32(data[pos+9:])
			if wantCount != count {
				return fmt.Errorf("footer counts %d records, file holds %d: %w", wantCount, count, ErrCorrupt)
			}
			if got := crc32.Checksum(data[:pos], castagnoli); got != wantCRC {
				return fmt.Errorf("checksum %08x, footer says %08x: %w", got, wantCRC, ErrCorrupt)
			}
			return nil
		default:
			return fmt.Errorf("unknown marker %#x at offset %d: %w", data[pos], pos, ErrCorrupt)
		}
	}
}
