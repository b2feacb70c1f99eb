package network

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime/network/event"
)

// testRecords returns records whose sizes hit the interesting cases for a
// 16-byte buffer: empty, exactly filling, one over, spanning many buffers,
// and two-byte length prefixes that straddle buffer boundaries.
func testRecords() [][]byte {
	sizes := []int{0, 1, 5, 14, 15, 16, 17, 0, 31, 100, 127, 128, 129, 300, 0, 3, 1000, 2, 200, 15}
	var recs [][]byte
	for i, n := range sizes {
		rec := make([]byte, n)
		for j := range rec {
			rec[j] = byte(i*31 + j)
		}
		recs = append(recs, rec)
	}
	return recs
}

// frameAll frames records the way the writer does.
func frameAll(recs [][]byte) []byte {
	var out []byte
	for _, r := range recs {
		out = binary.AppendUvarint(out, uint64(len(r)))
		out = append(out, r...)
	}
	return out
}

// chunkBuffers cuts a framed stream into buffers of size bs drawn from
// pool (handed out, as if polled from a gate).
func chunkBuffers(pool *outputPool, stream []byte, bs int) []*Buffer {
	var bufs []*Buffer
	for len(stream) > 0 {
		b := pool.tryGet()
		if b == nil {
			panic("test pool too small")
		}
		b.n = copy(b.data, stream)
		stream = stream[b.n:]
		bufs = append(bufs, b)
	}
	return bufs
}

