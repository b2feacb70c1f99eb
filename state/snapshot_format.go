package state

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/sluicehq/sluice/internal/binread"
)

// The canonical keyed snapshot format, written and read by every keyed
// backend (so a heap snapshot restores into RocksDB and back) and grouped
// by key group (so a restore at another parallelism reads only the key
// groups it owns):
//
//	"SLKS" version(1 byte)
//	header:  uvarint len, payload, crc32c(payload) (4 bytes, big endian)
//	         payload = uvarint maxParallelism, uvarint start, uvarint end+1,
//	                   uvarint #states, per state: bytes name, byte kind,
//	                   bytes valueCodec, bytes userKeyCodec, uvarint ttl millis (0: off)
//	frames:  one per non-empty key group, ascending:
//	         uvarint kg+1, uvarint len, payload, crc32c(payload)
//	end:     uvarint 0
//
// A frame payload is a sequence of records, each starting with the uvarint
// index of its state in the header:
//
//	value, reducing, aggregating:  bytes key, bytes ns, bytes value
//	list:                          bytes key, bytes ns, uvarint n, n × bytes element
//	map:                           bytes key, bytes ns, bytes userKey, bytes value
//
// where bytes = uvarint length + data, and values of TTL states carry their
// timestamp prefix.

const (
	keyedMagic    = "SLKS"
	formatVersion = 1
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// KeyedSnapshotHeader is the header of a keyed snapshot.
type KeyedSnapshotHeader struct {
	MaxParallelism int
	KeyGroups      KeyGroupRange
	States         []StateMeta
}

// KeyedSnapshotWriter writes a keyed snapshot in the canonical format.
// Call StartKeyGroup with ascending key groups, the record methods for the
// entries of that key group, and Close at the end.
type KeyedSnapshotWriter struct {
	w       *bufio.Writer
	n       int64
	states  []StateMeta
	kg      int // current key group, -1 before the first
	frame   []byte
	listRem int // elements a started list still needs
	err     error
}

// NewKeyedSnapshotWriter writes the header and returns the writer.
func NewKeyedSnapshotWriter(w io.Writer, h KeyedSnapshotHeader) (*KeyedSnapshotWriter, error) {
	sw := &KeyedSnapshotWriter{w: bufio.NewWriterSize(w, 64<<10), states: h.States, kg: -1}
	var p []byte
	p = binary.AppendUvarint(p, uint64(h.MaxParallelism))
	p = binary.AppendUvarint(p, uint64(h.KeyGroups.Start))
	p = binary.AppendUvarint(p, uint64(h.KeyGroups.End+1))
	p = binary.AppendUvarint(p, uint64(len(h.States)))
	for _, m := range h.States {
		p = appendBytes(p, []byte(m.Name))
		p = append(p, byte(m.Kind))
		p = appendBytes(p, []byte(m.ValueCodec))
		p = appendBytes(p, []byte(m.UserKeyCodec))
		p = binary.AppendUvarint(p, uint64(m.TTL.millis()))
	}
	sw.write([]byte(keyedMagic))
	sw.write([]byte{formatVersion})
	sw.writeBlock(p)
	return sw, sw.err
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func (w *KeyedSnapshotWriter) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.w.Write(b)
	w.n += int64(n)
	if err != nil {
		w.err = fmt.Errorf("write keyed snapshot: %w", err)
	}
}

func (w *KeyedSnapshotWriter) writeBlock(p []byte) {
	w.write(binary.AppendUvarint(nil, uint64(len(p))))
	w.write(p)
	w.write(binary.BigEndian.AppendUint32(nil, crc32.Checksum(p, crcTable)))
}

// StartKeyGroup ends the previous key group's frame and starts kg's.
func (w *KeyedSnapshotWriter) StartKeyGroup(kg int) error {
	if err := w.endFrame(); err != nil {
		return err
	}
	if kg <= w.kg {
		return fmt.Errorf("keyed snapshot: key group %d after %d", kg, w.kg)
	}
	w.kg = kg
	return nil
}

func (w *KeyedSnapshotWriter) endFrame() error {
	if w.listRem != 0 {
		w.err = fmt.Errorf("keyed snapshot: list record short of %d elements", w.listRem)
	}
	if w.err != nil || w.kg < 0 || len(w.frame) == 0 {
		w.frame = w.frame[:0]
		return w.err
	}
	w.write(binary.AppendUvarint(nil, uint64(w.kg+1)))
	w.writeBlock(w.frame)
	w.frame = w.frame[:0]
	return w.err
}

func (w *KeyedSnapshotWriter) record(state int, kinds ...Kind) error {
	if w.err != nil {
		return w.err
	}
	if w.kg < 0 {
		return fmt.Errorf("keyed snapshot: record before StartKeyGroup")
	}
	if w.listRem != 0 {
		return fmt.Errorf("keyed snapshot: record before %d list elements", w.listRem)
	}
	if state < 0 || state >= len(w.states) {
		return fmt.Errorf("keyed snapshot: state index %d out of %d", state, len(w.states))
	}
	for _, k := range kinds {
		if w.states[state].Kind == k {
			w.frame = binary.AppendUvarint(w.frame, uint64(state))
			return nil
		}
	}
	return fmt.Errorf("keyed snapshot: state %q is a %s state", w.states[state].Name, w.states[state].Kind)
}

// Value writes the value of a value, reducing or aggregating state.
func (w *KeyedSnapshotWriter) Value(state int, key, ns, value []byte) error {
	if err := w.record(state, KindValue, KindReducing, KindAggregating); err != nil {
		return err
	}
	w.frame = appendBytes(appendBytes(appendBytes(w.frame, key), ns), value)
	return nil
}

// ListStart starts the list of a key and namespace; n calls to
// ListElement must follow.
func (w *KeyedSnapshotWriter) ListStart(state int, key, ns []byte, n int) error {
	if err := w.record(state, KindList); err != nil {
		return err
	}
	w.frame = appendBytes(appendBytes(w.frame, key), ns)
	w.frame = binary.AppendUvarint(w.frame, uint64(n))
	w.listRem = n
	return nil
}

// ListElement writes one element of the started list.
func (w *KeyedSnapshotWriter) ListElement(elem []byte) error {
	if w.listRem <= 0 {
		return fmt.Errorf("keyed snapshot: list element without a started list")
	}
	w.listRem--
	w.frame = appendBytes(w.frame, elem)
	return nil
}

// MapEntry writes one entry of a map state.
func (w *KeyedSnapshotWriter) MapEntry(state int, key, ns, userKey, value []byte) error {
	if err := w.record(state, KindMap); err != nil {
		return err
	}
	w.frame = appendBytes(appendBytes(appendBytes(appendBytes(w.frame, key), ns), userKey), value)
	return nil
}

// rawRecords appends records, already encoded without their state index,
// to the current frame (restored states not registered yet).
func (w *KeyedSnapshotWriter) rawRecords(state int, data []byte) error {
	for len(data) > 0 {
		n, err := recordLen(w.states[state].Kind, data)
		if err != nil {
			return err
		}
		if err := w.record(state, w.states[state].Kind); err != nil {
			return err
		}
		w.frame = append(w.frame, data[:n]...)
		data = data[n:]
	}
	return nil
}

// Close ends the last frame and writes the end marker. It does not close
// the underlying writer.
func (w *KeyedSnapshotWriter) Close() error {
	if err := w.endFrame(); err != nil {
		return err
	}
	w.write([]byte{0})
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("write keyed snapshot: %w", err)
		}
	}
	return w.err
}

