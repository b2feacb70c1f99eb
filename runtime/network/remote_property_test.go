package network_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/runtime/network/event"
)

// A scenario is one random exchange: a partition of a few subpartitions
// wired to the channels of one gate (in a random order), the operations
// its producer performs, and how its consumer pauses.
type scenario struct {
	seed uint64
	cfg  network.Config
	perm []int // subpartition -> channel
	ops  []scenarioOp
}

type opKind int

const (
	opRecord opKind = iota
	opBroadcastRecord
	opFlush
	opEvent
	opBroadcastEvent
	opPriority
)

type scenarioOp struct {
	kind opKind
	sub  int
	rec  []byte
	ev   event.Event
}

func randomScenario(seed uint64) scenario {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	sc := scenario{seed: seed, cfg: network.Config{
		BufferSize:                 16 + rng.IntN(300),
		ExclusiveBuffersPerChannel: 1 + rng.IntN(3),
		FloatingBuffersPerGate:     1 + rng.IntN(4),
	}}
	subs := 1 + rng.IntN(3)
	sc.perm = rng.Perm(subs)
	maxRec := 2 * sc.cfg.BufferSize
	n := 200 + rng.IntN(800)
	for i := range n {
		sub := rng.IntN(subs)
		op := scenarioOp{sub: sub}
		switch r := rng.IntN(100); {
		case r < 4:
			op.kind, op.ev = opEvent, marker(i)
		case r < 5:
			op.kind, op.ev = opBroadcastEvent, marker(i)
		case r < 9:
			op.kind, op.ev = opPriority, event.Watermark{Timestamp: int64(-i)}
		case r < 15:
			op.kind = opFlush
		case r < 17:
			op.kind, op.rec = opBroadcastRecord, randomRecord(rng, 9, i, maxRec)
		default:
			op.kind, op.rec = opRecord, randomRecord(rng, sub, i, maxRec)
		}
		sc.ops = append(sc.ops, op)
	}
	return sc
}

// prioWritten is what the producer knew when it added a priority event:
// how many framed bytes it had written to the subpartition before, and the
// buffers the event overtook there (the output channel state).
type prioWritten struct {
	ev        event.Event
	written   int
	overtaken []byte
}

// prioPolled is what the consumer saw of a priority event: how many bytes
// of the channel it had polled before it, and the buffers it overtook in
// the gate (the input channel state).
type prioPolled struct {
	ev        event.Event
	polled    int
	overtaken []byte
}

// channelResult is what one channel delivered.
type channelResult struct {
	seq    []elem // records and non-priority events, in order
	prios  []prioPolled
	stream []byte // every data buffer's bytes, in order
}

type scenarioResult struct {
	channels []channelResult // by channel
	written  [][]prioWritten // by subpartition
}

