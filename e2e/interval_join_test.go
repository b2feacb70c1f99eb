package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

const ijLower, ijUpper = -20, 30 // ms

func buildIntervalJoin(r *job[string], left, right *sluice.Stream[twoEv]) *sluice.Stream[string] {
	crash := r.opCrash
	fn := sluice.ProcessJoinFunc[twoEv, twoEv, string](func(ctx *sluice.JoinContext, l, rr twoEv, out sluice.Collector[string]) error {
		if crash.hit() {
			return fmt.Errorf("join of %d and %d: %w", l.I, rr.I, errInjectedCrash)
		}
		out.Collect(fmt.Sprintf("%d+%d@%d", l.I, rr.I, ctx.Timestamp()))
		return nil
	})
	return sluice.ProcessIntervalJoin(
		sluice.IntervalJoin(sluice.KeyBy(left, twoKey), sluice.KeyBy(right, twoKey)).
			Between(ijLower*time.Millisecond, ijUpper*time.Millisecond).UpperBoundExclusive(),
		fn, sluice.UID("interval-join"), sluice.Parallelism(r.opPar))
}

// wantIntervalJoin is the plain evaluation: every pair of one key with
// the right timestamp in [left+lower, left+upper).
func wantIntervalJoin(n int64) []string {
	left, right := twoInputs(n)
	var out []string
	for _, l := range left {
		for _, r := range right {
			if d := r.Ts - l.Ts; l.Key == r.Key && d >= ijLower && d < ijUpper {
				out = append(out, fmt.Sprintf("%d+%d@%d", l.I, r.I, max(l.Ts, r.Ts)))
			}
		}
	}
	return out
}

func TestIntervalJoinExactlyOnceUnderFailures(t *testing.T) {
	runTwoUnderFailures(t, buildIntervalJoin, wantIntervalJoin(2000))
}

func TestIntervalJoinRescale(t *testing.T) {
	runTwoRescale(t, buildIntervalJoin, wantIntervalJoin(2000))
}
