package network

import (
	"bytes"
	"context"
	"testing"

	"github.com/sluicehq/sluice/runtime/network/event"
)

// A priority event that arrives while Poll has picked its channel for data,
// before Poll takes the channel's lock, must still come first: it carries
// copies of the buffers it overtook, so delivering one of them ahead of it
// would both process and persist that buffer (a record counted twice after
// a restore from an unaligned checkpoint).
func TestPriorityEventRacingPollComesFirst(t *testing.T) {
	cfg := Config{BufferSize: 16, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 0}
	p := NewResultPartition("p", 1, cfg, nil)
	g := NewInputGate("g", 1, cfg, nil)
	Connect(p, 0, g, 0)
	rec := bytes.Repeat([]byte{'A'}, 15) // with its 1-byte length, fills a buffer
	if err := p.WriteRecord(context.Background(), 0, rec); err != nil {
		t.Fatal(err)
	}
	fired := false
	testHookPicked = func() {
		if fired {
			return
		}
		fired = true
		if _, err := p.AddPriorityEvent(0, event.Barrier{}); err != nil {
			t.Error(err)
		}
	}
	defer func() { testHookPicked = nil }()

	first, ok := g.Poll()
	if !ok || !fired {
		t.Fatalf("poll: ok=%v, hook fired=%v", ok, fired)
	}
	if first.Event != (event.Barrier{}) || !first.Priority {
		t.Fatalf("first poll returned %+v, want the priority barrier ahead of the buffer it overtook", first)
	}
	if len(first.Overtaken) != 1 || !bytes.Equal(first.Overtaken[0], append([]byte{15}, rec...)) {
		t.Fatalf("barrier carries %q, want a copy of the one buffer it overtook", first.Overtaken)
	}
	second, ok := g.Poll()
	if !ok || second.Buffer == nil {
		t.Fatalf("second poll returned %+v, want the overtaken buffer", second)
	}
	second.Buffer.Recycle()
}
