package source

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalidConfig is returned (wrapped) by NewReader when a test source was
// built with an invalid argument or option; the message names which.
var ErrInvalidConfig = errors.New("source: invalid configuration")

// ErrInvalidReaderContext is returned (wrapped) by NewReader when the
// subtask index is outside [0, Parallelism) or Parallelism < 1.
var ErrInvalidReaderContext = errors.New("source: invalid reader context")

// maxCatchUp is how far behind its schedule a rate-limited reader may fall
// (because it was not polled, e.g. under backpressure) before it restarts
// its schedule from now instead of bursting to catch up.
const maxCatchUp = time.Second

// DatagenOption configures a Datagen source.
type DatagenOption func(*datagenConfig)

type datagenConfig struct {
	count      int64                   // records over all subtasks; < 0: unbounded
	rate       float64                 // records per second over all subtasks; 0: unlimited
	timestamps func(index int64) int64 // nil: NoTimestamp
}

// DatagenCount bounds the source to n records over all subtasks, indexes
// 0 to n-1. A negative n (the default) makes the source unbounded.
func DatagenCount(n int64) DatagenOption {
	return func(c *datagenConfig) { c.count = n }
}

// DatagenRate limits the source to recordsPerSecond records per second over
// all subtasks; each of p subtasks emits at recordsPerSecond/p. 0 (the
// default) means unlimited. A rate-limited reader returns NothingAvailable
// until its next record is due, and its Available channel fires then.
func DatagenRate(recordsPerSecond float64) DatagenOption {
	return func(c *datagenConfig) { c.rate = recordsPerSecond }
}

// DatagenTimestamps gives every record the event timestamp fn(index), in
// milliseconds. Without it records carry NoTimestamp. fn is called from
// every subtask's goroutine, so it must be safe for concurrent use.
func DatagenTimestamps(fn func(index int64) int64) DatagenOption {
	return func(c *datagenConfig) { c.timestamps = fn }
}

// Datagen is a parallel source that generates records from their index, as
// Flink's DataGeneratorSource does. Subtask i of p emits the indexes i, i+p,
// i+2p, ... (below the count, if bounded), in that order, so the set of
// records is a function of the generator alone, whatever the parallelism.
//
// A bounded Datagen's reader emits MaxWatermark once after its last record
// and then reports EndOfInput.
type Datagen[T any] struct {
	gen func(index int64) T
	cfg datagenConfig
}

var _ Source[int] = (*Datagen[int])(nil)

// NewDatagen returns a Datagen source that emits gen(index) for each index.
// gen is called from every subtask's goroutine, so it must be safe for
// concurrent use (a pure function of the index is). Invalid arguments are
// reported by NewReader, wrapping ErrInvalidConfig.
func NewDatagen[T any](gen func(index int64) T, opts ...DatagenOption) *Datagen[T] {
	d := &Datagen[T]{gen: gen, cfg: datagenConfig{count: -1}}
	for _, o := range opts {
		o(&d.cfg)
	}
	return d
}

// Bounded reports whether a count was set.
func (d *Datagen[T]) Bounded() bool { return d.cfg.count >= 0 }

// NewReader makes the reader of subtask ctx.Subtask.
func (d *Datagen[T]) NewReader(ctx ReaderContext) (Reader[T], error) {
	if err := checkReaderContext(ctx); err != nil {
		return nil, fmt.Errorf("datagen: %w", err)
	}
	if d.gen == nil {
		return nil, fmt.Errorf("datagen: generator function is nil: %w", ErrInvalidConfig)
	}
	if r := d.cfg.rate; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return nil, fmt.Errorf("datagen: rate %v records/s is not a finite number >= 0: %w", r, ErrInvalidConfig)
	}
	r := &datagenReader[T]{
		gen:     d.gen,
		ts:      d.cfg.timestamps,
		next:    int64(ctx.Subtask),
		step:    int64(ctx.Parallelism),
		count:   d.cfg.count,
		subtask: int64(ctx.Subtask),
	}
	if ctx.Restored {
		if err := r.restore(ctx); err != nil {
			return nil, err
		}
	}
	if d.cfg.rate > 0 {
		// This subtask's share of the rate is rate/p records per second.
		r.interval = float64(time.Second) * float64(ctx.Parallelism) / d.cfg.rate
		r.avail = make(chan struct{}, 1)
	}
	return r, nil
}