// run runs the scenario through wire and returns what every channel got.
// The consumer pauses now and then until the producer has done more or is
// blocked on a dry pool, so that credit runs out, backlogs build up and
// priority events overtake.
func (sc scenario) run(t *testing.T, wire wiring) scenarioResult {
	t.Helper()
	subs := len(sc.perm)
	wake := make(chan struct{}, 1)
	p := network.NewResultPartition(fmt.Sprintf("p%d", sc.seed), subs, sc.cfg, nil)
	g := network.NewInputGate(fmt.Sprintf("g%d", sc.seed), subs, sc.cfg, wake)
	for sub, ch := range sc.perm {
		wire(t, p, sub, g, ch)
	}
	defer g.Release()
	defer p.Release()
	res := scenarioResult{channels: make([]channelResult, subs), written: make([][]prioWritten, subs)}

	ctx := testutil.Context(t, 0)
	var progress atomic.Int64
	var producing atomic.Bool
	producing.Store(true)
	errc := make(chan error, 1)
	go func() {
		defer producing.Store(false)
		written := make([]int, subs)
		framedLen := func(rec []byte) int {
			return binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(len(rec))) + len(rec)
		}
		for _, op := range sc.ops {
			var err error
			switch op.kind {
			case opRecord:
				err = p.WriteRecord(ctx, op.sub, op.rec)
				written[op.sub] += framedLen(op.rec)
			case opBroadcastRecord:
				err = p.BroadcastRecord(ctx, op.rec)
				for s := range written {
					written[s] += framedLen(op.rec)
				}
			case opFlush:
				p.Flush(op.sub)
			case opEvent:
				err = p.AddEvent(op.sub, op.ev)
			case opBroadcastEvent:
				err = p.BroadcastEvent(op.ev)
			case opPriority:
				var overtaken [][]byte
				overtaken, err = p.AddPriorityEvent(op.sub, op.ev)
				res.written[op.sub] = append(res.written[op.sub], prioWritten{ev: op.ev, written: written[op.sub], overtaken: bytes.Join(overtaken, nil)})
			}
			if err != nil {
				errc <- err
				return
			}
			progress.Add(1)
		}
		errc <- p.Finish()
	}()

	rng := rand.New(rand.NewPCG(sc.seed, 0xc0ffee))
	readers := make([]*network.RecordReader, subs)
	for i := range readers {
		readers[i] = network.NewRecordReader()
	}
	for !g.Finished() {
		if err := g.Err(); err != nil {
			t.Fatalf("seed %d: %v", sc.seed, err)
		}
		if rng.IntN(40) == 0 { // pause
			target := progress.Load() + 1 + int64(rng.IntN(50))
			for producing.Load() && progress.Load() < target && p.Stats().BlockedWriters == 0 {
				if ctx.Err() != nil {
					t.Fatalf("seed %d: consumer pause: %v", sc.seed, ctx.Err())
				}
				runtime.Gosched()
				time.Sleep(20 * time.Microsecond)
			}
		}
		boe, ok := g.Poll()
		if !ok {
			select {
			case <-wake:
			case <-ctx.Done():
				t.Fatalf("seed %d: consumer: %v (gate %+v)", sc.seed, ctx.Err(), g.Stats())
			}
			continue
		}
		cr := &res.channels[boe.Channel]
		switch {
		case boe.Priority:
			cr.prios = append(cr.prios, prioPolled{ev: boe.Event, polled: len(cr.stream), overtaken: bytes.Join(boe.Overtaken, nil)})
		case boe.Buffer == nil:
			if readers[boe.Channel].Buffered() {
				t.Fatalf("seed %d: channel %d: event %v in the middle of a record", sc.seed, boe.Channel, boe.Event)
			}
			cr.seq = append(cr.seq, elem{ev: boe.Event})
		default:
			cr.stream = append(cr.stream, boe.Buffer.Bytes()...)
			r := readers[boe.Channel]
			r.Feed(boe.Buffer)
			for {
				rec, ok := r.Next()
				if !ok {
					break
				}
				cr.seq = append(cr.seq, elem{rec: bytes.Clone(rec)})
			}
			if err := r.Err(); err != nil {
				t.Fatalf("seed %d: channel %d: %v", sc.seed, boe.Channel, err)
			}
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("seed %d: producer: %v", sc.seed, err)
	}
	if s := p.Stats(); s.PoolFree != s.PoolSize {
		t.Fatalf("seed %d: output buffers not back: %+v", sc.seed, s)
	}
	return res
}

// want returns the records and non-priority events each channel must
// deliver, and the priority events, in order.
func (sc scenario) want() (seq [][]elem, prios [][]event.Event) {
	subs := len(sc.perm)
	seq, prios = make([][]elem, subs), make([][]event.Event, subs)
	for _, op := range sc.ops {
		ch := sc.perm[op.sub]
		switch op.kind {
		case opRecord:
			seq[ch] = append(seq[ch], elem{rec: op.rec})
		case opBroadcastRecord:
			for c := range seq {
				seq[c] = append(seq[c], elem{rec: op.rec})
			}
		case opEvent:
			seq[ch] = append(seq[ch], elem{ev: op.ev})
		case opBroadcastEvent:
			for c := range seq {
				seq[c] = append(seq[c], elem{ev: op.ev})
			}
		case opPriority:
			prios[ch] = append(prios[ch], op.ev)
		}
	}
	for c := range seq {
		seq[c] = append(seq[c], elem{ev: event.EndOfPartition{}})
	}
	return seq, prios
}

