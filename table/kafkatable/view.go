package kafkatable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/table"
)

// ErrViewClosed is returned by Run once the view was closed, and by
// WaitRecovered when the view stopped before it recovered.
var ErrViewClosed = errors.New("view closed")

// View is a read-only copy of a table, kept in memory by any Go service
// from the table's changelog topic (goka's View): Run reads the topic
// from its beginning, under read_committed (only what the job committed:
// never a change a failure undid), and keeps reading; Get answers from
// the copy. A view is recovered once it has read what the topic held when
// Run started: until then it answers with an older table. It is safe for
// concurrent use.
//
// A view answers as of the changes it has read: it lags the job by the
// job's checkpoint interval (an exactly-once sink commits at checkpoints)
// and the time to fetch. For the job's current value, query it
// (sluice.Job.QueryState).
type View[K comparable, V any] struct {
	topic  string
	key    codec.Codec[K]
	value  codec.Codec[V]
	opts   []kgo.Opt
	logger *slog.Logger

	mu        sync.RWMutex
	rows      map[K]V
	recovered chan struct{}
	stopped   chan struct{}
	err       error
}

// ViewOption configures a View.
type ViewOption func(*viewConfig)

type viewConfig struct {
	opts   []kgo.Opt
	logger *slog.Logger
}

// ViewClientOptions adds franz-go options to the view's client (TLS,
// SASL, ...).
func ViewClientOptions(opts ...kgo.Opt) ViewOption {
	return func(c *viewConfig) { c.opts = append(c.opts, opts...) }
}

// ViewLogger is where the view and its client log; default
// slog.Default().
func ViewLogger(l *slog.Logger) ViewOption { return func(c *viewConfig) { c.logger = l } }

func newViewConfig(seeds []string, opts []ViewOption) viewConfig {
	var c viewConfig
	for _, o := range opts {
		o(&c)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	c.opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, c.opts...)
	return c
}

// NewView returns a view of the table kept in topic, its keys and values
// decoded with key and value; Run fills it.
func NewView[K comparable, V any](seeds []string, topic string, key codec.Codec[K], value codec.Codec[V], opts ...ViewOption) *View[K, V] {
	c := newViewConfig(seeds, opts)
	return &View[K, V]{
		topic: topic, key: key, value: value, logger: c.logger.With("view", topic), opts: c.opts,
		rows:      map[K]V{},
		recovered: make(chan struct{}), stopped: make(chan struct{}),
	}
}

// Run reads the topic into the view until ctx is done (it then returns
// nil) or a record cannot be decoded (the error names its partition and
// offset: a table whose changes cannot be read is not a table to answer
// from). It is called once.
func (v *View[K, V]) Run(ctx context.Context) (err error) {
	defer func() {
		v.mu.Lock()
		v.err = err
		v.mu.Unlock()
		close(v.stopped)
	}()
	return readChangelog(ctx, v.topic, v.key, v.value, v.opts, v.logger,
		func(cs []table.Change[K, V]) {
			v.mu.Lock()
			defer v.mu.Unlock()
			for _, c := range cs {
				if c.Delete {
					delete(v.rows, c.Key)
				} else {
					v.rows[c.Key] = c.Value
				}
			}
		},
		func() { close(v.recovered) })
}

// ReadChangelog reads a changelog topic under read_committed from its
// beginning up to where it stood when called, and calls fn with each
// change, in the order of its partition (so each key's changes in their
// order).
func ReadChangelog[K comparable, V any](ctx context.Context, seeds []string, topic string, key codec.Codec[K], value codec.Codec[V], fn func(table.Change[K, V]), opts ...ViewOption) error {
	c := newViewConfig(seeds, opts)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	caughtUp := false
	err := readChangelog(ctx, topic, key, value, c.opts, c.logger,
		func(cs []table.Change[K, V]) {
			for _, c := range cs {
				fn(c)
			}
		},
		func() { caughtUp = true; cancel() })
	if err == nil && !caughtUp {
		err = ctx.Err()
	}
	return err
}

// readChangelog reads topic under read_committed from its beginning until
// ctx is done, handing each poll's changes to apply, and calls caughtUp
// once it has read what the topic held at the start (its last stable
// offsets).
func readChangelog[K comparable, V any](ctx context.Context, topic string, key codec.Codec[K], value codec.Codec[V], opts []kgo.Opt, logger *slog.Logger,
	apply func([]table.Change[K, V]), caughtUp func()) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Commit and abort markers come through too: they say how far a
		// partition has been read when its last records are markers.
		kgo.KeepControlRecords(),
		kgo.WithLogger(kgoLogger{logger}),
	}, opts...)...)
	if err != nil {
		return fmt.Errorf("changelog %s: %w", topic, err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("changelog %s: list the end offsets: %w", topic, err)
	}
	pending := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			pending[o.Partition] = o.Offset
		}
	})
	done := false
	var batch []table.Change[K, V]
	for {
		if !done && len(pending) == 0 {
			done = true
			caughtUp()
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("changelog %s: fetch partition %d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		batch = batch[:0]
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			if end, ok := pending[r.Partition]; ok && r.Offset+1 >= end {
				delete(pending, r.Partition)
			}
			if r.Attrs.IsControl() {
				continue
			}
			c, err := decode(r, key, value)
			if err != nil {
				return err
			}
			batch = append(batch, c)
		}
		apply(batch)
	}
}

// Get returns the value of k and whether the view has one.
func (v *View[K, V]) Get(k K) (V, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	val, ok := v.rows[k]
	return val, ok
}

// Len returns the number of keys with a value.
func (v *View[K, V]) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.rows)
}

// Snapshot returns a copy of the view's table.
func (v *View[K, V]) Snapshot() map[K]V {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return maps.Clone(v.rows)
}

// Recovered reports whether the view has read what the topic held when
// Run started.
func (v *View[K, V]) Recovered() bool {
	select {
	case <-v.recovered:
		return true
	default:
		return false
	}
}

// WaitRecovered waits until the view has recovered, ctx is done, or Run
// returned (then with Run's error, or ErrViewClosed).
func (v *View[K, V]) WaitRecovered(ctx context.Context) error {
	select {
	case <-v.recovered:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-v.stopped:
		select {
		case <-v.recovered:
			return nil
		default:
		}
		v.mu.RLock()
		defer v.mu.RUnlock()
		if v.err != nil {
			return v.err
		}
		return ErrViewClosed
	}
}

// ReadTable reads a table's changelog topic up to where it stood when
// called (read_committed) and returns the table.
func ReadTable[K comparable, V any](ctx context.Context, seeds []string, topic string, key codec.Codec[K], value codec.Codec[V], opts ...ViewOption) (map[K]V, error) {
	rows := map[K]V{}
	err := ReadChangelog(ctx, seeds, topic, key, value, func(c table.Change[K, V]) {
		if c.Delete {
			delete(rows, c.Key)
		} else {
			rows[c.Key] = c.Value
		}
	}, opts...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// kgoLogger logs franz-go through slog, its routine at DEBUG.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, kv...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, kv...)
	default:
		k.l.Debug(msg, kv...)
	}
}
