package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// event is the struct record of BenchmarkKeyedCountStruct: strings,
// integers, a float, a time and a short payload (about 150 bytes as JSON).
type event struct {
	ID      int64     `json:"id"`
	User    string    `json:"user"`
	Kind    string    `json:"kind"`
	Amount  float64   `json:"amount"`
	Count   int32     `json:"count"`
	At      time.Time `json:"at"`
	Payload string    `json:"payload"`
}

const structKeys = 10_000

var (
	structUsers = func() []string {
		u := make([]string, structKeys)
		for i := range u {
			u[i] = fmt.Sprintf("user-%05d", i)
		}
		return u
	}()
	structKinds = []string{"click", "view", "purchase", "scroll"}
	structBody  = strings.Repeat("p", 40)
	structEpoch = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
)

func structEvent(i int64) event {
	return event{ID: i, User: structUsers[i%structKeys], Kind: structKinds[i%4], Amount: float64(i%1000) / 8,
		Count: int32(i % 7), At: structEpoch.Add(time.Duration(i) * time.Millisecond), Payload: structBody}
}

// eventCounter counts events per user in a plain Go map.
type eventCounter struct{ counts map[string]int64 }

func (c *eventCounter) ProcessElement(_ *sluice.KeyedContext[string], e event, out sluice.Collector[int64]) error {
	if c.counts == nil {
		c.counts = make(map[string]int64, structKeys)
	}
	n := c.counts[e.User] + 1
	c.counts[e.User] = n
	out.Collect(n)
	return nil
}

// BenchmarkKeyedCountStruct is the keyed count with struct records on
// the network edge, encoded by the default codec of their type (no
// WithCodec): datagen of events over 10,000 users -> keyBy user ->
// count in a Go map -> discard, parallelism 2. Compare records/s across
// default codecs:
//
//	go test -run '^$' -bench KeyedCountStruct -benchmem -count 6 ./bench/
func BenchmarkKeyedCountStruct(b *testing.B) {
	b.ReportAllocs()
	env := sluice.NewEnvironment(sluice.WithParallelism(2), quiet)
	gen := source.NewDatagen(structEvent, source.DatagenCount(int64(b.N)))
	evs := sluice.FromSource(env, gen, sluice.NoWatermarks[event](), "datagen")
	counts := sluice.Process[string, event, int64](
		sluice.KeyBy(evs, func(e event) string { return e.User }), &eventCounter{}, sluice.Name("count"))
	d := sink.NewDiscard[int64]()
	sluice.SinkTo(counts, d)
	run(b, env, int64(b.N), d)
}
