package inspect

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/internal/binread"
	"github.com/sluicehq/sluice/state"
)

// errCorrupt marks an operator state stream that does not parse.
var errCorrupt = errors.New("corrupt operator state")

type opState struct {
	name  string
	kind  state.Kind
	elems [][]byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readOperatorState reads an operator state stream, in the format the
// state package writes (see state.OperatorStateBackend.Snapshot):
//
//	"SLOS" version(1), uvarint len, payload, crc32c(payload) big endian
//	payload = uvarint subtask, uvarint parallelism, uvarint #states,
//	          per state: bytes name, byte kind, bytes codec, uvarint n, n × bytes element
func readOperatorState(snap *storage.Snapshot, h storage.StateHandle) ([]opState, error) {
	rc, err := snap.Open(h)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	var magic [5]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	if string(magic[:4]) != "SLOS" || magic[4] != 1 {
		return nil, fmt.Errorf("%w: magic %q version %d", errCorrupt, magic[:4], magic[4])
	}
	n, err := binary.ReadUvarint(br)
	if err != nil || n > 1<<34 {
		return nil, fmt.Errorf("%w: length: %v", errCorrupt, err)
	}
	buf := make([]byte, n+4)
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	p := buf[:n]
	if crc32.Checksum(p, castagnoli) != binary.BigEndian.Uint32(buf[n:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	if _, err := io.Copy(io.Discard, br); err != nil { // verifies the file's checksum
		return nil, err
	}
	d := binread.New(p)
	d.Uvarint() // subtask
	d.Uvarint() // parallelism
	count := d.Uvarint()
	var out []opState
	for i := uint64(0); i < count && d.Err() == nil; i++ {
		s := opState{name: string(d.Bytes()), kind: state.Kind(d.Byte())}
		d.Bytes() // codec name
		m := d.Uvarint()
		if m > uint64(d.Len()) {
			d.Fail("element count")
		}
		for j := uint64(0); j < m && d.Err() == nil; j++ {
			s.elems = append(s.elems, d.Bytes())
		}
		out = append(out, s)
	}
	if d.Err() != nil || d.Len() != 0 {
		return nil, fmt.Errorf("%w: payload", errCorrupt)
	}
	return out, nil
}
