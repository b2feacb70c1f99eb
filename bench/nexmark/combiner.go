package main

import (
	"math"

	"github.com/sluicehq/sluice"
)

// flushAll is the upTo of a flush of everything: the MaxWatermark a
// checkpoint flushes with.
const flushAll = math.MaxInt64

// combiner is the in-memory side of the stages of q5 and q11 that combine
// records per key before they reach keyed state, as Flink's window
// aggregation does (a sluice.KeyedFlusher): per key a list of int64s not
// yet in state, how many entries (slices, sessions, windows) the lists
// hold, and the earliest event time at which one of them is due.
type combiner struct {
	buf   map[int64][]int64
	n     int
	due   int64
	limit int // entries at which the stage flushes from ProcessElement
}

func (c *combiner) open(limit int) {
	c.buf, c.n, c.due = map[int64][]int64{}, 0, math.MaxInt64
	if c.limit == 0 {
		c.limit = limit
	}
}

// put sets key's list, which holds added more entries, the earliest of
// them due at due.
func (c *combiner) put(key int64, list []int64, added int, due int64) {
	c.buf[key] = list
	c.n += added
	c.due = min(c.due, due)
}

// full reports whether the buffer holds its limit of entries.
func (c *combiner) full() bool { return c.n >= c.limit }

// take removes key's list, of entries width int64s each, and returns it.
func (c *combiner) take(key int64, width int) ([]int64, bool) {
	list, ok := c.buf[key]
	if ok {
		delete(c.buf, key)
		c.n -= len(list) / width
	}
	return list, ok
}

// flush calls merge for every key's list, the key current, once upTo
// reaches the earliest due entry (flushAll: at once), and empties the
// buffer. merge may take the key's list.
func (c *combiner) flush(ctx *sluice.KeyedContext[int64], upTo int64, merge func(key int64, list []int64) error) error {
	if len(c.buf) == 0 || upTo < c.due {
		return nil
	}
	for key, list := range c.buf {
		if err := ctx.SetCurrentKey(key); err != nil {
			return err
		}
		if err := merge(key, list); err != nil {
			return err
		}
	}
	clear(c.buf)
	c.n, c.due = 0, math.MaxInt64
	return nil
}
