package checkpoint

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestRestartDefaults(t *testing.T) {
	if got := DefaultRestartConfig(false); got.Kind != NoRestart {
		t.Fatalf("checkpointing off: %v", got.Kind)
	}
	got := DefaultRestartConfig(true)
	want := RestartConfig{Kind: ExponentialDelay, InitialBackoff: time.Second, MaxBackoff: time.Minute, BackoffMultiplier: 1.5,
		JitterFactor: 0.1, ResetBackoffThreshold: time.Hour, AttemptsBeforeResetBackoff: 1<<31 - 1}
	if got != want {
		t.Fatalf("checkpointing on: %+v, want %+v", got, want)
	}
	if f := FixedDelayRestart(DefaultFixedDelayAttempts, DefaultFixedDelay); f.Attempts != 1 || f.Delay != time.Second {
		t.Fatalf("fixed-delay defaults %+v", f)
	}
}

func TestNoRestart(t *testing.T) {
	s, err := NewRestartStrategy(RestartConfig{Kind: NoRestart}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.NextDelay(at(0)); ok {
		t.Fatal("none restarted")
	}
}

func TestFixedDelayRestart(t *testing.T) {
	s, err := NewRestartStrategy(FixedDelayRestart(2, 3*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at    time.Duration
		delay time.Duration
		ok    bool
	}{
		{0, 3 * time.Second, true},
		{time.Second, 2 * time.Second, true}, // merged into the pending restart
		{10 * time.Second, 3 * time.Second, true},
		{20 * time.Second, 0, false},
		{20 * time.Second, 0, false}, // merged into the refusal
		{time.Hour, 0, false},
	}
	for i, st := range steps {
		d, ok := s.NextDelay(at(st.at))
		if d != st.delay || ok != st.ok {
			t.Fatalf("step %d at %s: %s %t, want %s %t", i, st.at, d, ok, st.delay, st.ok)
		}
	}
}

func TestExponentialDelayRestart(t *testing.T) {
	cfg := ExponentialDelayRestart()
	cfg.JitterFactor = 0
	cfg.AttemptsBeforeResetBackoff = 12
	s, err := NewRestartStrategy(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Each failure comes right after the previous restart.
	now := at(0)
	var got []time.Duration
	for range 12 {
		d, ok := s.NextDelay(now)
		if !ok {
			t.Fatalf("refused after %v", got)
		}
		got = append(got, d)
		now = now.Add(d + time.Millisecond)
	}
	want := []float64{1000, 1500, 2250, 3375, 5062.5, 7593.75, 11390.625, 17085.9375, 25628.90625, 38443.359375, 57665.0390625, 60000}
	for i := range want {
		if w := time.Duration(want[i] * float64(time.Millisecond)); got[i] != w {
			t.Fatalf("delay %d: %s, want %s (all %v)", i, got[i], w, got)
		}
	}
	if _, ok := s.NextDelay(now); ok {
		t.Fatal("13th attempt allowed with attempts-before-reset-backoff=12")
	}
	// After running an hour without failure, the backoff and the attempts
	// start over.
	d, ok := s.NextDelay(now.Add(2 * time.Hour))
	if !ok || d != time.Second || s.Attempts() != 1 {
		t.Fatalf("after reset: %s %t attempts %d", d, ok, s.Attempts())
	}
}

func TestExponentialDelayJitter(t *testing.T) {
	for _, tc := range []struct {
		r    float64
		want time.Duration
	}{{0, 900 * time.Millisecond}, {0.5, time.Second}, {0.999999, 1100 * time.Millisecond}} {
		s, err := NewRestartStrategy(ExponentialDelayRestart(), func() float64 { return tc.r })
		if err != nil {
			t.Fatal(err)
		}
		d, _ := s.NextDelay(at(0))
		if diff := d - tc.want; diff < -time.Millisecond || diff > time.Millisecond {
			t.Errorf("jitter source %v: delay %s, want %s", tc.r, d, tc.want)
		}
	}
	// The default source stays within ±10%.
	s, _ := NewRestartStrategy(ExponentialDelayRestart(), nil)
	if d, _ := s.NextDelay(at(0)); d < 900*time.Millisecond || d > 1100*time.Millisecond {
		t.Fatalf("delay %s outside 1s ±10%%", d)
	}
}

func TestRestartConfigValidate(t *testing.T) {
	bad := []RestartConfig{
		{Kind: FixedDelay, Attempts: -1},
		{Kind: FixedDelay, Delay: -time.Second},
		func() RestartConfig { c := ExponentialDelayRestart(); c.InitialBackoff = 0; return c }(),
		func() RestartConfig { c := ExponentialDelayRestart(); c.MaxBackoff = time.Millisecond; return c }(),
		func() RestartConfig { c := ExponentialDelayRestart(); c.BackoffMultiplier = 0.5; return c }(),
		func() RestartConfig { c := ExponentialDelayRestart(); c.JitterFactor = 2; return c }(),
		func() RestartConfig { c := ExponentialDelayRestart(); c.ResetBackoffThreshold = 0; return c }(),
		func() RestartConfig { c := ExponentialDelayRestart(); c.AttemptsBeforeResetBackoff = 0; return c }(),
		{Kind: 9},
	}
	for _, c := range bad {
		if _, err := NewRestartStrategy(c, nil); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v accepted: %v", c, err)
		}
	}
}