func checkReaderContext(ctx ReaderContext) error {
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return fmt.Errorf("subtask %d of parallelism %d: %w", ctx.Subtask, ctx.Parallelism, ErrInvalidReaderContext)
	}
	return nil
}

// datagenReader emits the indexes next, next+step, ... of one subtask.
type datagenReader[T any] struct {
	gen       func(index int64) T
	ts        func(index int64) int64
	next      int64 // next index to emit
	step      int64 // parallelism
	subtask   int64
	count     int64 // < 0: unbounded
	done      bool  // no index left; MaxWatermark emitted
	exhausted bool  // index space used up (only reachable near MaxInt64)

	// Rate limiting; interval == 0 means unlimited. Record k after start is
	// due at start + k*interval.
	interval float64 // nanoseconds between two records of this subtask
	start    time.Time
	emitted  int64 // records emitted since start
	timer    *time.Timer
	avail    chan struct{} // buffered(1), signalled by timer
	waiting  bool          // the last PollNext returned NothingAvailable
}

func (r *datagenReader[T]) PollNext(out Output[T]) (Status, error) {
	if r.exhausted || (r.count >= 0 && r.next >= r.count) {
		return r.finish(out)
	}
	if r.interval > 0 {
		if wait := r.untilDue(); wait > 0 {
			r.arm(wait)
			return NothingAvailable, nil
		}
		r.waiting = false
	}
	i := r.next
	ts := NoTimestamp
	if r.ts != nil {
		ts = r.ts(i)
	}
	if err := out.Collect(r.gen(i), ts); err != nil {
		return MoreAvailable, fmt.Errorf("datagen: emit record %d: %w", i, err)
	}
	r.emitted++
	if i > math.MaxInt64-r.step {
		r.exhausted = true
	} else {
		r.next = i + r.step
	}
	return MoreAvailable, nil
}

// untilDue returns how long until the next record is due (<= 0: now).
func (r *datagenReader[T]) untilDue() time.Duration {
	now := time.Now()
	if r.start.IsZero() {
		r.start, r.emitted = now, 0
		return 0
	}
	due := r.start.Add(time.Duration(float64(r.emitted) * r.interval))
	wait := due.Sub(now)
	if wait < -maxCatchUp {
		// Far behind schedule: restart it rather than burst.
		r.start, r.emitted = now, 0
		return 0
	}
	return wait
}

// arm makes Available fire after d.
func (r *datagenReader[T]) arm(d time.Duration) {
	r.waiting = true
	// Drop a signal left from an earlier wait that was not consumed.
	select {
	case <-r.avail:
	default:
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(d, r.signal)
		return
	}
	r.timer.Reset(d)
}

func (r *datagenReader[T]) signal() {
	select {
	case r.avail <- struct{}{}:
	default:
	}
}

func (r *datagenReader[T]) finish(out Output[T]) (Status, error) {
	if !r.done {
		if err := out.EmitWatermark(MaxWatermark); err != nil {
			return EndOfInput, fmt.Errorf("datagen: emit final watermark: %w", err)
		}
		r.done = true
	}
	return EndOfInput, nil
}

// Available returns a channel that fires when the next record is due after
// PollNext returned NothingAvailable, and a closed channel otherwise.
func (r *datagenReader[T]) Available() <-chan struct{} {
	if r.waiting {
		return r.avail
	}
	return closedChan
}

func (r *datagenReader[T]) Close() error {
	if r.timer != nil {
		r.timer.Stop()
	}
	return nil
}

// closedChan is what Available returns when a reader does not wait.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
