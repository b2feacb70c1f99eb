package network_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/runtime/network/event"
)

// marker returns a test event numbered n.
func marker(n int) event.Event { return event.CancelCheckpointMarker{ID: int64(n)} }

// prioEvent is a test event sent as a priority event.
var prioEvent event.Event = event.Watermark{Timestamp: -1}

// elem is one thing a channel delivered: a record or an event.
type elem struct {
	rec       []byte
	ev        event.Event
	prio      bool
	overtaken [][]byte
}

func (e elem) String() string {
	if e.ev != nil {
		return fmt.Sprintf("event %v (prio %v)", e.ev, e.prio)
	}
	return fmt.Sprintf("record of %d bytes", len(e.rec))
}

// consumer drains a gate into per-channel sequences, using one
// RecordReader per channel like a Task does.
type consumer struct {
	g       *network.InputGate
	readers []*network.RecordReader
	got     [][]elem
	errf    func(format string, args ...any)
}

func newConsumer(t testing.TB, g *network.InputGate) *consumer {
	c := &consumer{g: g, errf: t.Errorf, got: make([][]elem, g.NumChannels())}
	for range g.NumChannels() {
		c.readers = append(c.readers, network.NewRecordReader())
	}
	return c
}

// pollOne polls one buffer or event and reads it; false if nothing.
func (c *consumer) pollOne() bool {
	boe, ok := c.g.Poll()
	if !ok {
		return false
	}
	ch := boe.Channel
	if boe.Buffer == nil {
		if c.readers[ch].Buffered() && !boe.Priority {
			c.errf("channel %d: event %v arrived in the middle of a record", ch, boe.Event)
		}
		c.got[ch] = append(c.got[ch], elem{ev: boe.Event, prio: boe.Priority, overtaken: boe.Overtaken})
		return true
	}
	r := c.readers[ch]
	r.Feed(boe.Buffer)
	for {
		rec, ok := r.Next()
		if !ok {
			break
		}
		c.got[ch] = append(c.got[ch], elem{rec: bytes.Clone(rec)})
	}
	if err := r.Err(); err != nil {
		c.errf("channel %d: %v", ch, err)
	}
	return true
}

// drain polls until the gate has nothing to poll.
func (c *consumer) drain() {
	for c.pollOne() {
	}
}

// runUntilFinished drains the gate, waiting on wake, until every channel
// delivered EndOfPartition or ctx is done.
func (c *consumer) runUntilFinished(ctx context.Context, wake chan struct{}) error {
	for {
		c.drain()
		if c.g.Finished() {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("consumer: %w", ctx.Err())
		}
	}
}

// withoutEOP drops EndOfPartition from a sequence.
func withoutEOP(s []elem) []elem {
	var out []elem
	for _, e := range s {
		if _, ok := e.ev.(event.EndOfPartition); !ok {
			out = append(out, e)
		}
	}
	return out
}

// sameSequence reports the first difference between two sequences.
func sameSequence(want, got []elem) error {
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if (w.ev == nil) != (g.ev == nil) || (w.ev != nil && w.ev != g.ev) || !bytes.Equal(w.rec, g.rec) {
			return fmt.Errorf("element %d: want %v, got %v", i, w, g)
		}
	}
	if len(want) != len(got) {
		return fmt.Errorf("want %d elements, got %d", len(want), len(got))
	}
	return nil
}

// randomRecord returns a record whose first 12 bytes say where it came
// from, of a random size up to maxLen, sometimes several buffers long.
func randomRecord(rng *rand.Rand, producer, seq, maxLen int) []byte {
	n := 12 + rng.IntN(maxLen)
	if rng.IntN(20) == 0 {
		n = 12 + rng.IntN(maxLen*8) // spans several buffers
	}
	rec := make([]byte, n)
	for i := range rec {
		rec[i] = byte(rng.Uint32())
	}
	copy(rec, fmt.Sprintf("%04d%08d", producer, seq))
	return rec
}

// await polls cond until it holds, failing the test after a generous
// deadline. It only waits for an event to happen; it asserts no timing.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		runtime.Gosched()
		time.Sleep(100 * time.Microsecond)
	}
}