// check verifies res against the scenario: every channel delivered its
// records and events in order, its priority events in order, and each
// priority event split the channel's bytes where an unaligned checkpoint
// needs it: the bytes polled before it, the buffers it overtook in the
// gate and those it overtook in the subpartition are, together, exactly
// what was written before it.
func (sc scenario) check(res scenarioResult) error {
	wantSeq, wantPrios := sc.want()
	for sub, ch := range sc.perm {
		cr := res.channels[ch]
		if err := sameSequence(wantSeq[ch], cr.seq); err != nil {
			return fmt.Errorf("channel %d: %w", ch, err)
		}
		if len(cr.prios) != len(wantPrios[ch]) || len(res.written[sub]) != len(cr.prios) {
			return fmt.Errorf("channel %d: %d priority events delivered, %d added", ch, len(cr.prios), len(wantPrios[ch]))
		}
		for i, pp := range cr.prios {
			pw := res.written[sub][i]
			if pp.ev != wantPrios[ch][i] || pw.ev != pp.ev {
				return fmt.Errorf("channel %d: priority event %d is %v, want %v", ch, i, pp.ev, wantPrios[ch][i])
			}
			in, out := len(pp.overtaken), len(pw.overtaken)
			if pp.polled+in+out != pw.written {
				return fmt.Errorf("channel %d: priority event %v: %d bytes polled before it, %d overtaken in the gate, %d in the subpartition; %d written before it",
					ch, pp.ev, pp.polled, in, out, pw.written)
			}
			if !bytes.Equal(cr.stream[pp.polled:pp.polled+in], pp.overtaken) || !bytes.Equal(cr.stream[pp.polled+in:pw.written], pw.overtaken) {
				return fmt.Errorf("channel %d: priority event %v: the overtaken buffers are not the channel's next bytes", ch, pp.ev)
			}
		}
	}
	return nil
}

// sameAs compares two runs of one scenario: the same records and events
// per channel, the same priority events.
func (res scenarioResult) sameAs(other scenarioResult) error {
	for ch := range res.channels {
		a, b := res.channels[ch], other.channels[ch]
		if err := sameSequence(a.seq, b.seq); err != nil {
			return fmt.Errorf("channel %d: %w", ch, err)
		}
		if !bytes.Equal(a.stream, b.stream) {
			return fmt.Errorf("channel %d: the data bytes differ", ch)
		}
		if len(a.prios) != len(b.prios) {
			return fmt.Errorf("channel %d: %d priority events, then %d", ch, len(a.prios), len(b.prios))
		}
		for i := range a.prios {
			if a.prios[i].ev != b.prios[i].ev {
				return fmt.Errorf("channel %d: priority event %d: %v, then %v", ch, i, a.prios[i].ev, b.prios[i].ev)
			}
		}
	}
	return nil
}

// TestRemoteExchangeMatchesInProcess runs random scenarios (records of
// random sizes, some spanning buffers, flushes, events, broadcasts,
// priority events, random pool sizes, a consumer that pauses) in process
// and over loopback TCP. Both deliver every channel's sequence exactly,
// and each priority event overtakes consistently with an unaligned
// checkpoint's channel state. Where a priority event lands among the
// records depends on timing, on either path, so runs are compared on the
// sequences without them, and on the invariant they must keep.
func TestRemoteExchangeMatchesInProcess(t *testing.T) {
	prod := newTransport(t, network.TransportConfig{})
	cons := newTransport(t, network.TransportConfig{})
	tcp := overTCP(prod, cons, "")
	runs := 16
	if testing.Short() {
		runs = 4
	}
	for seed := range uint64(runs) {
		sc := randomScenario(seed)
		local := sc.run(t, inProcess)
		if err := sc.check(local); err != nil {
			t.Fatalf("seed %d (%+v), in process: %v", seed, sc.cfg, err)
		}
		remote := sc.run(t, tcp)
		if err := sc.check(remote); err != nil {
			t.Fatalf("seed %d (%+v), over TCP: %v", seed, sc.cfg, err)
		}
		if err := local.sameAs(remote); err != nil {
			t.Fatalf("seed %d (%+v): in process vs over TCP: %v", seed, sc.cfg, err)
		}
	}
	if s := cons.Stats(); s.DialledConnections != 1 || s.RemoteChannels != 0 || s.BuffersReceived == 0 {
		t.Fatalf("consumer transport after the runs: %+v", s)
	}
	if s := prod.Stats(); s.AcceptedConnections != 1 || s.ServedChannels != 0 || s.BuffersSent != cons.Stats().BuffersReceived {
		t.Fatalf("producer transport after the runs: %+v", s)
	}
}
