package network

import (
	"fmt"

	"github.com/sluicehq/sluice/runtime/network/event"
)

// BufferOrEvent is what InputGate.Poll returns: a data buffer or an event,
// and the channel it came from.
type BufferOrEvent struct {
	// Buffer is the data buffer, nil for an event. The consumer must
	// Recycle it (a RecordReader does) when its bytes are used up.
	Buffer *Buffer
	// Event is the event, nil for a buffer.
	Event event.Event
	// Channel is the index of the input channel.
	Channel int
	// Priority is true for an event that was put at the head of its queue
	// (an unaligned barrier, or an event promoted with PromoteEvent).
	Priority bool
	// Overtaken holds, for a priority event that arrived from the
	// producer, copies of the data buffers of this channel that had been
	// received but not yet polled when the event overtook them, in order.
	// Those buffers are still delivered after the event. For an event
	// promoted on this side with InputGate.PromoteEvent it is nil: that
	// call returned the overtaken buffers.
	Overtaken [][]byte
}

// IsEvent reports whether boe carries an event.
func (boe BufferOrEvent) IsEvent() bool { return boe.Buffer == nil }

// checkEvent refuses what cannot be queued as an event: nothing, and a
// record buffer (data travels as buffers in process).
func checkEvent(ev event.Event) error {
	switch ev.(type) {
	case nil:
		return ErrNilEvent
	case event.RecordBuffer:
		return fmt.Errorf("%w: a record buffer is data, written with WriteRaw", ErrNotAnEvent)
	}
	return nil
}
