package operators

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// ErrNoTimestamp is returned (wrapped) by an event-time window operator
// for a record without an event timestamp.
var ErrNoTimestamp = errors.New("record has no event timestamp: give the source a WatermarkStrategy with timestamps, or use processing-time windows")

// ErrInvalidWindow is returned (wrapped) for a window assigner with a size,
// slide, offset or gap that cannot work, and for window bookkeeping that
// is inconsistent (a corrupt merging-window set).
var ErrInvalidWindow = errors.New("invalid window")

// TimeWindow is a window of time [Start, End), in Unix milliseconds of
// event time or processing time, as Flink's TimeWindow.
type TimeWindow struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// MaxTimestamp is the largest timestamp that belongs to the window: an
// event-time window fires when the watermark reaches it.
// The GlobalWindow's is MaxWatermark.
func (w TimeWindow) MaxTimestamp() int64 {
	if w.End == math.MaxInt64 {
		return math.MaxInt64
	}
	return w.End - 1
}

// Intersects reports whether the windows overlap or touch (Flink merges
// session windows that touch: [0,10) and [10,20)).
func (w TimeWindow) Intersects(o TimeWindow) bool { return w.Start <= o.End && w.End >= o.Start }

// Cover returns the smallest window that holds both.
func (w TimeWindow) Cover(o TimeWindow) TimeWindow {
	return TimeWindow{Start: min(w.Start, o.Start), End: max(w.End, o.End)}
}

func (w TimeWindow) String() string { return fmt.Sprintf("[%d, %d)", w.Start, w.End) }

// windowNamespaceLen is the size of an encoded window.
const windowNamespaceLen = 16

// AppendWindowNamespace appends the state namespace of w: its start and
// end, 8 bytes big endian each. Window contents, per-window state and
// window timers are kept under it.
func AppendWindowNamespace(dst []byte, w TimeWindow) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(w.Start))
	return binary.BigEndian.AppendUint64(dst, uint64(w.End))
}