// readAll feeds bufs into r and returns copies of every record.
func readAll(t *testing.T, r *RecordReader, bufs []*Buffer) [][]byte {
	t.Helper()
	var out [][]byte
	for _, b := range bufs {
		r.Feed(b)
		for {
			rec, ok := r.Next()
			if !ok {
				break
			}
			out = append(out, bytes.Clone(rec))
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		if b.inUse.Load() {
			t.Fatal("a used-up buffer was not recycled")
		}
	}
	return out
}

func sameRecords(want, got [][]byte) error {
	if len(want) != len(got) {
		return fmt.Errorf("want %d records, got %d", len(want), len(got))
	}
	for i := range want {
		if !bytes.Equal(want[i], got[i]) {
			return fmt.Errorf("record %d: want %d bytes %x, got %d bytes %x", i, len(want[i]), want[i], len(got[i]), got[i])
		}
	}
	return nil
}

func TestReaderSpanningRecords(t *testing.T) {
	recs := testRecords()
	stream := frameAll(recs)
	for _, bs := range []int{16, 17, 64, 1024} {
		pool := newOutputPool(1000, bs, nil)
		got := readAll(t, NewRecordReader(), chunkBuffers(pool, stream, bs))
		if err := sameRecords(recs, got); err != nil {
			t.Fatalf("buffer size %d: %v", bs, err)
		}
		if pool.inUse.Load() != 0 {
			t.Fatalf("buffer size %d: %d buffers never recycled", bs, pool.inUse.Load())
		}
	}
}

// TestReaderPendingRoundTrip cuts the reading at every buffer and every
// record position, persists Pending, restores it into a fresh reader with
// FeedRaw and continues with the later buffers: the records must be the
// same as without the cut.
func TestReaderPendingRoundTrip(t *testing.T) {
	recs := testRecords()
	stream := frameAll(recs)
	const bs = 16
	nbufs := (len(stream) + bs - 1) / bs
	midSpan := 0
	for k := range nbufs {
		for j := 0; j < 4; j++ {
			pool := newOutputPool(1000, bs, nil)
			bufs := chunkBuffers(pool, stream, bs)
			r1 := NewRecordReader()
			got := readAll(t, r1, bufs[:k])
			r1.Feed(bufs[k])
			for range j {
				rec, ok := r1.Next()
				if !ok {
					break
				}
				got = append(got, bytes.Clone(rec))
			}
			if r1.spanTotal > 0 && len(r1.span) > 0 && !r1.spanDone {
				midSpan++
			}
			pending := r1.Pending()
			// Everything fed so far that is not a returned record.
			if !bytes.Equal(pending, stream[len(frameAll(got)):min(len(stream), (k+1)*bs)]) {
				t.Fatalf("cut at buffer %d after %d records: pending %x is not the unread framed bytes", k, j, pending)
			}
			r1.Reset()
			if pool.inUse.Load() != int64(nbufs-k-1) {
				t.Fatalf("Reset did not recycle the held buffer")
			}
			r2 := NewRecordReader()
			r2.FeedRaw(pending)
			for {
				rec, ok := r2.Next()
				if !ok {
					break
				}
				got = append(got, bytes.Clone(rec))
			}
			got = append(got, readAll(t, r2, bufs[k+1:])...)
			if err := sameRecords(recs, got); err != nil {
				t.Fatalf("cut at buffer %d after %d records: %v", k, j, err)
			}
		}
	}
	if midSpan == 0 {
		t.Fatal("no cut fell inside a spanning record")
	}
}

func TestReaderCorruptInput(t *testing.T) {
	r := NewRecordReader()
	r.FeedRaw(bytes.Repeat([]byte{0xff}, 11)) // a uvarint overflowing 64 bits
	if _, ok := r.Next(); ok || !errors.Is(r.Err(), ErrCorruptFrame) {
		t.Fatalf("overflowing prefix: err %v", r.Err())
	}
	r.Reset()
	if r.Err() != nil {
		t.Fatal("Reset did not clear the error")
	}
	r.FeedRaw(binary.AppendUvarint(nil, MaxRecordSize+1))
	if _, ok := r.Next(); ok || !errors.Is(r.Err(), ErrCorruptFrame) {
		t.Fatalf("oversized length: err %v", r.Err())
	}
	// The same, with the prefix split across two feeds.
	r.Reset()
	prefix := binary.AppendUvarint(nil, MaxRecordSize+1)
	r.FeedRaw(prefix[:2])
	if _, ok := r.Next(); ok || r.Err() != nil {
		t.Fatalf("half a prefix: ok=%v err %v", ok, r.Err())
	}
	r.FeedRaw(prefix[2:])
	if _, ok := r.Next(); ok || !errors.Is(r.Err(), ErrCorruptFrame) {
		t.Fatalf("oversized split length: err %v", r.Err())
	}
}

func TestReaderFeedBeforeUsedUpPanics(t *testing.T) {
	r := NewRecordReader()
	r.FeedRaw([]byte{1, 'a', 1, 'b'})
	if rec, ok := r.Next(); !ok || string(rec) != "a" {
		t.Fatalf("first record %q %v", rec, ok)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Feed with unread bytes did not panic")
		}
	}()
	r.FeedRaw([]byte{1, 'c'})
}

// TestHotPathDoesNotAllocate: in steady state neither WriteRecord nor
// RecordReader.Next allocates, whether records fit in a buffer or span.
func TestHotPathDoesNotAllocate(t *testing.T) {
	for _, size := range []int{8, 100, 3 * DefaultBufferSize} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			p := NewResultPartition("p", 1, Config{}, nil)
			g := NewInputGate("g", 1, Config{}, nil)
			Connect(p, 0, g, 0)
			r := NewRecordReader()
			rec := make([]byte, size)
			ctx := testutil.Context(t, 0)
			n := 0
			step := func() {
				if err := p.WriteRecord(ctx, 0, rec); err != nil {
					t.Fatal(err)
				}
				for {
					boe, ok := g.Poll()
					if !ok {
						break
					}
					r.Feed(boe.Buffer)
					for {
						got, ok := r.Next()
						if !ok {
							break
						}
						if len(got) != size {
							t.Fatalf("record of %d bytes, want %d", len(got), size)
						}
						n++
					}
				}
			}
			perBuffer := max(1, DefaultBufferSize/(size+1))
			for range 4 * perBuffer { // warm up: pools, queues and the span buffer grow to size
				step()
			}
			if allocs := testing.AllocsPerRun(max(20, 3*perBuffer), step); allocs != 0 {
				t.Fatalf("%v allocations per record, want 0", allocs)
			}
			if n == 0 {
				t.Fatal("no record read")
			}
		})
	}
}

