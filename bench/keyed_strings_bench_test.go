package bench

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkKeyedCountStrings is the throughput job, the one
// measured against Flink: datagen of 1 KiB strings -> keyBy(the 8-byte
// prefix) -> running count in keyed value state (heap backend) ->
// discard, parallelism 2, without and with 1 s checkpoints.
//
//	go test -run '^$' -bench KeyedCountStrings -benchtime 3000000x -count 5 ./bench
func BenchmarkKeyedCountStrings(b *testing.B) {
	b.Run("checkpoints=off", func(b *testing.B) { keyedCountStrings(b) })
	b.Run("checkpoints=1s", func(b *testing.B) {
		keyedCountStrings(b, sluice.WithCheckpointing(time.Second, b.TempDir()))
	})
}

func keyedCountStrings(b *testing.B, opts ...sluice.Option) {
	b.ReportAllocs()
	env := sluice.NewEnvironment(append([]sluice.Option{sluice.WithParallelism(2), quiet}, opts...)...)
	run(b, env, int64(b.N), KeyedCountStrings(env, int64(b.N)))
}