// DecodeWindowNamespace is the inverse of AppendWindowNamespace.
func DecodeWindowNamespace(b []byte) (TimeWindow, error) {
	if len(b) != windowNamespaceLen {
		return TimeWindow{}, fmt.Errorf("window namespace of %d bytes, want %d: %w", len(b), windowNamespaceLen, ErrInvalidWindow)
	}
	return TimeWindow{Start: int64(binary.BigEndian.Uint64(b)), End: int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// WindowStart returns the start of the window of the given size, aligned
// to offset (windows start at offset + n*size), that holds ts.
func WindowStart(ts, offset, size int64) int64 {
	r := (ts - offset) % size
	if r < 0 {
		r += size
	}
	return ts - r
}

// WindowAssigner gives a record the windows it belongs to, as Flink's
// WindowAssigner; the operator's trigger is the default of its time
// domain (see WindowOperator).
type WindowAssigner interface {
	// AssignWindows appends to dst the windows of a record with event
	// timestamp ts (NoTimestamp if it has none), arriving at processing
	// time now (only read by processing-time assigners).
	AssignWindows(ts, now int64, dst []TimeWindow) ([]TimeWindow, error)
	// IsEventTime reports whether windows are of event time (fired by
	// watermarks) or of processing time (fired by the wall clock).
	IsEventTime() bool
	// Validate reports a size, slide, gap or offset that cannot work,
	// wrapping ErrInvalidWindow.
	Validate() error
	String() string
}

// MergingWindowAssigner is an assigner whose windows merge (session
// windows), as Flink's MergingWindowAssigner.
type MergingWindowAssigner interface {
	WindowAssigner
	// MergeWindows calls merge once for every group of two or more of the
	// given windows that merge into result.
	MergeWindows(windows []TimeWindow, merge func(result TimeWindow, merged []TimeWindow))
}

// TumblingWindows assigns each record to one window of Size ms, the
// windows starting at Offset + n*Size (Flink's TumblingEventTimeWindows
// and TumblingProcessingTimeWindows).
type TumblingWindows struct {
	Size, Offset   int64
	ProcessingTime bool
}

func (a TumblingWindows) AssignWindows(ts, now int64, dst []TimeWindow) ([]TimeWindow, error) {
	t, err := timeOf(a.ProcessingTime, ts, now)
	if err != nil {
		return dst, err
	}
	start := WindowStart(t, a.Offset, a.Size)
	return append(dst, TimeWindow{Start: start, End: start + a.Size}), nil
}

func (a TumblingWindows) IsEventTime() bool { return !a.ProcessingTime }

func (a TumblingWindows) Validate() error {
	if a.Size <= 0 || abs(a.Offset) >= a.Size {
		return fmt.Errorf("%s: size must be positive and |offset| smaller than the size: %w", a, ErrInvalidWindow)
	}
	return nil
}

func (a TumblingWindows) String() string {
	return fmt.Sprintf("Tumbling%sWindows(%v%s)", domainName(a.ProcessingTime), ms(a.Size), offsetString(a.Offset))
}

// SlidingWindows assigns each record to the Size/Slide windows of Size ms
// that hold it, a window starting every Slide ms at Offset + n*Slide
// (Flink's SlidingEventTimeWindows and SlidingProcessingTimeWindows).
type SlidingWindows struct {
	Size, Slide, Offset int64
	ProcessingTime      bool
}

func (a SlidingWindows) AssignWindows(ts, now int64, dst []TimeWindow) ([]TimeWindow, error) {
	t, err := timeOf(a.ProcessingTime, ts, now)
	if err != nil {
		return dst, err
	}
	for start := WindowStart(t, a.Offset, a.Slide); start > t-a.Size; start -= a.Slide {
		dst = append(dst, TimeWindow{Start: start, End: start + a.Size})
	}
	return dst, nil
}

func (a SlidingWindows) IsEventTime() bool { return !a.ProcessingTime }

func (a SlidingWindows) Validate() error {
	if a.Size <= 0 || a.Slide <= 0 || abs(a.Offset) >= a.Slide {
		return fmt.Errorf("%s: size and slide must be positive and |offset| smaller than the slide: %w", a, ErrInvalidWindow)
	}
	return nil
}

func (a SlidingWindows) String() string {
	return fmt.Sprintf("Sliding%sWindows(%v, %v%s)", domainName(a.ProcessingTime), ms(a.Size), ms(a.Slide), offsetString(a.Offset))
}

// SessionWindows gives each record the window [t, t+Gap) and merges
// windows that overlap or touch, so a session ends after a gap of Gap ms
// without records (Flink's EventTimeSessionWindows and
// ProcessingTimeSessionWindows).
type SessionWindows struct {
	Gap            int64
	ProcessingTime bool
}

func (a SessionWindows) AssignWindows(ts, now int64, dst []TimeWindow) ([]TimeWindow, error) {
	t, err := timeOf(a.ProcessingTime, ts, now)
	if err != nil {
		return dst, err
	}
	return append(dst, TimeWindow{Start: t, End: t + a.Gap}), nil
}

func (a SessionWindows) IsEventTime() bool { return !a.ProcessingTime }

func (a SessionWindows) Validate() error {
	if a.Gap <= 0 {
		return fmt.Errorf("%s: the gap must be positive: %w", a, ErrInvalidWindow)
	}
	return nil
}

func (a SessionWindows) MergeWindows(windows []TimeWindow, merge func(TimeWindow, []TimeWindow)) {
	MergeTimeWindows(windows, merge)
}

func (a SessionWindows) String() string {
	if a.ProcessingTime {
		return fmt.Sprintf("ProcessingTimeSessionWindows(%v)", ms(a.Gap))
	}
	return fmt.Sprintf("EventTimeSessionWindows(%v)", ms(a.Gap))
}

// MergeTimeWindows merges windows that intersect, as Flink's
// TimeWindow.mergeWindows: it calls merge for every group of two or more
// distinct windows, with the window that covers them.
func MergeTimeWindows(windows []TimeWindow, merge func(result TimeWindow, merged []TimeWindow)) {
	sorted := slices.Clone(windows)
	slices.SortFunc(sorted, func(a, b TimeWindow) int {
		if a.Start != b.Start {
			return cmpInt64(a.Start, b.Start)
		}
		return cmpInt64(a.End, b.End)
	})
	sorted = slices.Compact(sorted)
	var cover TimeWindow
	var group []TimeWindow
	flush := func() {
		if len(group) > 1 {
			merge(cover, group)
		}
	}
	for i, w := range sorted {
		if i > 0 && cover.Intersects(w) {
			cover = cover.Cover(w)
			group = append(group, w)
			continue
		}
		flush()
		cover, group = w, []TimeWindow{w}
	}
	flush()
}

func timeOf(processingTime bool, ts, now int64) (int64, error) {
	if processingTime {
		return now, nil
	}
	if ts == NoTimestamp {
		return 0, ErrNoTimestamp
	}
	return ts, nil
}

func domainName(processingTime bool) string {
	if processingTime {
		return "ProcessingTime"
	}
	return "EventTime"
}

func offsetString(offset int64) string {
	if offset == 0 {
		return ""
	}
	return fmt.Sprintf(", offset %v", ms(offset))
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// addSaturating returns a+b for b >= 0, or MaxInt64 when it overflows.
func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
