package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/runtime/network/event"
	"github.com/sluicehq/sluice/state"
)

// ErrBadRecordHeader is returned (wrapped) when a record read from the
// network does not start with a valid header.
var ErrBadRecordHeader = errors.New("runtime: bad record header")

// TypeInfo carries what the runtime needs to move records of one type
// between operators: its codec, and the typed plumbing built once per task
// so the per-record path has no type switches.
type TypeInfo interface {
	// Codec returns the codec as any (a codec.Codec[T]).
	Codec() any
	fanOut(outs []any) any
	chainedOutput(in any, op operators.Operator) (any, error)
	networkOutput(w *netWriter, keyHash any) (any, error)
	// watchWatermarks wraps out (an operators.Output[T]) so that every
	// watermark through it is reported to seen first.
	watchWatermarks(out any, seen func(int64)) any
	decoder(target any) (recordDecoder, error)
	// Observe wraps out (an operators.Output[T]; nil for one that drops
	// everything) so that onRecord sees every record, as any, before out
	// does, and onWatermark (if not nil) every watermark; an error of
	// either is the Collect's or EmitWatermark's error, and out does not
	// get that record. It is for test kits (package sluicetest): to read
	// an operator's side outputs, and to count, or fail at, the records an
	// operator emits.
	Observe(out any, onRecord func(v any, ts int64) error, onWatermark func(wm int64) error) any
}

// TypeOf returns the TypeInfo of T with codec c.
func TypeOf[T any](c codec.Codec[T]) TypeInfo { return &typed[T]{codec: c} }

type typed[T any] struct {
	codec codec.Codec[T]
}

func (t *typed[T]) Codec() any { return t.codec }

func (t *typed[T]) fanOut(outs []any) any {
	if len(outs) == 0 {
		return discardOutput[T]{}
	}
	if len(outs) == 1 {
		return outs[0]
	}
	f := make(fanOut[T], len(outs))
	for i, o := range outs {
		f[i] = o.(operators.Output[T])
	}
	return f
}

func (t *typed[T]) chainedOutput(in any, op operators.Operator) (any, error) {
	if o, ok := in.(operators.Output[T]); ok {
		// The operator takes records as an Output itself: one call per hop.
		return o, nil
	}
	i, ok := in.(operators.Input[T])
	if !ok {
		return nil, fmt.Errorf("chained input is %T, want operators.Input[%T]", in, *new(T))
	}
	return chainOutput[T]{in: i, op: op}, nil
}

func (t *typed[T]) watchWatermarks(out any, seen func(int64)) any {
	return watermarkWatch[T]{out: out.(operators.Output[T]), seen: seen}
}

// watermarkWatch reports the watermarks that pass through an output.
type watermarkWatch[T any] struct {
	out  operators.Output[T]
	seen func(int64)
}

func (w watermarkWatch[T]) Collect(v T, ts int64) error { return w.out.Collect(v, ts) }
func (w watermarkWatch[T]) EmitWatermark(wm int64) error {
	w.seen(wm)
	return w.out.EmitWatermark(wm)
}

func (t *typed[T]) Observe(out any, onRecord func(any, int64) error, onWatermark func(int64) error) any {
	o := observedOutput[T]{onRecord: onRecord, onWatermark: onWatermark}
	if out != nil {
		o.out = out.(operators.Output[T])
	}
	return o
}

// observedOutput reports what passes through an output (TypeInfo.Observe).
type observedOutput[T any] struct {
	out         operators.Output[T] // nil: drop
	onRecord    func(any, int64) error
	onWatermark func(int64) error
}

func (o observedOutput[T]) Collect(v T, ts int64) error {
	if err := o.onRecord(v, ts); err != nil {
		return err
	}
	if o.out == nil {
		return nil
	}
	return o.out.Collect(v, ts)
}

func (o observedOutput[T]) EmitWatermark(wm int64) error {
	if o.onWatermark != nil {
		if err := o.onWatermark(wm); err != nil {
			return err
		}
	}
	if o.out == nil {
		return nil
	}
	return o.out.EmitWatermark(wm)
}

// chainOutput hands records to the next operator of the chain as Go values.
type chainOutput[T any] struct {
	in operators.Input[T]
	op operators.Operator
}

func (c chainOutput[T]) Collect(v T, ts int64) error  { return c.in.ProcessElement(v, ts) }
func (c chainOutput[T]) EmitWatermark(wm int64) error { return c.op.ProcessWatermark(wm) }

func (t *typed[T]) networkOutput(w *netWriter, keyHash any) (any, error) {
	o := &netOutput[T]{w: w, codec: t.codec}
	if w.kind == PartitionHash {
		h, ok := keyHash.(func(T, []byte) (uint32, []byte))
		if !ok {
			return nil, fmt.Errorf("hash edge %s: key hash function is %T, want func(%T, []byte) (uint32, []byte)", w.name, keyHash, *new(T))
		}
		o.keyHash = h
	}
	return o, nil
}

func (t *typed[T]) decoder(target any) (recordDecoder, error) {
	in, ok := target.(operators.Input[T])
	if !ok {
		return nil, fmt.Errorf("input is %T, want operators.Input[%T]", target, *new(T))
	}
	return &typedDecoder[T]{codec: t.codec, in: in}, nil
}

// recordDecoder decodes one record off the wire and hands it to its input.
// A decode failure is returned as decodeErr so the task can name the edge,
// channel and position; err is the input's own failure.
type recordDecoder interface {
	decode(rec []byte) (decodeErr, err error)
}

type typedDecoder[T any] struct {
	codec codec.Codec[T]
	in    operators.Input[T]
}

