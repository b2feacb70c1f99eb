package bench

import (
	"math/rand/v2"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// StringCount counts records per key in keyed value state, as Flink's
// keyBy(...).process(count in ValueState) does, and emits the count.
type StringCount struct{ count state.ValueState[int64] }

func (c *StringCount) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *StringCount) ProcessElement(_ *sluice.KeyedContext[string], _ string, out sluice.Collector[int64]) error {
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.count.Update(n); err != nil {
		return err
	}
	out.Collect(n)
	return nil
}

const (
	stringRecordSize = 1024
	stringKeyPrefix  = 8
	stringKeys       = 10_000
)

// StringRecords makes 1 KiB strings whose first 8 bytes are one of
// stringKeys keys (decimal digits) followed by random letters.
func StringRecords() func(int64) string {
	r := rand.New(rand.NewPCG(1, 2))
	body := make([]byte, 1<<16+stringRecordSize)
	for i := range body {
		body[i] = 'a' + byte(r.IntN(26))
	}
	return func(i int64) string {
		b := make([]byte, stringRecordSize)
		k := (i * 7919) % stringKeys
		for j := stringKeyPrefix - 1; j >= 0; j-- {
			b[j] = '0' + byte(k%10)
			k /= 10
		}
		off := int(i*61) & (1<<16 - 1)
		copy(b[stringKeyPrefix:], body[off:off+stringRecordSize-stringKeyPrefix])
		// b is never written again: the string is its bytes, without the
		// copy string(b) makes, so the generator costs one allocation and
		// one copy of a record, as Flink's datagen.
		return unsafe.String(&b[0], len(b))
	}
}

// KeyedCountStrings adds the throughput job measured against Flink to env: datagen of
// records 1 KiB strings (StringRecords) -> keyBy(the 8-byte prefix) ->
// StringCount -> discard. It returns the discard sink, whose Count is the
// number of counts emitted (one per record). bench/flinkref is the same
// job on Flink.
func KeyedCountStrings(env *sluice.Environment, records int64) *sink.Discard[int64] {
	gen := source.NewDatagen(StringRecords(), source.DatagenCount(records))
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[string](), "datagen")
	counts := sluice.Process[string, string, int64](
		sluice.KeyBy(recs, func(s string) string { return s[:stringKeyPrefix] }), &StringCount{}, sluice.Name("count"))
	d := sink.NewDiscard[int64]()
	sluice.SinkTo(counts, d)
	return d
}
