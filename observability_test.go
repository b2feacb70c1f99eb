package sluice_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// WithObservers refuses what observes nothing.
func TestWithObserversRefusesNonObservers(t *testing.T) {
	env := testjob.NewEnv(sluice.WithObservers(42))
	sluice.SinkTo(sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(1)),
		sluice.NoWatermarks[int64](), "gen"), sink.NewDiscard[int64]())
	if _, err := env.ExecuteAsync(context.Background()); !errors.Is(err, sluice.ErrInvalidOption) {
		t.Fatalf("ExecuteAsync with a non-observer: %v", err)
	}
}
