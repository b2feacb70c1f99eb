package kafka

import (
	"encoding/binary"
	"sync"
	"weak"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordPoolSpares is how many spare slices of each kind a reader's pool
// remembers.
const recordPoolSpares = 4

// recordPool is the pool of one reader's consumer client
// (kgo.WithPools): the slices of kgo.Records franz-go decodes a batch
// into (kgo.PoolRecords) and the buffers it decompresses a batch into
// (kgo.PoolDecompressBytes). A batch's slices come back when the reader
// has recycled every record of it (kgo.Record.Recycle, once the record
// is decoded and emitted), and a later batch is decoded into them
// instead of into new ones. The source uses it only when its decoder
// keeps nothing of the records (see Decoder): a recycled record's Key
// and Value are overwritten by a later batch.
//
// The pool holds its spares weakly: a spare not taken before the next
// collection is collected with the garbage. Spares held strongly were
// live heap, taken from the room the collector has under the memory
// limit, and a reader's turnover needs a fetch's worth of them (two
// batches of a few thousand records, 1.5 MB): the exactly-once Kafka
// job collected as often as without the pool, over a live heap 5 MiB
// larger (issue 32). Held weakly they cost the collector nothing, and a
// batch decoded into a spare is an allocation saved.
//
// It remembers recordPoolSpares slices of each kind and hands out the
// smallest that fits, if it is at most twice what is needed; franz-go
// allocates when none fits (and puts the
// slice it allocated back in its turn).
type recordPool struct {
	mu   sync.Mutex
	recs []weak.Pointer[spare[kgo.Record]]
	bufs []weak.Pointer[spare[byte]]
}

// spare holds a slice for the pool's weak pointer.
type spare[E any] struct{ s []E }

var (
	_ kgo.PoolRecords         = (*recordPool)(nil)
	_ kgo.PoolDecompressBytes = (*recordPool)(nil)
)

// GetRecords returns a spare slice of capacity n or more, else nil
// (franz-go then makes one of n).
func (p *recordPool) GetRecords(n int) []kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return takeFit(&p.recs, n)
}

// PutRecords keeps s as a spare (its records are zero: franz-go clears
// each one when it is recycled).
func (p *recordPool) PutRecords(s []kgo.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keepSpare(&p.recs, s)
}

// GetDecompressBytes returns a spare buffer for the batch compressed:
// the smallest that holds it when its decompressed size is known (snappy
// says it in its header), else the largest; nil when there is none.
func (p *recordPool) GetDecompressBytes(compressed []byte, codec kgo.CompressionCodecType) []byte {
	n := -1
	if codec == kgo.CodecSnappy && len(compressed) > 0 && compressed[0] != 0x82 {
		// The raw snappy format starts with the decoded length; the
		// xerial framing (which starts with 0x82) does not.
		if l, k := binary.Uvarint(compressed); k > 0 {
			n = int(min(l, 1<<31))
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return takeFit(&p.bufs, n)
}

// PutDecompressBytes keeps b (zeroed by franz-go) as a spare.
func (p *recordPool) PutDecompressBytes(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keepSpare(&p.bufs, b)
}

// takeFit removes and returns the spare of least capacity at least n
// and at most 2n (n < 0: the spare of most capacity), nil if none has
// it: a small batch does not hold a large spare while its records are
// handed out (a 1.3 MB one for a few records), which kept the job's live
// heap 1-2 MiB higher and its limit floating. Spares collected since
// they were put are forgotten.
func takeFit[E any](spares *[]weak.Pointer[spare[E]], n int) []E {
	var best *spare[E]
	at := -1
	live := (*spares)[:0]
	for _, w := range *spares {
		sp := w.Value()
		if sp == nil {
			continue
		}
		live = append(live, w)
		c := cap(sp.s)
		switch {
		case n < 0 && (best == nil || c > cap(best.s)),
			n >= 0 && c >= n && c <= 2*n && (best == nil || c < cap(best.s)):
			best, at = sp, len(live)-1
		}
	}
	clear((*spares)[len(live):])
	*spares = live
	if best == nil {
		return nil
	}
	*spares = append(live[:at], live[at+1:]...)
	clear(live[len(*spares):])
	return best.s[:0]
}

// keepSpare remembers s as a spare, forgetting the oldest when it
// remembers recordPoolSpares already.
func keepSpare[E any](spares *[]weak.Pointer[spare[E]], s []E) {
	if cap(s) == 0 {
		return
	}
	if len(*spares) == recordPoolSpares {
		ss := *spares
		copy(ss, ss[1:])
		*spares = ss[:len(ss)-1]
	}
	*spares = append(*spares, weak.Make(&spare[E]{s}))
}
