package e2e

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// A full restart's delay and the job's outage start at the first task's
// failure, as Flink's scheduler starts them, not when the failed attempt's
// last task has stopped: while a healthy task's close lingers past the
// whole delay, the delay runs out, and the next attempt starts as soon as
// the close returns.
func TestRestartDelayStartsAtTheFailure(t *testing.T) {
	const records = 4000
	// The delay is long next to a restart in process (milliseconds), so
	// that a restart that waited it again after the close stands out
	// however loaded the machine is.
	const delay = 3 * time.Second
	fail := &failAt{at: records / 4, fired: &atomic.Int64{}}
	linger := &lingeringClose{failure: fail, delay: delay, mu: &sync.Mutex{}, released: &time.Time{}}
	j := &job[int64]{
		opts: crashOptions(t.TempDir(), 20*time.Millisecond,
			sluice.WithChaining(false), sluice.WithFailoverStrategy(sluice.FailoverFull),
			sluice.WithRestartStrategy(sluice.FixedDelayRestart(1, delay))),
		records: records, rate: 4000, outDir: t.TempDir(), timeout: time.Minute,
		build: func(j *job[int64], env *sluice.Environment) *sluice.Stream[int64] {
			s := datagen(j, env, "gen", index, nil, sluice.NoWatermarks[int64]())
			s = sluice.RichMap(s, fail, sluice.Name("fail"), sluice.UID("fail"))
			return sluice.RichMap(s, linger, sluice.Name("linger"), sluice.UID("linger"))
		},
	}
	job := j.run(t)
	failedAt, released := fail.when(), linger.releasedAt()
	if failedAt.IsZero() || released.IsZero() {
		t.Fatalf("the failure (at %v) or the lingering close (at %v) never happened", failedAt, released)
	}
	downs := job.Downtimes()
	if len(downs) != 1 || downs[0].Running == 0 {
		t.Fatalf("outages %+v, want one that ended with the tasks running", downs)
	}
	d := downs[0]
	// Deterministic: without the change the outage starts once the
	// attempt has stopped, which is after the close returned.
	if !d.Failed.Before(released) {
		t.Errorf("the outage starts at %v, after the lingering close returned (%v): want the failure (%v)", d.Failed, released, failedAt)
	}
	// The restart did not wait a whole delay after the close returned
	// (which had already lasted the delay since the failure).
	if again := d.Failed.Add(d.Running).Sub(released); again >= delay {
		t.Errorf("the tasks ran again %v after the lingering close returned; the %v delay had already passed since the failure", again, delay)
	}
	got := j.output(t)
	slices.Sort(got)
	want := make([]int64, records)
	for i := range want {
		want[i] = int64(i)
	}
	if diff := sameMultiset(got, want); diff != "" {
		t.Errorf("committed output is not every record once: %s", diff)
	}
}

// failAt fails its subtask 0 once, at record at, and remembers when (each
// subtask runs a copy; they share fired).
type failAt struct {
	at    int64
	fired *atomic.Int64 // unix nanoseconds of the failure; 0 before
}

func (f *failAt) Map(v int64) (int64, error) {
	// Datagen's subtask 0 reads the even indexes.
	if v%2 == 0 && v >= f.at && f.fired.CompareAndSwap(0, time.Now().UnixNano()) {
		return v, fmt.Errorf("map of %d: %w", v, errInjectedCrash)
	}
	return v, nil
}

func (f *failAt) when() time.Time {
	if n := f.fired.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// lingeringClose is a map whose close, in the attempt that failed, lasts
// until delay has passed since the failure (a task slow to cancel).
type lingeringClose struct {
	failure *failAt
	delay   time.Duration
	attempt int

	// Each subtask runs a copy; they share released.
	mu       *sync.Mutex
	released *time.Time
}

func (l *lingeringClose) Open(ctx *sluice.OperatorContext) error {
	l.attempt = ctx.Attempt
	return nil
}

func (l *lingeringClose) Map(v int64) (int64, error) { return v, nil }

func (l *lingeringClose) Close() error {
	at := l.failure.when()
	if l.attempt != 0 || at.IsZero() {
		return nil
	}
	time.Sleep(time.Until(at.Add(l.delay)))
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.After(*l.released) {
		*l.released = now
	}
	return nil
}

func (l *lingeringClose) releasedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *l.released
}
