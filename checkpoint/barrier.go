package checkpoint

import (
	"fmt"
	"time"
)

// Kind is what a checkpoint is taken for.
type Kind uint8

const (
	// KindCheckpoint is a periodic or manual checkpoint, owned by the
	// framework: retained, subsumed and discarded automatically, and it may
	// be incremental.
	KindCheckpoint Kind = iota
	// KindSavepoint is a savepoint: taken on demand, always aligned, owned by
	// the user, self-contained (no shared files), never discarded by the
	// framework.
	KindSavepoint
	// KindFullCheckpoint is a checkpoint for which incremental state
	// backends write a full snapshot (Flink's FULL checkpoint type).
	KindFullCheckpoint
)

func (k Kind) String() string {
	switch k {
	case KindCheckpoint:
		return "checkpoint"
	case KindSavepoint:
		return "savepoint"
	case KindFullCheckpoint:
		return "full-checkpoint"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// IsSavepoint reports whether k is a savepoint.
func (k Kind) IsSavepoint() bool { return k == KindSavepoint }

// Alignment says how a barrier is aligned on the tasks it passes.
type Alignment uint8

const (
	// Aligned barriers never overtake data: a task blocks each channel that
	// delivered the barrier until the barrier has arrived on every channel.
	Aligned Alignment = iota
	// Unaligned barriers travel as priority events, overtaking buffered
	// data; the overtaken data is persisted as channel state.
	Unaligned
	// AlignedWithTimeout barriers start aligned and switch to unaligned once
	// the checkpoint is older than Options.AlignedTimeout, on both ends of
	// every channel.
	AlignedWithTimeout
)

func (a Alignment) String() string {
	switch a {
	case Aligned:
		return "aligned"
	case Unaligned:
		return "unaligned"
	case AlignedWithTimeout:
		return "aligned-with-timeout"
	}
	return fmt.Sprintf("alignment(%d)", uint8(a))
}

// Options travel with every barrier of a checkpoint.
type Options struct {
	Kind      Kind
	Alignment Alignment
	// AlignedTimeout is the checkpoint age (time since the trigger) after
	// which an AlignedWithTimeout barrier switches to unaligned. Zero for
	// the other alignments.
	AlignedTimeout time.Duration
}

// SavepointOptions are the options of every savepoint: always aligned
// (Flink: "Savepoints can not be unaligned"), since a savepoint must be
// restorable into a changed job where channel state has nowhere to go.
func SavepointOptions() Options { return Options{Kind: KindSavepoint, Alignment: Aligned} }

// MayBeUnaligned reports whether a checkpoint with these options may persist
// in-flight data somewhere in the job.
func (o Options) MayBeUnaligned() bool { return o.Alignment != Aligned }

func (o Options) String() string {
	if o.Alignment == AlignedWithTimeout {
		return fmt.Sprintf("%s/%s(%s)", o.Kind, o.Alignment, o.AlignedTimeout)
	}
	return fmt.Sprintf("%s/%s", o.Kind, o.Alignment)
}

// Barrier is the event that splits a stream into the records before
// checkpoint ID and the records after it. Sources emit it when triggered;
// every task forwards it once its snapshot for ID is taken.
type Barrier struct {
	ID int64
	// Timestamp is the trigger time of the checkpoint, unix milliseconds
	// (as Flink records it).
	Timestamp int64
	// SubMillis is the rest of the trigger time, nanoseconds in
	// [0, 1e6): the tasks' start delays and the aligned timeout are
	// measured from the exact trigger, not from its millisecond, which
	// would add up to a millisecond to checkpoints that take a few.
	SubMillis int32
	Options   Options
}

// NewBarrier returns the barrier of checkpoint id triggered at t.
func NewBarrier(id int64, t time.Time, o Options) Barrier {
	ns := t.UnixNano()
	return Barrier{ID: id, Timestamp: ns / 1e6, SubMillis: int32(ns % 1e6), Options: o}
}

// TriggerTime is the exact trigger time, Timestamp and SubMillis.
func (b Barrier) TriggerTime() time.Time {
	return time.UnixMilli(b.Timestamp).Add(time.Duration(b.SubMillis))
}

// AsUnaligned returns the barrier switched to unaligned, as it is forwarded
// once its alignment timed out.
func (b Barrier) AsUnaligned() Barrier {
	b.Options.Alignment = Unaligned
	b.Options.AlignedTimeout = 0
	return b
}

// alignmentDeadline is when an AlignedWithTimeout barrier switches.
func (b Barrier) alignmentDeadline() time.Time {
	return b.TriggerTime().Add(b.Options.AlignedTimeout)
}

func (b Barrier) String() string {
	return fmt.Sprintf("barrier{id=%d ts=%d %s}", b.ID, b.Timestamp, b.Options)
}