// Written is the number of bytes written so far.
func (w *KeyedSnapshotWriter) Written() int64 { return w.n }

// KeyedRecord is one record of a keyed snapshot. Its slices are valid
// during the callback only.
type KeyedRecord struct {
	State    int // index in the header's States
	KeyGroup int
	Key      []byte
	// Namespace, UserKey (map), Value (value-like and map) and Elements
	// (list); values of TTL states carry their timestamp prefix.
	Namespace []byte
	UserKey   []byte
	Value     []byte
	Elements  [][]byte
}

// ReadKeyedSnapshot reads a keyed snapshot: onHeader with its header, then
// onRecord with every record of the key groups keep accepts (frames of
// other key groups are skipped without parsing). Corruption errors wrap
// ErrCorruptSnapshot.
func ReadKeyedSnapshot(r io.Reader, keep func(kg int) bool, onHeader func(*KeyedSnapshotHeader) error, onRecord func(*KeyedRecord) error) error {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	h, err := readKeyedHeader(br)
	if err != nil {
		return err
	}
	if err := onHeader(h); err != nil {
		return err
	}
	rec := &KeyedRecord{}
	var buf []byte
	last := -1
	for {
		kg1, err := binary.ReadUvarint(br)
		if err != nil {
			return corrupt("frame key group", err)
		}
		if kg1 == 0 {
			return nil
		}
		kg := int(kg1 - 1)
		if kg <= last || !h.KeyGroups.Contains(kg) {
			return corrupt(fmt.Sprintf("key group %d after %d, range %v", kg, last, h.KeyGroups), nil)
		}
		last = kg
		if keep != nil && !keep(kg) {
			if err := skipBlock(br); err != nil {
				return corrupt(fmt.Sprintf("key group %d", kg), err)
			}
			continue
		}
		buf, err = readBlock(br, buf)
		if err != nil {
			return corrupt(fmt.Sprintf("key group %d", kg), err)
		}
		if err := parseFrame(buf, kg, h.States, rec, onRecord); err != nil {
			return err
		}
	}
}

