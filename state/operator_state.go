package state

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync/atomic"

	"github.com/sluicehq/sluice/codec"
)

// OperatorListState is a list of operator (non-keyed) state of one
// subtask, as sources and sinks keep (split offsets, committables). On a
// restore with another parallelism, a split-distributed list is dealt out
// to the new subtasks round-robin, and a union list is given whole to every
// subtask, as in Flink.
type OperatorListState[T any] interface {
	// Get returns the elements; the slice is the caller's.
	Get() ([]T, error)
	Add(v T) error
	AddAll(vs []T) error
	// Update replaces the elements.
	Update(vs []T) error
	Clear() error
}

// OperatorStateBackend holds the operator states of one subtask. Like a
// keyed backend it is used from the task goroutine, apart from the
// snapshot it returns.
type OperatorStateBackend struct {
	index, parallelism int
	states             map[string]opState
	order              []opState
	pending            map[string]*opPending
	pendOrd            []string
}

type opState interface {
	meta() StateMeta
	capture() opCapture
}

// opCapture is a state's part of a snapshot: encode writes it.
type opCapture func(dst []byte) ([]byte, error)

// opPending is a restored operator state not registered yet: this
// subtask's share of its elements, encoded.
type opPending struct {
	meta  StateMeta
	elems [][]byte
}

// NewOperatorStateBackend returns the operator state backend of subtask
// index of parallelism.
func NewOperatorStateBackend(index, parallelism int) (*OperatorStateBackend, error) {
	if parallelism < 1 || index < 0 || index >= parallelism {
		return nil, fmt.Errorf("operator state backend: subtask %d of parallelism %d", index, parallelism)
	}
	return &OperatorStateBackend{
		index:       index,
		parallelism: parallelism,
		states:      make(map[string]opState),
		pending:     make(map[string]*opPending),
	}, nil
}

// GetOperatorListState returns the split-distributed list state d
// describes.
func GetOperatorListState[T any](b *OperatorStateBackend, d ListStateDescriptor[T]) (OperatorListState[T], error) {
	return getOperatorList(b, d, KindOperatorList)
}

// GetUnionListState returns the union list state d describes.
func GetUnionListState[T any](b *OperatorStateBackend, d ListStateDescriptor[T]) (OperatorListState[T], error) {
	return getOperatorList(b, d, KindUnionList)
}

func getOperatorList[T any](b *OperatorStateBackend, d ListStateDescriptor[T], kind Kind) (OperatorListState[T], error) {
	if err := checkName(d.Name); err != nil {
		return nil, err
	}
	if d.TTL.Enabled() {
		return nil, fmt.Errorf("state %q: operator state has no TTL: %w", d.Name, ErrInvalidDescriptor)
	}
	c := orDefault(d.Codec)
	m := StateMeta{Name: d.Name, Kind: kind, ValueCodec: CodecID(c)}
	if s, ok := b.states[m.Name]; ok {
		if err := s.meta().Compatible(m); err != nil {
			return nil, err
		}
		l, ok := s.(*opList[T])
		if !ok {
			return nil, fmt.Errorf("state %q: registered as %s, requested as %s of %T: %w", m.Name, s.meta().Kind, kind, *new(T), ErrIncompatibleState)
		}
		return l, nil
	}
	l := &opList[T]{m: m, c: c}
	if p := b.pending[m.Name]; p != nil {
		if err := p.meta.Compatible(m); err != nil {
			return nil, fmt.Errorf("restored %w", err)
		}
		for i, e := range p.elems {
			v, err := c.Decode(e)
			if err != nil {
				return nil, fmt.Errorf("state %q: restore element %d: %w", m.Name, i, err)
			}
			l.elems = append(l.elems, v)
		}
		delete(b.pending, m.Name)
		b.pendOrd = slices.DeleteFunc(b.pendOrd, func(n string) bool { return n == m.Name })
	}
	b.states[m.Name] = l
	b.order = append(b.order, l)
	return l, nil
}

// opList is the operator list state.
type opList[T any] struct {
	m     StateMeta
	c     codec.Codec[T]
	elems []T
}

func (l *opList[T]) meta() StateMeta     { return l.m }
func (l *opList[T]) Get() ([]T, error)   { return slices.Clone(l.elems), nil }
func (l *opList[T]) Add(v T) error       { l.elems = append(l.elems, v); return nil }
func (l *opList[T]) AddAll(vs []T) error { l.elems = append(l.elems, vs...); return nil }
func (l *opList[T]) Update(vs []T) error { l.elems = slices.Clone(vs); return nil }
func (l *opList[T]) Clear() error        { l.elems = nil; return nil }

