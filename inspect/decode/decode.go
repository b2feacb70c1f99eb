// Package decode is where connectors register the decoders of what they
// keep in checkpoints, for package inspect (and `sluice inspect`) to
// print: the entries of a source reader's state (its positions) and a
// two-phase-commit sink's committables. It depends on nothing, so a
// connector registers from an init function without importing inspect;
// inspect imports no connector, and a program that inspects checkpoints
// imports the connectors whose state it wants decoded.
//
// A committable is decoded by its kind: a sink that names the kind of
// its committables (sink.KindedCommittables) has it recorded beside them
// in every checkpoint, and the decoder registered under that kind
// decodes them (DecodeCommittableKind). A source state entry, and a
// committable of a checkpoint written before kinds were recorded, is
// decoded by trying the decoders in registration order; they must refuse
// what is not their format (each format starts with its own version byte
// or shape), so the order does not decide.
package decode

import (
	"fmt"
	"sync"
)

// Position is a source reader's position, decoded from one entry of its
// state.
type Position struct {
	// Topic, Partition, Offset (of the next record) and StoppingOffset
	// (-1 for none) are set by sources that read partitioned logs.
	Topic          string
	Partition      int32
	Offset         int64
	StoppingOffset int64
	// Text is how inspect prints the position.
	Text string
}

// PositionDecoder decodes one entry of a source reader's state; ok is
// false when the entry is not in its format.
type PositionDecoder func(entry []byte) (p Position, ok bool)

// Committable is a sink's committable, decoded.
type Committable struct {
	// Value is the connector's own value (a *kafka.Committable of
	// sink/kafka, a *filesink.Committable), for callers that know it.
	Value any
	// Text is how inspect prints the committable.
	Text string
}

// CommittableDecoder decodes one committable; ok is false when it is not
// in its format.
type CommittableDecoder func(b []byte) (c Committable, ok bool)

type named[D any] struct {
	kind string
	dec  D
}

var (
	mu           sync.RWMutex
	positions    []named[PositionDecoder]
	committables []named[CommittableDecoder]
)

func register[D any](list *[]named[D], what, kind string, d D) {
	mu.Lock()
	defer mu.Unlock()
	for _, n := range *list {
		if n.kind == kind {
			panic(fmt.Sprintf("decode: %s format %q registered twice", what, kind))
		}
	}
	*list = append(*list, named[D]{kind, d})
}

// RegisterPosition registers the decoder of the source state entries of
// kind (the name inspect prints, as "kafka"). It panics when kind is
// registered already.
func RegisterPosition(kind string, d PositionDecoder) { register(&positions, "position", kind, d) }

// RegisterCommittable registers the decoder of the committables of kind
// (the name inspect prints, as "kafka-transaction", and the one the sink
// names in sink.KindedCommittables). It panics when kind is registered
// already.
func RegisterCommittable(kind string, d CommittableDecoder) {
	register(&committables, "committable", kind, d)
}

// DecodePosition decodes entry with the first registered decoder that
// takes it; ok is false when none does.
func DecodePosition(entry []byte) (kind string, p Position, ok bool) {
	mu.RLock()
	defer mu.RUnlock()
	for _, n := range positions {
		if p, ok := n.dec(entry); ok {
			return n.kind, p, true
		}
	}
	return "", Position{}, false
}

// DecodeCommittableKind decodes b, a committable of kind, with the
// decoder registered under kind; ok is false when none is (the program
// does not import the connector) or the decoder refuses b.
func DecodeCommittableKind(kind string, b []byte) (c Committable, ok bool) {
	mu.RLock()
	defer mu.RUnlock()
	for _, n := range committables {
		if n.kind == kind {
			return n.dec(b)
		}
	}
	return Committable{}, false
}

// DecodeCommittable decodes b, a committable of unknown kind (of a
// checkpoint written before kinds were recorded), with the first
// registered decoder that takes it; ok is false when none does.
func DecodeCommittable(b []byte) (kind string, c Committable, ok bool) {
	mu.RLock()
	defer mu.RUnlock()
	for _, n := range committables {
		if c, ok := n.dec(b); ok {
			return n.kind, c, true
		}
	}
	return "", Committable{}, false
}
