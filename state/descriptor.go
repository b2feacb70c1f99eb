package state

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/sluicehq/sluice/codec"
)

// Kind is the kind of a keyed or operator state.
type Kind uint8

const (
	KindValue Kind = iota + 1
	KindList
	KindMap
	KindReducing
	KindAggregating
	// KindOperatorList and KindUnionList are operator (non-keyed) states.
	KindOperatorList
	KindUnionList
	// KindBroadcast is the broadcast state of an operator (a map every
	// subtask holds a copy of: broadcast_state.go).
	KindBroadcast
)

func (k Kind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindList:
		return "list"
	case KindMap:
		return "map"
	case KindReducing:
		return "reducing"
	case KindAggregating:
		return "aggregating"
	case KindOperatorList:
		return "operator-list"
	case KindUnionList:
		return "union-list"
	case KindBroadcast:
		return "broadcast"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// StateMeta is the backend-independent description of a registered state:
// what a byte-level backend needs to store it, and what a snapshot records
// so that a restore can check it is read back the same way.
type StateMeta struct {
	Name string
	Kind Kind
	// ValueCodec identifies the codec of values, list elements, map values
	// or accumulators; UserKeyCodec that of map keys (map states only).
	ValueCodec   string
	UserKeyCodec string
	TTL          TTLConfig
}

// Compatible reports, as an error naming the state, why data written under
// m (a registration or a snapshot) cannot be read under n: a different
// kind, a codec that cannot read m's (codec.Binary reads codec.JSON of the
// same type, what earlier versions' default wrote), or TTL switched on or
// off (the stored format differs). A changed TTL duration or update type
// is compatible.
func (m StateMeta) Compatible(n StateMeta) error {
	switch {
	case m.Kind != n.Kind:
		return fmt.Errorf("state %q: registered as %s, requested as %s: %w", m.Name, m.Kind, n.Kind, ErrIncompatibleState)
	case !codecReads(n.ValueCodec, m.ValueCodec):
		return fmt.Errorf("state %q: value codec %s, requested with %s: %w", m.Name, m.ValueCodec, n.ValueCodec, ErrIncompatibleState)
	case !codecReads(n.UserKeyCodec, m.UserKeyCodec):
		return fmt.Errorf("state %q: user key codec %s, requested with %s: %w", m.Name, m.UserKeyCodec, n.UserKeyCodec, ErrIncompatibleState)
	case m.TTL.Enabled() != n.TTL.Enabled():
		return fmt.Errorf("state %q: TTL enabled %v, requested with TTL enabled %v: %w", m.Name, m.TTL.Enabled(), n.TTL.Enabled(), ErrIncompatibleState)
	}
	return nil
}

// TTLUpdateType says which accesses refresh an entry's time to live, as
// Flink's StateTtlConfig.UpdateType.
type TTLUpdateType uint8

const (
	// OnCreateAndWrite refreshes the TTL when an entry is created or written.
	OnCreateAndWrite TTLUpdateType = iota
	// OnReadAndWrite also refreshes it when the entry is read.
	OnReadAndWrite
)

// TTLVisibility says whether an expired entry that is still stored may be
// returned, as Flink's StateTtlConfig.StateVisibility.
type TTLVisibility uint8

const (
	// NeverReturnExpired hides expired entries (the default).
	NeverReturnExpired TTLVisibility = iota
	// ReturnExpiredIfNotCleanedUp returns an expired entry once, if it has
	// not been cleaned up yet, and removes it.
	ReturnExpiredIfNotCleanedUp
)

// TTLConfig is a state's time to live, as Flink's StateTtlConfig. The zero
// value disables TTL. Expired entries are invisible (NeverReturnExpired),
// removed when accessed, and left out of snapshots. TTL is measured with
// the backend's Clock, in milliseconds.
type TTLConfig struct {
	TTL        time.Duration
	UpdateType TTLUpdateType
	Visibility TTLVisibility
}

// Enabled reports whether the config sets a time to live.
func (c TTLConfig) Enabled() bool { return c.TTL > 0 }

func (c TTLConfig) validate(name string) error {
	if c.TTL < 0 || (c.TTL > 0 && c.TTL < time.Millisecond) {
		return fmt.Errorf("state %q: TTL %v must be 0 (off) or at least 1ms: %w", name, c.TTL, ErrInvalidDescriptor)
	}
	if c.UpdateType > OnReadAndWrite || c.Visibility > ReturnExpiredIfNotCleanedUp {
		return fmt.Errorf("state %q: unknown TTL update type or visibility: %w", name, ErrInvalidDescriptor)
	}
	return nil
}

func (c TTLConfig) millis() int64 { return int64(c.TTL / time.Millisecond) }

// Clock is the time source of TTL. Backends take one in their options so
// tests can drive expiry.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AggregateFunction is the aggregation of an AggregatingState, as Flink's
// AggregateFunction. Accumulators handed to Add and Merge may be modified
// and returned: when an asynchronous snapshot is still writing an
// accumulator that holds references (a map, a slice, a pointer), the heap
// backend hands Add a copy made through the accumulator's codec, as
// Flink's copy-on-write heap state copies through the serializer.
type AggregateFunction[IN, ACC, OUT any] interface {
	CreateAccumulator() ACC
	Add(value IN, acc ACC) ACC
	GetResult(acc ACC) OUT
	Merge(a, b ACC) ACC
}

// Descriptor is implemented by the state descriptors of this package
// (ValueStateDescriptor and the others); it is what a KeyedBackend is given
// to register a state. Backends outside this package use Meta and Bind.
type Descriptor interface {
	// Meta describes the state. It fails if the descriptor is invalid.
	Meta() (StateMeta, error)
	// Bind returns the state handle that works over a byte-level store:
	// raw must be a RawValueState for value, reducing and aggregating
	// states, a RawListState for list states and a RawMapState for map
	// states. clock drives TTL. This is how byte-level backends (RocksDB)
	// build handles.
	Bind(raw any, clock Clock) (any, error)
	// heapState returns the typed table of the heap backend.
	heapState(b *HeapKeyedBackend, m StateMeta) heapState
}

// ValueStateDescriptor describes a ValueState: a single value per key and
// namespace.
type ValueStateDescriptor[T any] struct {
	Name string
	// Codec encodes the value; nil means codec.Default[T]().
	Codec codec.Codec[T]
	TTL   TTLConfig
}

// ListStateDescriptor describes a ListState (keyed) or an operator list
// state.
type ListStateDescriptor[T any] struct {
	Name string
	// Codec encodes one element; nil means codec.Default[T]().
	Codec codec.Codec[T]
	// TTL applies per element.
	TTL TTLConfig
}

// MapStateDescriptor describes a MapState: a map per key and namespace.
type MapStateDescriptor[K comparable, V any] struct {
	Name string
	// KeyCodec and ValueCodec encode map keys and values; nil means
	// codec.DefaultKey of the key type (JSON for composite keys, whose
	// bytes are looked up) and codec.Default of the value type.
	KeyCodec   codec.Codec[K]
	ValueCodec codec.Codec[V]
	// TTL applies per map entry.
	TTL TTLConfig
}

// ReducingStateDescriptor describes a ReducingState: Add folds each value
// into the stored one with Reduce.
type ReducingStateDescriptor[T any] struct {
	Name   string
	Reduce func(acc, value T) T
	// Codec encodes the reduced value; nil means codec.Default[T]().
	Codec codec.Codec[T]
	TTL   TTLConfig
}

// AggregatingStateDescriptor describes an AggregatingState: Add adds each
// input to an accumulator with Aggregate; Get returns its result.
type AggregatingStateDescriptor[IN, ACC, OUT any] struct {
	Name      string
	Aggregate AggregateFunction[IN, ACC, OUT]
	// AccCodec encodes the accumulator; nil means codec.Default[ACC]().
	AccCodec codec.Codec[ACC]
	TTL      TTLConfig
}

// CodecID names a codec by its dynamic type, the identity a snapshot
// records so that a restore with a different codec is refused.
func CodecID(c any) string {
	t := reflect.TypeOf(c)
	if t == nil {
		return "<nil>"
	}
	prefix := ""
	for t.Kind() == reflect.Pointer {
		prefix += "*"
		t = t.Elem()
	}
	if t.PkgPath() != "" && t.Name() != "" {
		return prefix + t.PkgPath() + "." + t.Name()
	}
	return prefix + t.String()
}

// Merge returns the description under which the data of m and n
// (snapshots of the same state, as in a rescaled restore) is read: m,
// with n's codecs where only those read both (codec.Binary reads what
// codec.JSON wrote), or why the two cannot be read together.
func (m StateMeta) Merge(n StateMeta) (StateMeta, error) {
	if n.Compatible(m) == nil { // m reads n's data
		return m, nil
	}
	if err := m.Compatible(n); err != nil {
		return m, err
	}
	m.ValueCodec, m.UserKeyCodec = n.ValueCodec, n.UserKeyCodec
	return m, nil
}

var (
	binaryCodecID = genericName(CodecID(codec.Binary[int]{}))
	jsonCodecID   = genericName(CodecID(codec.JSON[int]{}))
)

// genericName is the identity of a generic codec without its type
// argument ("pkg.Name[").
func genericName(id string) string { return id[:strings.IndexByte(id, '[')+1] }

// codecReads reports whether the codec identified by reader decodes what
// the one identified by written encoded: the same codec, or Binary of a
// type reading JSON of that type.
func codecReads(reader, written string) bool {
	if reader == written {
		return true
	}
	arg, ok := strings.CutPrefix(reader, binaryCodecID)
	return ok && written == jsonCodecID+arg
}

func orDefault[T any](c codec.Codec[T]) codec.Codec[T] {
	if c == nil {
		return codec.Default[T]()
	}
	return c
}

// orDefaultKey is orDefault for map-state user keys, whose bytes are
// looked up (codec.DefaultKey).
func orDefaultKey[T any](c codec.Codec[T]) codec.Codec[T] {
	if c == nil {
		return codec.DefaultKey[T]()
	}
	return c
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("state descriptor without a name: %w", ErrInvalidDescriptor)
	}
	return nil
}

