package state

import (
	"errors"
	"fmt"
	"io"
)

// Sentinel errors. Errors returned by this package wrap them, with the
// name of the state concerned.
var (
	// ErrIncompatibleState: a state was registered (or restored) with a
	// different kind, codec or TTL format than it has.
	ErrIncompatibleState = errors.New("incompatible state")
	// ErrInvalidDescriptor: a descriptor without a name, function or with a
	// bad TTL.
	ErrInvalidDescriptor = errors.New("invalid state descriptor")
	// ErrNoCurrentKey: keyed state used before SetCurrentKey, or with a key
	// group outside the backend's range.
	ErrNoCurrentKey = errors.New("no current key in the backend's key-group range")
	// ErrCorruptSnapshot: a snapshot stream that cannot be parsed or fails
	// its checksum.
	ErrCorruptSnapshot = errors.New("corrupt state snapshot")
	// ErrUnknownState: a state name that is not registered.
	ErrUnknownState = errors.New("unknown state")
	// ErrRestore: restore refused (after use, mismatching max parallelism,
	// a key group present twice).
	ErrRestore = errors.New("cannot restore state")
	// ErrClosed: the backend is closed.
	ErrClosed = errors.New("state backend closed")
)

// KeyedState is what every keyed state handle has. A handle is scoped to
// the backend's current key (SetCurrentKey) and to its own namespace.
type KeyedState interface {
	// Clear removes the state of the current key and namespace.
	Clear() error
	// SetNamespace scopes the handle to a namespace: the encoded bytes of,
	// e.g., a window. nil (the default) is the namespace of non-windowed
	// state. The handle copies ns.
	SetNamespace(ns []byte)
}

// ValueState holds one value per key and namespace.
type ValueState[T any] interface {
	KeyedState
	// Value returns the value and true, or the zero value and false when
	// there is none.
	Value() (T, bool, error)
	// Update sets the value. The state owns v afterwards: do not modify
	// what v refers to (nor values returned by Value) without calling
	// Update again.
	Update(v T) error
}

// MergingState is implemented by the states whose contents merge (list,
// reducing, aggregating), as session windows need.
type MergingState interface {
	// MergeNamespaces merges the state of the current key in each source
	// namespace into the target namespace and clears the sources.
	MergeNamespaces(target []byte, sources [][]byte) error
}

// ListState holds a list per key and namespace.
type ListState[T any] interface {
	KeyedState
	MergingState
	// Get returns the elements, oldest first; nil when there are none. The
	// slice is the caller's.
	Get() ([]T, error)
	// Add appends an element.
	Add(v T) error
	// AddAll appends elements.
	AddAll(vs []T) error
	// Update replaces the list; an empty vs clears it.
	Update(vs []T) error
}

// MapState holds a map per key and namespace.
type MapState[K comparable, V any] interface {
	KeyedState
	Get(k K) (V, bool, error)
	Put(k K, v V) error
	Contains(k K) (bool, error)
	Remove(k K) error
	IsEmpty() (bool, error)
	// Iterate calls fn for each entry, in no defined order, until fn
	// returns false. fn may Put and Remove on this handle; entries it puts
	// may or may not be visited.
	Iterate(fn func(k K, v V) bool) error
	// IterateKeys is Iterate for keys only.
	IterateKeys(fn func(k K) bool) error
}

// ReducingState folds added values into one with the descriptor's Reduce.
type ReducingState[T any] interface {
	KeyedState
	MergingState
	// Get returns the reduced value and true, or false when nothing was
	// added.
	Get() (T, bool, error)
	Add(v T) error
}

// AggregatingState adds inputs to an accumulator with the descriptor's
// AggregateFunction.
type AggregatingState[IN, OUT any] interface {
	KeyedState
	MergingState
	// Get returns the aggregate's result and true, or false when nothing
	// was added.
	Get() (OUT, bool, error)
	Add(v IN) error
}

// StateSnapshot is a snapshot whose synchronous part is done: it holds a
// consistent view of the state as of that moment while the backend goes on
// changing. WriteTo (the asynchronous part) may run on any goroutine, once;
// it releases the view when done. Release frees the view without writing
// (an aborted checkpoint); it is idempotent and safe after WriteTo.
type StateSnapshot interface {
	io.WriterTo
	Release()
}

