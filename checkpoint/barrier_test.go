package checkpoint

import (
	"testing"
	"time"
)

// TestBarrierTriggerTimeIsExact: a barrier carries its trigger time to the
// nanosecond, so that the start delays measured from it are not rounded
// to the millisecond; Timestamp stays the millisecond Flink records.
func TestBarrierTriggerTimeIsExact(t *testing.T) {
	for _, at := range []time.Time{
		time.Unix(1_700_000_000, 999_999_999),
		time.Unix(1_700_000_000, 0),
		time.Unix(1_700_000_000, 1_234_567),
	} {
		b := NewBarrier(7, at, Options{Alignment: Unaligned})
		if !b.TriggerTime().Equal(at) {
			t.Errorf("trigger time of a barrier made at %v is %v", at, b.TriggerTime())
		}
		if b.Timestamp != at.UnixMilli() || b.SubMillis < 0 || b.SubMillis >= 1e6 {
			t.Errorf("barrier made at %v: Timestamp %d, SubMillis %d", at, b.Timestamp, b.SubMillis)
		}
		if u := b.AsUnaligned(); !u.TriggerTime().Equal(at) {
			t.Errorf("the unaligned switch lost the trigger time: %v", u.TriggerTime())
		}
	}
}
