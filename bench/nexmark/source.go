package main

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/source"
)

// NewSource is the Nexmark source of a generator: a parallel Datagen
// whose subtask i of p emits the events i, i+p, i+2p, ... with their
// event times, so the events are the same whatever the parallelism and
// each subtask's are in time order (up to the out-of-order groups). Its
// checkpointed position is the next event number of each subtask.
func NewSource(g *Generator) *source.Datagen[Event] { return newSource(g, g.Event) }

// newSource is NewSource with gen making the events (the generator's, or
// one that also counts them).
func newSource(g *Generator, gen func(n int64) Event) *source.Datagen[Event] {
	opts := []source.DatagenOption{source.DatagenCount(g.cfg.Events), source.DatagenTimestamps(g.Timestamp)}
	if g.cfg.WallRate > 0 {
		opts = append(opts, source.DatagenRate(g.cfg.WallRate))
	}
	return source.NewDatagen(gen, opts...)
}

// Events adds the Nexmark source to the job with the watermark strategy
// of the Flink Nexmark DDL: bounded out-of-orderness (4 s there).
func Events(env *sluice.Environment, g *Generator, outOfOrderness time.Duration) *sluice.Stream[Event] {
	return eventsFrom(env, NewSource(g), outOfOrderness)
}

func eventsFrom(env *sluice.Environment, src *source.Datagen[Event], outOfOrderness time.Duration) *sluice.Stream[Event] {
	return sluice.FromSource(env, src, sluice.ForBoundedOutOfOrderness[Event](outOfOrderness), "nexmark",
		sluice.WithCodec(EventCodec), sluice.UID("nexmark-source"))
}
