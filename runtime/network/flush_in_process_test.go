package network_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime/network"
)

// TestFlushInProcessLeavesRemoteBuffers: FlushInProcess (an idle task's
// flush) sends the partly filled buffer of a channel in the process and
// keeps the one of a channel read over TCP, which a later Flush sends.
func TestFlushInProcessLeavesRemoteBuffers(t *testing.T) {
	a := newTransport(t, network.TransportConfig{})
	b := newTransport(t, network.TransportConfig{})
	cfg := network.Config{BufferSize: 256, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 2}
	ctx := testutil.Context(t, 0)

	p := network.NewResultPartition("p", 2, cfg, nil)
	localWake, remoteWake := make(chan struct{}, 1), make(chan struct{}, 1)
	local := network.NewInputGate("local", 1, cfg, localWake)
	remote := network.NewInputGate("remote", 1, cfg, remoteWake)
	inProcess(t, p, 0, local, 0)
	overTCP(a, b, "")(t, p, 1, remote, 0)

	for sub := range 2 {
		if err := p.WriteRecord(ctx, sub, []byte("record")); err != nil {
			t.Fatal(err)
		}
	}
	p.FlushInProcess()
	if got := p.Stats().BuffersOut; got != 1 {
		t.Fatalf("after FlushInProcess %d buffers were queued, want 1 (the in-process channel's)", got)
	}
	lc := newConsumer(t, local)
	if !lc.pollOne() || len(lc.got[0]) != 1 || string(lc.got[0][0].rec) != "record" {
		t.Fatalf("the in-process channel got %v, want the record", lc.got[0])
	}

	p.Flush(1)
	if got := p.Stats().BuffersOut; got != 2 {
		t.Fatalf("after Flush(1) %d buffers were queued, want 2", got)
	}
	rc := newConsumer(t, remote)
	for rc.drain(); len(rc.got[0]) == 0; rc.drain() {
		select {
		case <-remoteWake:
		case <-ctx.Done():
			t.Fatal("the remote channel never got the flushed record")
		}
	}
	if string(rc.got[0][0].rec) != "record" {
		t.Fatalf("the remote channel got %v, want the record", rc.got[0])
	}
}