// capture takes the elements as they are (the slice is never modified in
// place, only replaced or appended to past its length) and encodes them in
// the asynchronous part.
func (l *opList[T]) capture() opCapture {
	elems := slices.Clip(l.elems)
	return func(dst []byte) ([]byte, error) {
		dst = binary.AppendUvarint(dst, uint64(len(elems)))
		var buf []byte
		for i, v := range elems {
			var err error
			if buf, err = l.c.Append(buf[:0], v); err != nil {
				return dst, fmt.Errorf("state %q: encode element %d: %w", l.m.Name, i, err)
			}
			dst = appendBytes(dst, buf)
		}
		return dst, nil
	}
}

// The operator snapshot format:
//
//	"SLOS" version(1 byte)
//	uvarint len, payload, crc32c(payload)
//	payload = uvarint subtask, uvarint parallelism, uvarint #states,
//	          per state: bytes name, byte kind, bytes codec,
//	                     uvarint n, n × bytes element
const operatorMagic = "SLOS"

// Snapshot takes the synchronous part of a snapshot of the operator
// states; WriteTo encodes and writes them.
func (b *OperatorStateBackend) Snapshot(checkpointID int64) (StateSnapshot, error) {
	s := &opSnapshot{index: b.index, parallelism: b.parallelism}
	for _, st := range b.order {
		s.metas = append(s.metas, st.meta())
		s.caps = append(s.caps, st.capture())
	}
	for _, name := range b.pendOrd {
		p := b.pending[name]
		elems := p.elems
		// A union list never registered again is carried by subtask 0
		// alone: every subtask holds all of it, and the next restore
		// unites what the subtasks carry.
		if p.meta.Kind == KindUnionList && b.index != 0 {
			elems = nil
		}
		s.metas = append(s.metas, p.meta)
		s.caps = append(s.caps, func(dst []byte) ([]byte, error) {
			dst = binary.AppendUvarint(dst, uint64(len(elems)))
			for _, e := range elems {
				dst = appendBytes(dst, e)
			}
			return dst, nil
		})
	}
	return s, nil
}

type opSnapshot struct {
	index, parallelism int
	metas              []StateMeta
	caps               []opCapture
	done               atomic.Bool
}

func (s *opSnapshot) Release() { s.done.Store(true) }

func (s *opSnapshot) WriteTo(w io.Writer) (int64, error) {
	if s.done.Swap(true) {
		return 0, fmt.Errorf("operator snapshot: written or released already")
	}
	var p []byte
	p = binary.AppendUvarint(p, uint64(s.index))
	p = binary.AppendUvarint(p, uint64(s.parallelism))
	p = binary.AppendUvarint(p, uint64(len(s.metas)))
	for i, m := range s.metas {
		p = appendBytes(p, []byte(m.Name))
		p = append(p, byte(m.Kind))
		p = appendBytes(p, []byte(m.ValueCodec))
		var err error
		if p, err = s.caps[i](p); err != nil {
			return 0, err
		}
	}
	var out []byte
	out = append(out, operatorMagic...)
	out = append(out, formatVersion)
	out = binary.AppendUvarint(out, uint64(len(p)))
	out = append(out, p...)
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(p, crcTable))
	n, err := w.Write(out)
	if err != nil {
		return int64(n), fmt.Errorf("write operator snapshot: %w", err)
	}
	return int64(n), nil
}

type opSnapState struct {
	meta  StateMeta
	elems [][]byte
}

type opSnap struct {
	index, parallelism int
	states             []opSnapState
}

// OperatorSnapshotState is one state of an operator state snapshot: its
// description and its elements, encoded by the state's codec.
type OperatorSnapshotState struct {
	Meta     StateMeta
	Elements [][]byte
}

// ReadOperatorSnapshot decodes an operator state snapshot (what
// OperatorStateBackend.Snapshot writes) for tools that read checkpoints:
// the subtask that wrote it, its parallelism and its states. Nothing is
// allocated past what the stream holds, whatever lengths it claims;
// errors wrap ErrCorruptSnapshot.
func ReadOperatorSnapshot(r io.Reader) (subtask, parallelism int, states []OperatorSnapshotState, err error) {
	s, err := readOperatorSnapshot(r)
	if err != nil {
		return 0, 0, nil, err
	}
	for _, st := range s.states {
		states = append(states, OperatorSnapshotState{Meta: st.meta, Elements: st.elems})
	}
	return s.index, s.parallelism, states, nil
}

