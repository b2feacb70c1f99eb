package operators

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/state"
)

// DefaultWindowBufferLimit is the default bound of a session window
// operator's in-memory buffer (WindowConfig.BufferLimit): the sessions it
// holds before it writes them all into keyed state, Flink's
// table.exec.window-agg.buffer-size-limit.
const DefaultWindowBufferLimit = 100_000

// windowBuffer is the in-memory side of an event-time session window
// operator whose window function is an incremental reduce or aggregate
// under the default trigger: it combines each key's records into
// sessions, merged with each other as the records come (as the merging
// window set would merge their windows), before they reach keyed state.
// The operator writes a key's sessions into state (flushKey) when one of
// them is due at a watermark, before any timer of that key fires, before
// a record of that key that is not on time, when the buffer is full, and
// before a checkpoint's snapshot; see WindowOperator.
type windowBuffer[K comparable, IN any] interface {
	// add combines record v of key k, whose window is win, into k's
	// sessions.
	add(k K, win TimeWindow, v IN) error
	// has reports whether k has sessions buffered.
	has(k K) bool
	// full reports whether the buffer holds its limit of sessions.
	full() bool
	// due is at or before the earliest max timestamp of a session held.
	due() int64
	// dueKeys appends to dst the keys with a session whose max timestamp
	// is at or before upTo; keys appends every key.
	dueKeys(upTo int64, dst []K) []K
	keys(dst []K) []K
	// flushKey takes k's sessions out of the buffer, oldest first: for
	// each it calls place with the session's window, which sets the
	// contents state to the namespace the session goes to, and then adds
	// the session's accumulator there.
	flushKey(k K, place func(win TimeWindow) error) error
}

// memSession is a session of one key in a windowBuffer: its window and
// the accumulator of its records.
type memSession[ACC any] struct {
	win TimeWindow
	acc ACC
}

// keySessions are a key's buffered sessions, sorted by start, no two
// intersecting, and the earliest of their max timestamps.
type keySessions[ACC any] struct {
	list []memSession[ACC]
	due  int64
}

// sessionFuncs combine records into an accumulator in memory and write it
// into the window contents state: one makes the accumulator of a record,
// add adds a record to one, merge merges two, write adds one to the
// contents state at its current namespace.
type sessionFuncs[IN, ACC any] struct {
	one   func(v IN) (ACC, error)
	add   func(acc ACC, v IN) (ACC, error)
	merge func(a, b ACC) (ACC, error)
	write func(acc ACC) error
}

// sessionBuffer is the windowBuffer of an accumulator type ACC.
type sessionBuffer[K comparable, IN, ACC any] struct {
	m     map[K]keySessions[ACC]
	n     int // sessions held
	limit int
	low   int64 // at or before every key's due
	fn    sessionFuncs[IN, ACC]
	spare [][]memSession[ACC]
}

func newSessionBuffer[K comparable, IN, ACC any](limit int, fn sessionFuncs[IN, ACC]) *sessionBuffer[K, IN, ACC] {
	return &sessionBuffer[K, IN, ACC]{m: map[K]keySessions[ACC]{}, limit: limit, low: math.MaxInt64, fn: fn}
}

func (b *sessionBuffer[K, IN, ACC]) has(k K) bool { _, ok := b.m[k]; return ok }
func (b *sessionBuffer[K, IN, ACC]) full() bool   { return b.n >= b.limit }
func (b *sessionBuffer[K, IN, ACC]) due() int64   { return b.low }

func (b *sessionBuffer[K, IN, ACC]) add(k K, win TimeWindow, v IN) error {
	ks, ok := b.m[k]
	if !ok && len(b.spare) > 0 {
		ks.list = b.spare[len(b.spare)-1]
		b.spare = b.spare[:len(b.spare)-1]
	}
	list := ks.list
	// The sessions win touches are a run: the first that does not end
	// before it starts, up to the last that starts before it ends
	// (TimeWindow.Intersects).
	i := 0
	for i < len(list) && list[i].win.End < win.Start {
		i++
	}
	j := i
	for j < len(list) && list[j].win.Start <= win.End {
		j++
	}
	if i == j {
		acc, err := b.fn.one(v)
		if err != nil {
			return err
		}
		list = slices.Insert(list, i, memSession[ACC]{win: win, acc: acc})
		b.n++
	} else {
		s := list[i]
		var err error
		for _, o := range list[i+1 : j] {
			if s.acc, err = b.fn.merge(s.acc, o.acc); err != nil {
				return err
			}
			s.win = s.win.Cover(o.win)
		}
		s.win = s.win.Cover(win)
		if s.acc, err = b.fn.add(s.acc, v); err != nil {
			return err
		}
		list[i] = s
		list = slices.Delete(list, i+1, j)
		b.n -= j - i - 1
	}
	ks.list, ks.due = list, math.MaxInt64
	for _, s := range list {
		ks.due = min(ks.due, s.win.MaxTimestamp())
	}
	b.m[k] = ks
	b.low = min(b.low, ks.due)
	return nil
}

