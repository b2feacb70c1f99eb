package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// tenNumbers are the records of the jobs the validation tests build.
var tenNumbers = []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}

// TestInvalidOptions: options and operator settings that cannot work are
// refused by Execute with an error naming them, and nothing is started.
func TestInvalidOptions(t *testing.T) {
	defer goleak.VerifyNone(t)
	type build func(env *sluice.Environment)
	numbers := func(env *sluice.Environment, opts ...sluice.OpOption) *sluice.Stream[int64] {
		return sluice.FromSource(env, source.FromSlice(tenNumbers), sluice.NoWatermarks[int64](), "numbers", opts...)
	}
	plain := func(env *sluice.Environment) { sluice.SinkTo(numbers(env), sink.NewDiscard[int64]()) }
	cases := []struct {
		name  string
		opts  []sluice.Option
		build build
		is    error
		want  string
	}{
		{"parallelism 0", []sluice.Option{sluice.WithParallelism(0)}, plain, sluice.ErrInvalidOption, "parallelism"},
		{"max parallelism too large", []sluice.Option{sluice.WithMaxParallelism(1 << 16)}, plain, sluice.ErrInvalidOption, "max parallelism"},
		{"buffer too small", []sluice.Option{sluice.WithBufferSize(10)}, plain, sluice.ErrInvalidOption, "buffer size"},
		{"negative buffer timeout", []sluice.Option{sluice.WithBufferTimeout(-1)}, plain, sluice.ErrInvalidOption, "buffer timeout"},
		{"no exclusive buffers", []sluice.Option{sluice.WithExclusiveBuffers(0)}, plain, sluice.ErrInvalidOption, "exclusive buffers"},
		{"negative floating buffers", []sluice.Option{sluice.WithFloatingBuffers(-1)}, plain, sluice.ErrInvalidOption, "floating buffers"},
		{"watermark interval 0", []sluice.Option{sluice.WithAutoWatermarkInterval(0)}, plain, sluice.ErrInvalidOption, "watermark interval"},
		{"negative operator parallelism", nil, func(env *sluice.Environment) {
			sluice.SinkTo(numbers(env), sink.NewDiscard[int64](), sluice.Name("neg"), sluice.Parallelism(-2))
		}, sluice.ErrInvalidOption, `"neg"`},
		{"duplicate uid", nil, func(env *sluice.Environment) {
			s := sluice.Map(numbers(env), func(v int64) (int64, error) { return v, nil }, sluice.Name("first"), sluice.UID("same"))
			s = sluice.Map(s, func(v int64) (int64, error) { return v, nil }, sluice.Name("second"), sluice.UID("same"))
			sluice.SinkTo(s, sink.NewDiscard[int64]())
		}, sluice.ErrInvalidOption, `uid "same"`},
		{"codec of another type", nil, func(env *sluice.Environment) {
			sluice.SinkTo(numbers(env, sluice.WithCodec[string](codec.String{})), sink.NewDiscard[int64]())
		}, sluice.ErrInvalidOption, "codec"},
		{"parallelism above max parallelism", nil, func(env *sluice.Environment) {
			sluice.SinkTo(numbers(env), sink.NewDiscard[int64](), sluice.Name("wide"), sluice.Parallelism(4), sluice.MaxParallelism(2))
		}, runtime.ErrInvalidPlan, `"wide"`},
		{"forward with a change of parallelism", nil, func(env *sluice.Environment) {
			sluice.SinkTo(numbers(env).Forward(), sink.NewDiscard[int64](), sluice.Name("wider"), sluice.Parallelism(3))
		}, runtime.ErrInvalidPlan, "forward"},
		{"no sink", nil, func(env *sluice.Environment) {
			sluice.Map(numbers(env), func(v int64) (int64, error) { return v, nil })
		}, runtime.ErrInvalidPlan, "no sink"},
		{"union of a partitioned stream", nil, func(env *sluice.Environment) {
			a := numbers(env)
			b := sluice.FromSource(env, source.FromSlice(tenNumbers), sluice.NoWatermarks[int64](), "more")
			sluice.SinkTo(sluice.Union(a.Rebalance(), b), sink.NewDiscard[int64]())
		}, sluice.ErrInvalidOption, "Union"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := testjob.NewEnv(tc.opts...)
			tc.build(env)
			job, err := env.ExecuteAsync(context.Background())
			if err == nil {
				job.Cancel()
				_ = job.Wait()
				t.Fatal("ExecuteAsync accepted an invalid job")
			}
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want %v naming %q", err, tc.is, tc.want)
			}
		})
	}
}
