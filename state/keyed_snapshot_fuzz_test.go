package state

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
)

// fuzzRecord is a KeyedRecord copied out of the reader's callback, empty
// slices as nil.
type fuzzRecord struct {
	State, KeyGroup                int
	Key, Namespace, UserKey, Value []byte
	Elements                       [][]byte
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// readAllKeyed reads a whole keyed snapshot with ReadKeyedSnapshot.
func readAllKeyed(r *bufio.Reader, keep func(int) bool) (*KeyedSnapshotHeader, []fuzzRecord, error) {
	var h *KeyedSnapshotHeader
	var recs []fuzzRecord
	err := ReadKeyedSnapshot(r, keep, func(hd *KeyedSnapshotHeader) error {
		h = hd
		return nil
	}, func(rec *KeyedRecord) error {
		fr := fuzzRecord{State: rec.State, KeyGroup: rec.KeyGroup, Key: cloneBytes(rec.Key), Namespace: cloneBytes(rec.Namespace),
			UserKey: cloneBytes(rec.UserKey), Value: cloneBytes(rec.Value)}
		for _, e := range rec.Elements {
			fr.Elements = append(fr.Elements, cloneBytes(e))
		}
		recs = append(recs, fr)
		return nil
	})
	return h, recs, err
}

// writeKeyed writes a snapshot of h and recs (ascending key groups) with
// KeyedSnapshotWriter.
func writeKeyed(t testing.TB, h *KeyedSnapshotHeader, recs []fuzzRecord) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewKeyedSnapshotWriter(&buf, *h)
	if err != nil {
		t.Fatal(err)
	}
	kg := -1
	for _, r := range recs {
		if r.KeyGroup != kg {
			if err := w.StartKeyGroup(r.KeyGroup); err != nil {
				t.Fatal(err)
			}
			kg = r.KeyGroup
		}
		switch h.States[r.State].Kind {
		case KindValue, KindReducing, KindAggregating:
			err = w.Value(r.State, r.Key, r.Namespace, r.Value)
		case KindList:
			err = w.ListStart(r.State, r.Key, r.Namespace, len(r.Elements))
			for _, e := range r.Elements {
				if err == nil {
					err = w.ListElement(e)
				}
			}
		case KindMap:
			err = w.MapEntry(r.State, r.Key, r.Namespace, r.UserKey, r.Value)
		default:
			t.Fatalf("a record of state %d of kind %s was read", r.State, h.States[r.State].Kind)
		}
		if err != nil {
			t.Fatalf("rewrite %+v: %v", r, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fuzzKeyedSeeds are real snapshots: every kind of state, TTL values, an
// empty list, several key groups, and snapshots without frames or states.
func fuzzKeyedSeeds(t testing.TB) [][]byte {
	ttl := AppendTTLTimestamp(nil, 1700000000000)
	h := &KeyedSnapshotHeader{MaxParallelism: 128, KeyGroups: KeyGroupRange{Start: 4, End: 11}, States: []StateMeta{
		{Name: "count", Kind: KindValue, ValueCodec: "int64"},
		{Name: "seen", Kind: KindList, ValueCodec: "string", TTL: TTLConfig{TTL: time.Hour}},
		{Name: "by-key", Kind: KindMap, ValueCodec: "int64", UserKeyCodec: "string"},
		{Name: "sum", Kind: KindReducing, ValueCodec: "int64"},
		{Name: "avg", Kind: KindAggregating, ValueCodec: "json", TTL: TTLConfig{TTL: 90 * time.Second}},
	}}
	recs := []fuzzRecord{
		{State: 0, KeyGroup: 4, Key: []byte("alice"), Value: []byte{2}},
		{State: 0, KeyGroup: 4, Key: []byte("bob"), Namespace: []byte("w1"), Value: []byte{4}},
		{State: 1, KeyGroup: 4, Key: []byte("bob"), Elements: [][]byte{append(ttl, 'a'), append(ttl, 'b'), ttl}},
		{State: 1, KeyGroup: 7, Key: []byte("carol")},
		{State: 2, KeyGroup: 7, Key: []byte("carol"), UserKey: []byte("x"), Value: []byte{1, 2, 3}},
		{State: 3, KeyGroup: 11, Key: []byte{0xff, 0}, Value: bytes.Repeat([]byte{9}, 200)},
		{State: 4, KeyGroup: 11, Key: []byte("dave"), Namespace: []byte("session"), Value: append(ttl, `{"n":1}`...)},
	}
	return [][]byte{
		writeKeyed(t, h, recs),
		writeKeyed(t, h, nil),
		writeKeyed(t, &KeyedSnapshotHeader{MaxParallelism: 1, KeyGroups: KeyGroupRange{Start: 0, End: 0}}, nil),
	}
}

// withCRCs returns data with the checksum of every block it can find (the
// header, then the frames) recomputed, so that mutations reach the header
// and frame parsing behind the checksums.
func withCRCs(data []byte) []byte {
	out := bytes.Clone(data)
	pos := len(keyedMagic) + 1
	fix := func() bool { // a block at pos: uvarint n, n bytes, crc32c
		if pos >= len(out) {
			return false
		}
		n, k := binary.Uvarint(out[pos:])
		if k <= 0 || n > uint64(len(out)-pos-k) || uint64(len(out)-pos-k)-n < 4 {
			return false
		}
		end := pos + k + int(n)
		binary.BigEndian.PutUint32(out[end:], crc32.Checksum(out[pos+k:end], crcTable))
		pos = end + 4
		return true
	}
	if !fix() {
		return out
	}
	for pos < len(out) {
		kg1, k := binary.Uvarint(out[pos:])
		if k <= 0 || kg1 == 0 {
			break
		}
		pos += k
		if !fix() {
			break
		}
	}
	return out
}

// FuzzReadKeyedSnapshot: ReadKeyedSnapshot never panics and allocates in
// proportion to its input, whatever the bytes; what it refuses wraps
// ErrCorruptSnapshot; what it accepts reads the same with key groups
// skipped, and KeyedSnapshotWriter writes it back to a snapshot that reads
// the same. Every input is also read with its checksums made right.
func FuzzReadKeyedSnapshot(f *testing.F) {
	for _, b := range fuzzKeyedSeeds(f) {
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(b[:len(b)/2])
		if _, _, err := readAllKeyed(bufio.NewReader(bytes.NewReader(b)), nil); err != nil {
			f.Fatalf("seed: %v", err)
		}
	}
	f.Add([]byte{})
	f.Add([]byte(keyedMagic))
	even := func(kg int) bool { return kg%2 == 0 }
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withCRCs(data)} {
			var h *KeyedSnapshotHeader
			var recs []fuzzRecord
			var err error
			checkAllocs(t, in, func() { h, recs, err = readAllKeyed(bufio.NewReaderSize(bytes.NewReader(in), 64<<10), nil) })
			var kept []fuzzRecord
			var errKept error
			// A small buffer: blocks span many fills.
			checkAllocs(t, in, func() { _, kept, errKept = readAllKeyed(bufio.NewReaderSize(bytes.NewReader(in), 16), even) })
			if err != nil {
				if !errors.Is(err, ErrCorruptSnapshot) {
					t.Fatalf("error %v does not wrap ErrCorruptSnapshot", err)
				}
				if errKept != nil && !errors.Is(errKept, ErrCorruptSnapshot) {
					t.Fatalf("error %v does not wrap ErrCorruptSnapshot", errKept)
				}
				continue
			}
			var want []fuzzRecord
			for _, r := range recs {
				if even(r.KeyGroup) {
					want = append(want, r)
				}
			}
			if errKept != nil || !reflect.DeepEqual(kept, want) {
				t.Fatalf("read of the even key groups: %v\n got %+v\nwant %+v", errKept, kept, want)
			}
			again := writeKeyed(t, h, recs)
			h2, recs2, err := readAllKeyed(bufio.NewReader(bytes.NewReader(again)), nil)
			if err != nil {
				t.Fatalf("rewritten snapshot does not read: %v", err)
			}
			if !reflect.DeepEqual(h2, h) || !reflect.DeepEqual(recs2, recs) {
				t.Fatalf("round trip:\n got %+v %+v\nwant %+v %+v", h2, recs2, h, recs)
			}
		}
	})
}

// checkAllocs fails t if decode allocates more than a reader of len(in)
// bytes may: a fixed 1 MiB (with the 64 KiB read buffer) plus
// 1 KiB per input byte. Only decode's own allocations count
// (testutil.CheckAllocated).
func checkAllocs(t *testing.T, in []byte, decode func()) {
	t.Helper()
	testutil.CheckAllocated(t, "reading", in, 1<<20, 1024, decode)
}