func readOperatorSnapshot(r io.Reader) (*opSnap, error) {
	br := bufio.NewReader(r)
	var magic [5]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, corrupt("magic", err)
	}
	if string(magic[:4]) != operatorMagic {
		return nil, corrupt(fmt.Sprintf("not an operator snapshot (magic %q)", magic[:4]), nil)
	}
	if magic[4] != formatVersion {
		return nil, corrupt(fmt.Sprintf("operator snapshot version %d, this build reads %d", magic[4], formatVersion), nil)
	}
	p, err := readBlock(br, nil)
	if err != nil {
		return nil, corrupt("operator snapshot", err)
	}
	d := newDecoder(p)
	s := &opSnap{index: int(d.uvarint()), parallelism: int(d.uvarint())}
	n := d.uvarint()
	for i := uint64(0); i < n && d.err() == nil; i++ {
		var st opSnapState
		st.meta.Name = string(d.bytes())
		st.meta.Kind = Kind(d.byte())
		st.meta.ValueCodec = string(d.bytes())
		m := d.uvarint()
		if m > uint64(d.len()) {
			d.fail("elements")
		}
		for j := uint64(0); j < m && d.err() == nil; j++ {
			st.elems = append(st.elems, slices.Clone(d.bytes()))
		}
		s.states = append(s.states, st)
	}
	if d.err() != nil || d.len() != 0 {
		return nil, corrupt("operator snapshot", d.err())
	}
	if s.parallelism < 1 || s.index >= s.parallelism {
		return nil, corrupt(fmt.Sprintf("operator snapshot of subtask %d of %d", s.index, s.parallelism), nil)
	}
	return s, nil
}

// Restore loads the operator state snapshots of all subtasks of the
// previous run and keeps this subtask's share: with the same parallelism,
// its own lists; otherwise split lists dealt out round-robin over the new
// subtasks (element j of the concatenation, in old subtask order, goes to
// subtask j mod parallelism); union lists whole. It must be called before
// any state is registered.
func (b *OperatorStateBackend) Restore(snapshots ...io.Reader) error {
	if len(b.states) > 0 {
		return fmt.Errorf("operator state backend: restore after states were registered: %w", ErrRestore)
	}
	if len(snapshots) == 0 {
		return nil
	}
	old := make([]*opSnap, 0, len(snapshots))
	for i, r := range snapshots {
		s, err := readOperatorSnapshot(r)
		if err != nil {
			return fmt.Errorf("operator state backend: restore snapshot %d: %w", i, err)
		}
		old = append(old, s)
	}
	slices.SortFunc(old, func(a, b *opSnap) int { return a.index - b.index })
	oldPar := old[0].parallelism
	for i, s := range old {
		if s.parallelism != oldPar || s.index != i {
			return fmt.Errorf("operator state backend: need one snapshot of each of the %d old subtasks, got subtask %d of %d at position %d: %w", oldPar, s.index, s.parallelism, i, ErrRestore)
		}
	}
	if len(old) != oldPar {
		return fmt.Errorf("operator state backend: %d snapshots for %d old subtasks: %w", len(old), oldPar, ErrRestore)
	}
	type merged struct {
		meta StateMeta
		// per old subtask, its elements
		parts [][][]byte
	}
	byName := map[string]*merged{}
	var names []string
	for i, s := range old {
		for _, st := range s.states {
			m := byName[st.meta.Name]
			if m == nil {
				m = &merged{meta: st.meta, parts: make([][][]byte, oldPar)}
				byName[st.meta.Name] = m
				names = append(names, st.meta.Name)
			} else if merged, err := m.meta.Merge(st.meta); err != nil {
				return fmt.Errorf("operator state backend: snapshots disagree: %w", err)
			} else {
				m.meta = merged
			}
			m.parts[i] = st.elems
		}
	}
	for _, name := range names {
		m := byName[name]
		var mine [][]byte
		switch {
		case m.meta.Kind == KindUnionList:
			mine = slices.Concat(m.parts...)
		case m.meta.Kind == KindBroadcast:
			// Every old subtask holds the same copy; subtask i takes old
			// subtask i mod the old parallelism's, as Flink does.
			mine = m.parts[b.index%oldPar]
		case oldPar == b.parallelism:
			mine = m.parts[b.index]
		default:
			for j, e := range slices.Concat(m.parts...) {
				if j%b.parallelism == b.index {
					mine = append(mine, e)
				}
			}
		}
		if _, ok := b.pending[name]; !ok {
			b.pendOrd = append(b.pendOrd, name)
		}
		b.pending[name] = &opPending{meta: m.meta, elems: mine}
	}
	return nil
}

// States returns the metas of the registered operator states.
func (b *OperatorStateBackend) States() []StateMeta {
	out := make([]StateMeta, 0, len(b.order))
	for _, s := range b.order {
		out = append(out, s.meta())
	}
	return out
}