// KeyedBackend is a keyed state backend of one subtask. It is byte-level:
// keys, namespaces and values cross it as encoded bytes, so a backend
// storing bytes (RocksDB) implements it directly; the heap backend keeps
// decoded values behind the same interface.
//
// A backend is used from the task goroutine only, except for the
// StateSnapshot it returns.
type KeyedBackend interface {
	// SetCurrentKey sets the key that state handles read and write: its
	// encoded bytes (copied) and its key group (KeyGroupFor(key,
	// MaxParallelism())).
	SetCurrentKey(key []byte, keyGroup int)
	// CurrentKey returns the current key and key group (nil, -1 if none).
	// The bytes are valid until the next SetCurrentKey.
	CurrentKey() ([]byte, int)
	KeyGroupRange() KeyGroupRange
	MaxParallelism() int

	// CreateState registers the state d describes, or finds it registered
	// already, and returns a new handle for it (a ValueState[T] for a
	// ValueStateDescriptor[T], and so on). Registering a name again with
	// another kind or codec fails with ErrIncompatibleState naming it, as
	// does a state restored with an incompatible meta or undecodable data.
	// Use GetValueState and its siblings rather than this.
	CreateState(d Descriptor) (any, error)
	// States returns the metas of the registered states.
	States() []StateMeta
	// Keys calls fn with every key (and its key group) that has state in
	// the named state and namespace, as Flink's getKeys/applyToAllKeys. fn
	// may set the current key and change state. The bytes are valid during
	// the call only.
	Keys(state string, namespace []byte, fn func(key []byte, keyGroup int) error) error

	// Snapshot runs the synchronous part of a snapshot: it captures the
	// state as of now, in time independent of its size, and returns the
	// asynchronous part. The stream WriteTo produces is the canonical keyed
	// snapshot format (see KeyedSnapshotWriter) that every backend restores.
	Snapshot(checkpointID int64) (StateSnapshot, error)
	// Restore loads snapshots (one per old subtask whose key-group range
	// overlaps this backend's), keeping only the key groups in range. It
	// must be called before any state is created.
	Restore(snapshots ...io.Reader) error
	// Close releases the backend's resources.
	Close() error
}

// RestoredStates is a keyed backend that tells which states a restore
// brought that are not registered yet (their data waits, carried into
// later snapshots unchanged, until a CreateState takes it). An operator
// whose state layout changed asks it for the earlier layout's state to
// migrate what a checkpoint of the earlier version holds.
type RestoredStates interface {
	RestoredState(name string) (StateMeta, bool)
}

// GetValueState returns a ValueState handle from a backend.
func GetValueState[T any](b KeyedBackend, d ValueStateDescriptor[T]) (ValueState[T], error) {
	return create[ValueState[T]](b, d)
}

// GetListState returns a ListState handle from a backend.
func GetListState[T any](b KeyedBackend, d ListStateDescriptor[T]) (ListState[T], error) {
	return create[ListState[T]](b, d)
}

// GetMapState returns a MapState handle from a backend.
func GetMapState[K comparable, V any](b KeyedBackend, d MapStateDescriptor[K, V]) (MapState[K, V], error) {
	return create[MapState[K, V]](b, d)
}

// GetReducingState returns a ReducingState handle from a backend.
func GetReducingState[T any](b KeyedBackend, d ReducingStateDescriptor[T]) (ReducingState[T], error) {
	return create[ReducingState[T]](b, d)
}

// GetAggregatingState returns an AggregatingState handle from a backend.
func GetAggregatingState[IN, ACC, OUT any](b KeyedBackend, d AggregatingStateDescriptor[IN, ACC, OUT]) (AggregatingState[IN, OUT], error) {
	return create[AggregatingState[IN, OUT]](b, d)
}

func create[H any](b KeyedBackend, d Descriptor) (H, error) {
	var zero H
	h, err := b.CreateState(d)
	if err != nil {
		return zero, err
	}
	typed, ok := h.(H)
	if !ok {
		m, _ := d.Meta()
		return zero, fmt.Errorf("state %q: backend returned %T, want %T: %w", m.Name, h, zero, ErrIncompatibleState)
	}
	return typed, nil
}