// readKeyedHeader reads magic, version and header.
func readKeyedHeader(br *bufio.Reader) (*KeyedSnapshotHeader, error) {
	var magic [5]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, corrupt("magic", err)
	}
	if string(magic[:4]) != keyedMagic {
		return nil, corrupt(fmt.Sprintf("not a keyed snapshot (magic %q)", magic[:4]), nil)
	}
	if magic[4] != formatVersion {
		return nil, corrupt(fmt.Sprintf("keyed snapshot version %d, this build reads %d", magic[4], formatVersion), nil)
	}
	p, err := readBlock(br, nil)
	if err != nil {
		return nil, corrupt("header", err)
	}
	d := newDecoder(p)
	h := &KeyedSnapshotHeader{MaxParallelism: int(d.uvarint())}
	h.KeyGroups.Start = int(d.uvarint())
	h.KeyGroups.End = int(d.uvarint()) - 1
	n := d.uvarint()
	for i := uint64(0); i < n && d.err() == nil; i++ {
		var m StateMeta
		m.Name = string(d.bytes())
		m.Kind = Kind(d.byte())
		m.ValueCodec = string(d.bytes())
		m.UserKeyCodec = string(d.bytes())
		m.TTL.TTL = time.Duration(d.uvarint()) * time.Millisecond
		h.States = append(h.States, m)
	}
	if d.err() != nil || d.len() != 0 {
		return nil, corrupt("header", d.err())
	}
	return h, nil
}

func parseFrame(buf []byte, kg int, states []StateMeta, rec *KeyedRecord, onRecord func(*KeyedRecord) error) error {
	d := newDecoder(buf)
	for d.len() > 0 {
		idx := d.uvarint()
		if d.err() != nil || idx >= uint64(len(states)) {
			return corrupt(fmt.Sprintf("key group %d: state index %d", kg, idx), d.err())
		}
		*rec = KeyedRecord{State: int(idx), KeyGroup: kg, Elements: rec.Elements[:0]}
		if err := d.record(states[idx].Kind, rec); err != nil {
			return corrupt(fmt.Sprintf("key group %d, state %q", kg, states[idx].Name), err)
		}
		if err := onRecord(rec); err != nil {
			return err
		}
	}
	return nil
}

func corrupt(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w: %w", what, ErrCorruptSnapshot, err)
	}
	return fmt.Errorf("%s: %w", what, ErrCorruptSnapshot)
}

// blockChunk is how much readBlock allocates ahead of the bytes read.
const blockChunk = 64 << 10

func readBlock(br *bufio.Reader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, err
	}
	if n > 1<<40 {
		return nil, fmt.Errorf("block of %d bytes", n)
	}
	// The length comes from the stream: a corrupt one must not allocate
	// what it claims before the bytes are there. Past blockChunk the
	// buffer grows as they arrive.
	if uint64(cap(buf)) >= n+4 {
		buf = buf[:n+4]
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
	} else {
		buf = buf[:0]
		for remaining := n + 4; remaining > 0; {
			c := min(remaining, blockChunk)
			start := len(buf)
			buf = append(buf, make([]byte, c)...)
			if _, err := io.ReadFull(br, buf[start:]); err != nil {
				return nil, err
			}
			remaining -= c
		}
	}
	p := buf[:n]
	if crc32.Checksum(p, crcTable) != binary.BigEndian.Uint32(buf[n:]) {
		return nil, errors.New("checksum mismatch")
	}
	return p, nil
}

func skipBlock(br *bufio.Reader) error {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return err
	}
	_, err = br.Discard(int(n) + 4)
	return err
}

// decoder reads the primitives of the format with the module's one varint
// reader (internal/binread); the first error sticks.
type decoder struct{ r binread.Reader }

func newDecoder(b []byte) decoder { return decoder{r: binread.New(b)} }

func (d *decoder) uvarint() uint64  { return d.r.Uvarint() }
func (d *decoder) byte() byte       { return d.r.Byte() }
func (d *decoder) bytes() []byte    { return d.r.Bytes() }
func (d *decoder) fail(what string) { d.r.Fail(what) }
func (d *decoder) err() error       { return d.r.Err() }
func (d *decoder) len() int         { return d.r.Len() }

// record decodes one record body of the given kind into rec.
func (d *decoder) record(kind Kind, rec *KeyedRecord) error {
	rec.Key = d.bytes()
	rec.Namespace = d.bytes()
	switch kind {
	case KindValue, KindReducing, KindAggregating:
		rec.Value = d.bytes()
	case KindList:
		n := d.uvarint()
		if n > uint64(d.len()) {
			d.fail("list")
		}
		for i := uint64(0); i < n && d.err() == nil; i++ {
			rec.Elements = append(rec.Elements, d.bytes())
		}
	case KindMap:
		rec.UserKey = d.bytes()
		rec.Value = d.bytes()
	default:
		return fmt.Errorf("unknown state kind %d", kind)
	}
	return d.err()
}

// recordLen returns the length of the first record body (without its state
// index) in data.
func recordLen(kind Kind, data []byte) (int, error) {
	d := newDecoder(data)
	var rec KeyedRecord
	if err := d.record(kind, &rec); err != nil {
		return 0, corrupt("record", err)
	}
	return len(data) - d.len(), nil
}
