package sluice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// Unaligned checkpoints with at-least-once, or with more than one
// concurrent checkpoint, are refused before the job starts.
func TestUnalignedConfigRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		opt  sluice.Option
		want error
	}{
		"at-least-once": {sluice.WithCheckpointingMode(sluice.AtLeastOnce), checkpoint.ErrUnalignedAtLeastOnce},
		"concurrent":    {sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.MaxConcurrent = 2 }), checkpoint.ErrUnalignedConcurrent},
	} {
		t.Run(name, func(t *testing.T) {
			env := testjob.NewEnv(sluice.WithCheckpointing(time.Second, t.TempDir()), sluice.WithUnalignedCheckpoints(0), tc.opt)
			s := sluice.FromSource(env, source.FromSlice([]int64{1}), sluice.NoWatermarks[int64](), "s")
			sluice.SinkTo(s, sink.NewDiscard[int64]())
			_, err := env.ExecuteAsync(context.Background())
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
