package operators

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// mergingWindowSet is the bookkeeping of merging (session) windows of one
// key, as Flink's MergingWindowSet: it maps every window in flight to its
// state window, the namespace that holds the window's contents. A merge
// keeps the state window of one of the merged windows, so the contents
// of the others are merged into it rather than all contents being moved
// whenever a session grows. The set is kept in keyed state, one value per
// key holding every pair (windowSetCodec), so it survives a restore: a
// record reads it with one point lookup and writes it once.
type mergingWindowSet struct {
	mapping map[TimeWindow]TimeWindow
	dirty   bool

	// What addWindow reuses from call to call: the windows handed to the
	// assigner, the merges it reported (their merged windows are ranges
	// of mergedBuf), and the callback that records them.
	windows     []TimeWindow
	results     []mergeResult
	mergedBuf   []TimeWindow
	mergedState []TimeWindow
	onMerge     func(result TimeWindow, merged []TimeWindow)
}

// mergeResult is one merge the assigner reported: result covers the
// windows mergedBuf[from:to].
type mergeResult struct {
	result   TimeWindow
	from, to int
}

// windowPair is one entry of a persisted mergingWindowSet.
type windowPair struct {
	window, stateWindow TimeWindow
}

// windowMergeFunc is told about a merge: result is the new window, merged
// the windows in flight that it replaces (without the window being added),
// stateResult the state window of result and mergedState the state
// windows whose contents must be merged into it. merged and mergedState
// are valid during the call only.
type windowMergeFunc func(result TimeWindow, merged []TimeWindow, stateResult TimeWindow, mergedState []TimeWindow) error

func newMergingWindowSet(pairs []windowPair) *mergingWindowSet {
	s := &mergingWindowSet{}
	s.reset(pairs)
	return s
}

// reset makes the set hold pairs, reusing its map.
func (s *mergingWindowSet) reset(pairs []windowPair) {
	if s.mapping == nil {
		s.mapping = make(map[TimeWindow]TimeWindow, len(pairs)+1)
	} else {
		clear(s.mapping)
	}
	for _, p := range pairs {
		s.mapping[p.window] = p.stateWindow
	}
	s.dirty = false
}

// pairs returns the set's entries, sorted, for persisting.
func (s *mergingWindowSet) pairs() []windowPair {
	out := make([]windowPair, 0, len(s.mapping))
	for w, sw := range s.mapping {
		out = append(out, windowPair{w, sw})
	}
	slices.SortFunc(out, func(a, b windowPair) int {
		if a.window.Start != b.window.Start {
			return cmpInt64(a.window.Start, b.window.Start)
		}
		return cmpInt64(a.window.End, b.window.End)
	})
	return out
}

// stateWindow returns the state window of a window in flight.
func (s *mergingWindowSet) stateWindow(w TimeWindow) (TimeWindow, bool) {
	sw, ok := s.mapping[w]
	return sw, ok
}

// retireWindow removes a window that was fired and cleaned up, or that
// turned out late.
func (s *mergingWindowSet) retireWindow(w TimeWindow) error {
	if _, ok := s.mapping[w]; !ok {
		return fmt.Errorf("retire window %v: not in the merging window set: %w", w, ErrInvalidWindow)
	}
	delete(s.mapping, w)
	s.dirty = true
	return nil
}