func meta(name string, kind Kind, valueCodec, userKeyCodec any, ttl TTLConfig) (StateMeta, error) {
	if err := checkName(name); err != nil {
		return StateMeta{}, err
	}
	if err := ttl.validate(name); err != nil {
		return StateMeta{}, err
	}
	m := StateMeta{Name: name, Kind: kind, ValueCodec: CodecID(valueCodec), TTL: ttl}
	if userKeyCodec != nil {
		m.UserKeyCodec = CodecID(userKeyCodec)
	}
	return m, nil
}

// Meta implements Descriptor.
func (d ValueStateDescriptor[T]) Meta() (StateMeta, error) {
	return meta(d.Name, KindValue, orDefault(d.Codec), nil, d.TTL)
}

// Meta implements Descriptor.
func (d ListStateDescriptor[T]) Meta() (StateMeta, error) {
	return meta(d.Name, KindList, orDefault(d.Codec), nil, d.TTL)
}

// Meta implements Descriptor.
func (d MapStateDescriptor[K, V]) Meta() (StateMeta, error) {
	return meta(d.Name, KindMap, orDefault(d.ValueCodec), orDefaultKey(d.KeyCodec), d.TTL)
}

// Meta implements Descriptor.
func (d ReducingStateDescriptor[T]) Meta() (StateMeta, error) {
	if d.Reduce == nil {
		return StateMeta{}, fmt.Errorf("state %q: reducing state without a Reduce function: %w", d.Name, ErrInvalidDescriptor)
	}
	return meta(d.Name, KindReducing, orDefault(d.Codec), nil, d.TTL)
}

// Meta implements Descriptor.
func (d AggregatingStateDescriptor[IN, ACC, OUT]) Meta() (StateMeta, error) {
	if d.Aggregate == nil {
		return StateMeta{}, fmt.Errorf("state %q: aggregating state without an AggregateFunction: %w", d.Name, ErrInvalidDescriptor)
	}
	return meta(d.Name, KindAggregating, orDefault(d.AccCodec), nil, d.TTL)
}
