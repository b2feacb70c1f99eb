// Package event owns the closed set of events that travel through a
// network exchange, in the same queues as the data, and their binary wire
// format (codec.go).
//
// The set is closed: Event can only be implemented here, so a type switch
// over the eight kinds below is exhaustive and the codec covers every value
// a channel can carry. In process the network passes these values as they
// are (nothing is encoded on the in-memory path); a remote exchange sends
// them with Append and reads them with Decode.
//
// The barrier itself is checkpoint.Barrier: the checkpoint coordinator and
// the barrier handlers own its meaning and options, and this package only
// carries it. The dependency points the way the package map allows
// (runtime/network/event imports checkpoint, never the reverse).
package event

import (
	"fmt"

	"github.com/sluicehq/sluice/checkpoint"
)

// Kind is the type tag of an event on the wire. Values are part of the
// wire format: never renumber them, only add.
type Kind uint8

// The kinds of events, in wire-tag order. Zero is not a kind.
const (
	KindRecordBuffer Kind = iota + 1
	KindWatermark
	KindWatermarkStatus
	KindBarrier
	KindBarrierAnnouncement
	KindCancelCheckpointMarker
	KindEndOfData
	KindEndOfPartition

	numKinds = iota + 1 // one past the last kind
)

// Kinds returns every kind, in tag order.
func Kinds() []Kind {
	out := make([]Kind, 0, numKinds-1)
	for k := KindRecordBuffer; k < numKinds; k++ {
		out = append(out, k)
	}
	return out
}

func (k Kind) String() string {
	switch k {
	case KindRecordBuffer:
		return "record buffer"
	case KindWatermark:
		return "watermark"
	case KindWatermarkStatus:
		return "watermark status"
	case KindBarrier:
		return "barrier"
	case KindBarrierAnnouncement:
		return "barrier announcement"
	case KindCancelCheckpointMarker:
		return "cancel checkpoint marker"
	case KindEndOfData:
		return "end of data"
	case KindEndOfPartition:
		return "end of partition"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one of the network events of this package.
type Event interface {
	// Kind returns the event's type tag.
	Kind() Kind
	isEvent()
}

// RecordBuffer is a buffer of framed records as a remote exchange sends it.
// In process, data buffers travel as network buffers, never as this event;
// a partition refuses it as an event.
type RecordBuffer struct {
	// Data is the buffer's bytes: records framed as a uvarint length and
	// the bytes, possibly the start or the rest of a spanning record.
	Data []byte
}

// Watermark carries a watermark: no record with a smaller timestamp follows
// on this channel.
type Watermark struct{ Timestamp int64 }

// WatermarkStatus marks the producing subtask idle (its watermark does not
// hold back its consumers) or active again.
type WatermarkStatus struct{ Idle bool }

// Barrier is checkpoint barrier Barrier.ID in the stream: the records before
// it belong to the checkpoint, those after it do not. An unaligned barrier
// travels as a priority event.
type Barrier struct{ checkpoint.Barrier }

// BarrierAnnouncement is the priority event sent ahead of an aligned
// barrier that may time out: the consumer learns of the checkpoint while
// the barrier still waits behind data in its input channel, so that at the
// deadline it can promote it (Flink's barrier announcement).
type BarrierAnnouncement struct{ Barrier checkpoint.Barrier }

// CancelCheckpointMarker travels in place of a barrier when a task aborted
// checkpoint ID, so that downstream tasks stop waiting for it.
type CancelCheckpointMarker struct{ ID int64 }

// EndOfData is sent when a task's input ended and its operators finished:
// downstream operators finish once every channel delivered it, while the
// tasks stay up for the final checkpoint.
type EndOfData struct{}

// EndOfPartition ends a channel: a result partition adds it to every
// subpartition when it finishes, and an input gate delivers it once per
// channel. It is the only event the network itself looks at.
type EndOfPartition struct{}

func (RecordBuffer) Kind() Kind           { return KindRecordBuffer }
func (Watermark) Kind() Kind              { return KindWatermark }
func (WatermarkStatus) Kind() Kind        { return KindWatermarkStatus }
func (Barrier) Kind() Kind                { return KindBarrier }
func (BarrierAnnouncement) Kind() Kind    { return KindBarrierAnnouncement }
func (CancelCheckpointMarker) Kind() Kind { return KindCancelCheckpointMarker }
func (EndOfData) Kind() Kind              { return KindEndOfData }
func (EndOfPartition) Kind() Kind         { return KindEndOfPartition }

func (RecordBuffer) isEvent()           {}
func (Watermark) isEvent()              {}
func (WatermarkStatus) isEvent()        {}
func (Barrier) isEvent()                {}
func (BarrierAnnouncement) isEvent()    {}
func (CancelCheckpointMarker) isEvent() {}
func (EndOfData) isEvent()              {}
func (EndOfPartition) isEvent()         {}

func (b RecordBuffer) String() string { return fmt.Sprintf("record-buffer{%d bytes}", len(b.Data)) }
func (w Watermark) String() string    { return fmt.Sprintf("watermark{%d}", w.Timestamp) }
func (s WatermarkStatus) String() string {
	if s.Idle {
		return "watermark-status{idle}"
	}
	return "watermark-status{active}"
}
func (a BarrierAnnouncement) String() string { return fmt.Sprintf("announce{%s}", a.Barrier) }
func (m CancelCheckpointMarker) String() string {
	return fmt.Sprintf("cancel-marker{id=%d}", m.ID)
}
func (EndOfData) String() string      { return "end-of-data" }
func (EndOfPartition) String() string { return "end-of-partition" }