func (b *sessionBuffer[K, IN, ACC]) dueKeys(upTo int64, dst []K) []K {
	if upTo < b.low {
		return dst
	}
	b.low = math.MaxInt64
	for k, ks := range b.m {
		if ks.due <= upTo {
			dst = append(dst, k)
		} else {
			b.low = min(b.low, ks.due)
		}
	}
	return dst
}

func (b *sessionBuffer[K, IN, ACC]) keys(dst []K) []K {
	for k := range b.m {
		dst = append(dst, k)
	}
	return dst
}

func (b *sessionBuffer[K, IN, ACC]) flushKey(k K, place func(win TimeWindow) error) error {
	ks, ok := b.m[k]
	if !ok {
		return nil
	}
	delete(b.m, k)
	b.n -= len(ks.list)
	if len(b.m) == 0 {
		b.low = math.MaxInt64
	}
	for _, s := range ks.list {
		if err := place(s.win); err != nil {
			return err
		}
		if err := b.fn.write(s.acc); err != nil {
			return fmt.Errorf("add to window %v: %w", s.win, err)
		}
	}
	clear(ks.list)
	b.spare = append(b.spare, ks.list[:0])
	return nil
}

// reduceBuffer is the windowBuffer of a reduce window: a session's
// accumulator is its records reduced, written with the contents' Add.
func reduceBuffer[K comparable, T any](reduce func(acc, v T) (T, error)) func(windowContents[T, T], int) windowBuffer[K, T] {
	return func(c windowContents[T, T], limit int) windowBuffer[K, T] {
		r := func(a, b T) (T, error) {
			v, err := reduce(a, b)
			if err != nil {
				return a, fmt.Errorf("reduce: %w", err)
			}
			return v, nil
		}
		return newSessionBuffer[K](limit, sessionFuncs[T, T]{
			one: func(v T) (T, error) { return v, nil }, add: r, merge: r, write: c.Add})
	}
}

// aggregateBuffer is the windowBuffer of an aggregate window: a session's
// accumulator is its records added to a new accumulator, merged into the
// contents state with the aggregate's Merge (aggregatingWindow.addAcc).
func aggregateBuffer[K comparable, IN, ACC, OUT any](agg state.AggregateFunction[IN, ACC, OUT]) func(windowContents[IN, OUT], int) windowBuffer[K, IN] {
	return func(c windowContents[IN, OUT], limit int) windowBuffer[K, IN] {
		w := c.(aggregatingWindow[IN, ACC, OUT])
		return newSessionBuffer[K](limit, sessionFuncs[IN, ACC]{
			one:   func(v IN) (ACC, error) { return agg.Add(v, agg.CreateAccumulator()), nil },
			add:   func(acc ACC, v IN) (ACC, error) { return agg.Add(v, acc), nil },
			merge: func(a, b ACC) (ACC, error) { return agg.Merge(a, b), nil },
			write: w.addAcc,
		})
	}
}

// aggInput is what the contents state of an aggregate window adds: a
// record, or (isAcc) the accumulator of records combined in memory.
type aggInput[IN, ACC any] struct {
	v     IN
	acc   ACC
	isAcc bool
}

// accMerging is the aggregate function of an aggregate window's contents
// state: the user's, whose Add merges an accumulator it is handed. The
// state holds the user's accumulators, so the layout is that of an
// AggregatingState of the user's function.
type accMerging[IN, ACC, OUT any] struct {
	agg state.AggregateFunction[IN, ACC, OUT]
}

func (a accMerging[IN, ACC, OUT]) CreateAccumulator() ACC { return a.agg.CreateAccumulator() }
func (a accMerging[IN, ACC, OUT]) GetResult(acc ACC) OUT  { return a.agg.GetResult(acc) }
func (a accMerging[IN, ACC, OUT]) Merge(x, y ACC) ACC     { return a.agg.Merge(x, y) }
func (a accMerging[IN, ACC, OUT]) Add(in aggInput[IN, ACC], acc ACC) ACC {
	if in.isAcc {
		return a.agg.Merge(acc, in.acc)
	}
	return a.agg.Add(in.v, acc)
}

// aggregatingWindow is the contents state of an aggregate window.
type aggregatingWindow[IN, ACC, OUT any] struct {
	state.AggregatingState[aggInput[IN, ACC], OUT]
}

func (w aggregatingWindow[IN, ACC, OUT]) Add(v IN) error {
	return w.AggregatingState.Add(aggInput[IN, ACC]{v: v})
}

