package sluice_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/source"
)

// joinPairs joins two records into one string.
var joinPairs = sluice.JoinFunc[int64, int64, string](func(l, r int64) (string, error) { return fmt.Sprint(l, "+", r), nil })

// A window join without an assigner is refused.
func TestWindowJoinRefusesBadOptions(t *testing.T) {
	env := testjob.NewEnv()
	s := sluice.FromSource(env, source.FromSlice(tenNumbers), sluice.NoWatermarks[int64](), "s")
	ks := sluice.KeyBy(s, identity)
	sluice.ApplyWindowJoin(sluice.WindowJoin(ks, ks).Window(nil), joinPairs)
	if err := testjob.Execute(t, env); err == nil {
		t.Fatal("a window join without an assigner was accepted")
	}
}

// Triggers and evictors that cannot work are refused on a window join as
// on a window.
func TestWindowJoinRefusesBadTriggerAndEvictor(t *testing.T) {
	type tu = sluice.TaggedUnion[int64, int64]
	for name, configure := range map[string]func(*sluice.TwoInputWindowed[int64, int64, int64]) *sluice.TwoInputWindowed[int64, int64, int64]{
		"count 0": func(w *sluice.TwoInputWindowed[int64, int64, int64]) *sluice.TwoInputWindowed[int64, int64, int64] {
			return w.Trigger(sluice.CountTrigger[tu](0))
		},
		"nil evictor": func(w *sluice.TwoInputWindowed[int64, int64, int64]) *sluice.TwoInputWindowed[int64, int64, int64] {
			return w.Evictor(nil)
		},
		"evictor 0": func(w *sluice.TwoInputWindowed[int64, int64, int64]) *sluice.TwoInputWindowed[int64, int64, int64] {
			return w.Evictor(sluice.CountEvictor[tu](0))
		},
	} {
		t.Run(name, func(t *testing.T) {
			env := testjob.NewEnv()
			s := sluice.FromSource(env, source.FromSlice(tenNumbers), sluice.NoWatermarks[int64](), "s")
			ks := sluice.KeyBy(s, identity)
			sluice.ApplyWindowJoin(configure(sluice.WindowJoin(ks, ks).Window(sluice.TumblingEventTimeWindows(time.Second))), joinPairs)
			if err := testjob.Execute(t, env); !errors.Is(err, sluice.ErrInvalidOption) {
				t.Fatalf("a window join with a bad %s ran: %v", name, err)
			}
		})
	}
}