// addWindow adds a new window: it merges it with the windows in flight as
// the assigner says, calls merge for every merge of windows that had
// state, and returns the window the new one ended up in (itself, or the
// result of the merge that took it in).
func (s *mergingWindowSet) addWindow(nw TimeWindow, a MergingWindowAssigner, merge windowMergeFunc) (TimeWindow, error) {
	s.windows = s.windows[:0]
	for w := range s.mapping {
		s.windows = append(s.windows, w)
	}
	s.windows = append(s.windows, nw)
	s.results, s.mergedBuf = s.results[:0], s.mergedBuf[:0]
	if s.onMerge == nil {
		s.onMerge = func(result TimeWindow, merged []TimeWindow) {
			from := len(s.mergedBuf)
			s.mergedBuf = append(s.mergedBuf, merged...)
			s.mergedBuf = s.mergedBuf[:from+len(slices.Compact(s.mergedBuf[from:]))]
			s.results = append(s.results, mergeResult{result, from, len(s.mergedBuf)})
		}
	}
	a.MergeWindows(s.windows, s.onMerge)
	resultWindow, mergedNew := nw, false
	_, nwInFlight := s.mapping[nw]
	for _, r := range s.results {
		merged := s.mergedBuf[r.from:r.to:r.to]
		if i := slices.Index(merged, nw); i >= 0 {
			mergedNew, resultWindow = true, r.result
			if !nwInFlight {
				// The new window has no state nor timers of its own.
				merged = slices.Delete(merged, i, i+1)
			}
		}
		if len(merged) == 0 {
			continue // only the new window itself: nothing in flight merges
		}
		// The merge result keeps the state window of one of the windows
		// in flight; the state of the others is merged into it.
		stateResult, ok := s.mapping[merged[0]]
		if !ok {
			return TimeWindow{}, fmt.Errorf("merge into %v: window %v is not in the merging window set: %w", r.result, merged[0], ErrInvalidWindow)
		}
		mergedState := s.mergedState[:0]
		for _, m := range merged {
			if sw, ok := s.mapping[m]; ok {
				delete(s.mapping, m)
				if sw != stateResult {
					mergedState = append(mergedState, sw)
				}
			}
		}
		s.mergedState = mergedState
		s.mapping[r.result] = stateResult
		s.dirty = true
		// A window in flight that only swallowed the new window changes
		// nothing: no timers move and no state merges.
		if len(merged) == 1 && merged[0] == r.result {
			continue
		}
		if err := merge(r.result, merged, stateResult, mergedState); err != nil {
			return TimeWindow{}, err
		}
	}
	if !mergedNew && !nwInFlight {
		// A window of its own: it is its own state window.
		s.mapping[nw] = nw
		s.dirty = true
	}
	return resultWindow, nil
}

// windowSetCodec encodes a merging-window set's pairs as one value: the
// pairs one after the other, 32 bytes each (windowPairCodec).
type windowSetCodec struct{}

func (windowSetCodec) Append(dst []byte, ps []windowPair) ([]byte, error) {
	for _, p := range ps {
		dst, _ = windowPairCodec{}.Append(dst, p)
	}
	return dst, nil
}

func (windowSetCodec) Decode(src []byte) ([]windowPair, error) {
	const n = 2 * windowNamespaceLen
	if len(src)%n != 0 {
		return nil, fmt.Errorf("merging window set of %d bytes, not a multiple of %d: %w", len(src), n, ErrInvalidWindow)
	}
	out := make([]windowPair, 0, len(src)/n)
	for ; len(src) > 0; src = src[n:] {
		p, err := windowPairCodec{}.Decode(src[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// windowPairCodec encodes a windowPair in 32 bytes: the element of the
// merging-window set's earlier layout, a list state (mergingSetListName),
// and the unit of windowSetCodec.
type windowPairCodec struct{}

func (windowPairCodec) Append(dst []byte, p windowPair) ([]byte, error) {
	dst = AppendWindowNamespace(dst, p.window)
	return AppendWindowNamespace(dst, p.stateWindow), nil
}

func (windowPairCodec) Decode(src []byte) (windowPair, error) {
	if len(src) != 2*windowNamespaceLen {
		return windowPair{}, fmt.Errorf("merging window entry of %d bytes, want %d: %w", len(src), 2*windowNamespaceLen, ErrInvalidWindow)
	}
	return windowPair{
		window:      TimeWindow{Start: int64(binary.BigEndian.Uint64(src)), End: int64(binary.BigEndian.Uint64(src[8:]))},
		stateWindow: TimeWindow{Start: int64(binary.BigEndian.Uint64(src[16:])), End: int64(binary.BigEndian.Uint64(src[24:]))},
	}, nil
}