// addAcc merges acc into the current namespace's accumulator.
func (w aggregatingWindow[IN, ACC, OUT]) addAcc(acc ACC) error {
	return w.AggregatingState.Add(aggInput[IN, ACC]{acc: acc, isAcc: true})
}

// buffers reports whether the operator combines records in memory: event-
// time session windows, an incremental reduce or aggregate, the default
// trigger, no evictor, and a positive BufferLimit. Other windows, custom
// triggers and processing time take the per-record path alone.
func (w *WindowOperator[K, IN, V, OUT]) buffers() bool {
	if w.newBuffer == nil || w.cfg.Evictor != nil || w.cfg.BufferLimit <= 0 || !w.event {
		return false
	}
	if _, ok := w.cfg.Assigner.(SessionWindows); !ok {
		return false
	}
	_, ok := w.trigger.(EventTimeTrigger[IN])
	return ok
}

// buffer combines v into its key's sessions in memory if its window is on
// time (its max timestamp after the watermark: adding it fires nothing,
// and neither does any merge it makes), and reports whether it did.
// Otherwise the record may fire a window, be late, or go to the late
// side output: its key's buffered sessions go into state first, and the
// caller takes the per-record path, as without the buffer.
func (w *WindowOperator[K, IN, V, OUT]) buffer(v IN, ts int64) (bool, error) {
	k := w.cfg.KeyOf(v)
	windows, err := w.cfg.Assigner.AssignWindows(ts, 0, w.windows[:0])
	w.windows = windows
	if err != nil {
		return true, fmt.Errorf("%s: %w", w.cfg.Assigner, err)
	}
	if len(windows) != 1 || windows[0].MaxTimestamp() <= w.timers.watermark {
		if w.buf.has(k) {
			return false, w.flushKey(k)
		}
		return false, nil
	}
	if w.buf.full() {
		if err := w.flushAll(); err != nil {
			return true, err
		}
	}
	return true, w.buf.add(k, windows[0], v)
}

// flushKey writes key k's buffered sessions into keyed state, each as its
// records would have gone in one by one at the current watermark (which
// is before the max timestamp of every buffered session): its window is
// added to the merging-window set (merging the windows in flight it
// touches, their contents and timers, as mergeWindows does), its
// accumulator is added to the contents of the window it ended up in, and
// that window's trigger timer and cleanup timer are registered (what the
// default trigger's OnElement does for a window not yet due).
func (w *WindowOperator[K, IN, V, OUT]) flushKey(k K) error {
	if err := w.setKey(k); err != nil {
		return err
	}
	set, err := w.loadMergingSet(k)
	if err != nil {
		return err
	}
	w.flushSet = set
	if err := w.buf.flushKey(k, w.place); err != nil {
		return err
	}
	if err := w.persistMergingSet(set); err != nil {
		return err
	}
	w.setOf, w.setHeld = k, true
	return nil
}

// placeSession adds a buffered session's window to the set being flushed
// and sets the contents state to the window's state window.
func (w *WindowOperator[K, IN, V, OUT]) placeSession(win TimeWindow) error {
	set := w.flushSet
	actual, err := set.addWindow(win, w.merging, w.mergeWindows)
	if err != nil {
		return err
	}
	sw, ok := set.stateWindow(actual)
	if !ok {
		return fmt.Errorf("window %v has no state window: %w", actual, ErrInvalidWindow)
	}
	w.contents.SetNamespace(w.ns(sw))
	if err := w.triggerCtx(actual).RegisterEventTimeTimer(actual.MaxTimestamp()); err != nil {
		return fmt.Errorf("%s: window %v: %w", w.trigger, actual, err)
	}
	return w.registerCleanupTimer(actual)
}

// flushDue writes into state the buffered sessions of every key with a
// session due at upTo, before the watermark moves there.
func (w *WindowOperator[K, IN, V, OUT]) flushDue(upTo int64) error {
	w.flushKeys = w.buf.dueKeys(upTo, w.flushKeys[:0])
	return w.flushKeysListed()
}

// flushAll writes every buffered session into state: when the buffer is
// full, and before a snapshot (the operator's Context flusher).
func (w *WindowOperator[K, IN, V, OUT]) flushAll() error {
	w.flushKeys = w.buf.keys(w.flushKeys[:0])
	return w.flushKeysListed()
}

func (w *WindowOperator[K, IN, V, OUT]) flushKeysListed() error {
	for _, k := range w.flushKeys {
		if err := w.flushKey(k); err != nil {
			return fmt.Errorf("write the buffered sessions of key %v: %w", k, err)
		}
	}
	clear(w.flushKeys)
	return nil
}

// BufferLimit is the bound of the operator's in-memory buffer of
// sessions (WindowConfig.BufferLimit).
func (w *WindowOperator[K, IN, V, OUT]) BufferLimit() int { return w.cfg.BufferLimit }