// FuzzFraming writes records of fuzzed sizes, with flushes and events,
// through a partition and a gate, and reads them back, swapping in a fresh
// reader restored from Pending at a fuzzed point.
func FuzzFraming(f *testing.F) {
	f.Add([]byte{0, 3, 1, 10, 200, 17, 0, 255, 46, 5})
	f.Add([]byte{48, 1, 2, 128, 129, 130, 0, 0, 0, 23, 34})
	f.Add(bytes.Repeat([]byte{250, 7}, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		if len(data) > 1024 { // keep each run small: the pools below grow with the input
			data = data[:1024]
		}
		bs := 16 + int(data[0])%48
		cut, cutRecords := int(data[1]), int(data[2])%4
		type op struct {
			rec   []byte
			ev    event.Event
			flush bool
		}
		var ops []op
		total := 0
		for i, c := range data[3:] {
			switch {
			case c%23 == 0:
				ops = append(ops, op{ev: event.CancelCheckpointMarker{ID: int64(i)}})
			case c%17 == 0:
				ops = append(ops, op{flush: true})
			default:
				n := int(c) * int(c) / 40 // 0..1625 bytes
				rec := make([]byte, n)
				for j := range rec {
					rec[j] = byte(i + j)
				}
				ops = append(ops, op{rec: rec})
				total += n + binary.MaxVarintLen64
			}
		}
		// Enough credit that a single goroutine never blocks.
		nbufs := total/bs + len(ops) + 2
		cfg := Config{BufferSize: bs, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: nbufs}
		p := NewResultPartition("p", 1, cfg, nil)
		g := NewInputGate("g", 1, cfg, nil)
		Connect(p, 0, g, 0)
		ctx := testutil.Context(t, 0)
		for _, o := range ops {
			var err error
			switch {
			case o.flush:
				p.Flush(0)
			case o.ev != nil:
				err = p.AddEvent(0, o.ev)
			default:
				err = p.WriteRecord(ctx, 0, o.rec)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Finish(); err != nil {
			t.Fatal(err)
		}
		r := NewRecordReader()
		var got []op
		for polls := 0; ; polls++ {
			boe, ok := g.Poll()
			if !ok {
				break
			}
			if boe.Buffer == nil {
				if r.Buffered() {
					t.Fatalf("event %v splits a record", boe.Event)
				}
				if _, eop := boe.Event.(event.EndOfPartition); !eop {
					got = append(got, op{ev: boe.Event})
				}
				continue
			}
			r.Feed(boe.Buffer)
			for k := 0; ; k++ {
				if polls == cut && k == cutRecords {
					pending := r.Pending()
					r.Reset()
					r = NewRecordReader()
					r.FeedRaw(pending)
				}
				rec, ok := r.Next()
				if !ok {
					break
				}
				got = append(got, op{rec: bytes.Clone(rec)})
			}
			if r.Err() != nil {
				t.Fatal(r.Err())
			}
		}
		var want []op
		for _, o := range ops {
			if !o.flush {
				want = append(want, o)
			}
		}
		if len(want) != len(got) {
			t.Fatalf("want %d records and events, got %d", len(want), len(got))
		}
		for i := range want {
			if want[i].ev != got[i].ev || !bytes.Equal(want[i].rec, got[i].rec) {
				t.Fatalf("element %d: want %v/%d bytes, got %v/%d bytes", i, want[i].ev, len(want[i].rec), got[i].ev, len(got[i].rec))
			}
		}
		if s := p.Stats(); s.PoolFree != s.PoolSize {
			t.Fatalf("output buffers missing: %+v", s)
		}
		if gs := g.Stats(); gs.Channels[0].ExclusiveFree != 1 || gs.FloatingFree != nbufs {
			t.Fatalf("consumer buffers not all recycled: %+v", gs)
		}
	})
}