func (d *typedDecoder[T]) decode(rec []byte) (error, error) {
	ts, payload, err := splitRecord(rec)
	if err != nil {
		return err, nil
	}
	v, err := d.codec.Decode(payload)
	if err != nil {
		return err, nil
	}
	return nil, d.in.ProcessElement(v, ts)
}

// Records on the wire: one flag byte (0: no timestamp, 1: an 8-byte
// big-endian timestamp follows), then the codec's bytes.
func appendRecordHeader(dst []byte, ts int64) []byte {
	if ts == operators.NoTimestamp {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	return binary.BigEndian.AppendUint64(dst, uint64(ts))
}

func splitRecord(rec []byte) (int64, []byte, error) {
	if len(rec) == 0 {
		return 0, nil, fmt.Errorf("empty record: %w", ErrBadRecordHeader)
	}
	switch rec[0] {
	case 0:
		return operators.NoTimestamp, rec[1:], nil
	case 1:
		if len(rec) < 9 {
			return 0, nil, fmt.Errorf("record of %d bytes too short for its timestamp: %w", len(rec), ErrBadRecordHeader)
		}
		return int64(binary.BigEndian.Uint64(rec[1:9])), rec[9:], nil
	}
	return 0, nil, fmt.Errorf("flag byte %#x: %w", rec[0], ErrBadRecordHeader)
}

// fanOut sends every record and watermark to several outputs.
type fanOut[T any] []operators.Output[T]

func (f fanOut[T]) Collect(v T, ts int64) error {
	for _, o := range f {
		if err := o.Collect(v, ts); err != nil {
			return err
		}
	}
	return nil
}

func (f fanOut[T]) EmitWatermark(wm int64) error {
	for _, o := range f {
		if err := o.EmitWatermark(wm); err != nil {
			return err
		}
	}
	return nil
}

// discardOutput is the output of a node nobody consumes.
type discardOutput[T any] struct{}

func (discardOutput[T]) Collect(T, int64) error    { return nil }
func (discardOutput[T]) EmitWatermark(int64) error { return nil }

// netWriter is the untyped half of a network output: one producing
// subtask's result partition for one edge, and how records pick their
// subpartition.
type netWriter struct {
	edge      *Edge
	name      string
	part      *network.ResultPartition
	kind      Partitioner // resolved: never PartitionDefault
	n         int         // number of subpartitions
	next      int         // round robin position
	maxPar    int         // the consumer's max parallelism: its number of key groups
	ctx       context.Context
	flushEach bool
	// flusher is the task's buffer timeout: a flush it marked due is done
	// after the record being written (nil: flushEach, or none).
	flusher *outputFlusher
	// outputWM is the task's output watermark: the latest watermark sent
	// downstream on any of its edges.
	outputWM *atomic.Int64
}

func (w *netWriter) write(sub int, rec []byte) error {
	if err := w.part.WriteRecord(w.ctx, sub, rec); err != nil {
		return fmt.Errorf("write to %s: %w", w.name, err)
	}
	if w.flushEach {
		w.part.Flush(sub)
	}
	w.flusher.flushIfDue()
	return nil
}

// netOutput encodes records and writes them to a netWriter. A record for
// one subpartition is encoded straight into that subpartition's buffer
// (RecordSpace), so the codec's append is the only copy of its bytes on
// the producing side; one that does not fit the room left goes through
// scratch and is copied, spanning buffers.
type netOutput[T any] struct {
	w       *netWriter
	codec   codec.Codec[T]
	keyHash func(T, []byte) (uint32, []byte)
	scratch []byte
	keyBuf  []byte
	last    int // the size of the last record encoded: the room asked for
}

func (o *netOutput[T]) Collect(v T, ts int64) error {
	w := o.w
	var sub int
	switch w.kind {
	case PartitionForward:
	case PartitionRebalance:
		sub = w.next
		if w.next++; w.next == w.n {
			w.next = 0
		}
	case PartitionHash:
		var h uint32
		h, o.keyBuf = o.keyHash(v, o.keyBuf[:0])
		kg := state.KeyGroupForHash(h, w.maxPar)
		sub = state.OperatorIndexFor(kg, w.maxPar, w.n)
	default: // PartitionBroadcast
		buf, err := o.encode(o.scratch[:0], v, ts)
		if err != nil {
			return err
		}
		o.scratch = buf
		if err := w.part.BroadcastRecord(w.ctx, buf); err != nil {
			return fmt.Errorf("broadcast to %s: %w", w.name, err)
		}
		if w.flushEach {
			w.part.FlushAll()
		}
		w.flusher.flushIfDue()
		return nil
	}
	dst, err := w.part.RecordSpace(w.ctx, sub, o.last)
	if err != nil {
		return fmt.Errorf("write to %s: %w", w.name, err)
	}
	inPlace := dst != nil
	if !inPlace {
		dst = o.scratch[:0]
	}
	buf, err := o.encode(dst, v, ts)
	if err != nil {
		return err
	}
	o.last = len(buf)
	if !inPlace {
		o.scratch = buf
	}
	return w.write(sub, buf)
}

func (o *netOutput[T]) encode(dst []byte, v T, ts int64) ([]byte, error) {
	buf, err := o.codec.Append(appendRecordHeader(dst, ts), v)
	if err != nil {
		return nil, fmt.Errorf("encode record for %s: %w", o.w.name, err)
	}
	return buf, nil
}

func (o *netOutput[T]) EmitWatermark(wm int64) error {
	if o.w.outputWM != nil && wm > o.w.outputWM.Load() {
		o.w.outputWM.Store(wm) // written by the task goroutine only
	}
	return o.w.part.BroadcastEvent(event.Watermark{Timestamp: wm})
}
