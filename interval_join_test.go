package sluice_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/source"
)

// A lower bound above the upper bound is refused.
func TestIntervalJoinRefusesBadBounds(t *testing.T) {
	env := testjob.NewEnv()
	s := sluice.FromSource(env, source.FromSlice(tenNumbers), sluice.NoWatermarks[int64](), "s")
	ks := sluice.KeyBy(s, identity)
	sluice.ProcessIntervalJoin(sluice.IntervalJoin(ks, ks).Between(time.Second, 0),
		sluice.ProcessJoinFunc[int64, int64, int](func(*sluice.JoinContext, int64, int64, sluice.Collector[int]) error { return nil }))
	if err := testjob.Execute(t, env); err == nil {
		t.Fatal("a lower bound above the upper bound was accepted")
	}
}

// identity keys a record by itself.
func identity(v int64) int64 { return v }
