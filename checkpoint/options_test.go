package checkpoint

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsFlinks(t *testing.T) {
	c := DefaultConfig()
	want := Config{Timeout: 10 * time.Minute, MaxConcurrent: 1, RetainedCheckpoints: 1}
	if c != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", c, want)
	}
	if c.Enabled() || c.Mode != ExactlyOnce || c.Unaligned || c.MinPause != 0 || c.TolerableFailed != 0 ||
		c.AlignedCheckpointTimeout != 0 {
		t.Fatalf("defaults differ from Flink's: %+v", c)
	}
	// Not Flink's NO_EXTERNALIZED_CHECKPOINTS: a job that fails for good
	// keeps its latest checkpoint unless told otherwise.
	if c.Retention != DeleteOnCancellation || c.Retention.Discards(JobFailed) {
		t.Fatalf("default retention %s discards a failed job's checkpoints", c.Retention)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config invalid: %v", err)
	}
}

func TestValidate(t *testing.T) {
	ok := Config{Interval: time.Second, Directory: "/ck"}
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   error
		says   string
	}{
		"unaligned at-least-once": {func(c *Config) { c.Unaligned, c.Mode = true, AtLeastOnce }, ErrUnalignedAtLeastOnce, "AT_LEAST_ONCE"},
		"unaligned concurrent":    {func(c *Config) { c.Unaligned, c.MaxConcurrent = true, 2 }, ErrUnalignedConcurrent, "max-concurrent-checkpoints=2"},
		"negative interval":       {func(c *Config) { c.Interval = -time.Second }, ErrInvalidConfig, "execution.checkpointing.interval"},
		"tiny interval":           {func(c *Config) { c.Interval = time.Millisecond }, ErrInvalidConfig, "at least 10ms"},
		"tiny timeout":            {func(c *Config) { c.Timeout = time.Millisecond }, ErrInvalidConfig, "execution.checkpointing.timeout"},
		"negative min pause":      {func(c *Config) { c.MinPause = -1 }, ErrInvalidConfig, "min-pause"},
		"negative concurrent":     {func(c *Config) { c.MaxConcurrent = -1 }, ErrInvalidConfig, "max-concurrent-checkpoints"},
		"negative tolerable":      {func(c *Config) { c.TolerableFailed = -1 }, ErrInvalidConfig, "tolerable-failed-checkpoints"},
		"negative aligned timeout": {func(c *Config) { c.Unaligned, c.AlignedCheckpointTimeout = true, -time.Second },
			ErrInvalidConfig, "aligned-checkpoint-timeout"},
		"negative retained": {func(c *Config) { c.RetainedCheckpoints = -1 }, ErrInvalidConfig, "num-retained"},
		"no directory":      {func(c *Config) { c.Directory = "" }, ErrInvalidConfig, "execution.checkpointing.dir"},
		"bad mode":          {func(c *Config) { c.Mode = 7 }, ErrInvalidConfig, "mode"},
		"bad retention":     {func(c *Config) { c.Retention = 9 }, ErrInvalidConfig, "retention"},
	} {
		t.Run(name, func(t *testing.T) {
			c := ok
			tc.mutate(&c)
			err := c.Validate()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Validate() = %v; want %v mentioning %q", err, tc.want, tc.says)
			}
		})
	}
	both := ok
	both.Unaligned, both.Mode, both.MaxConcurrent = true, AtLeastOnce, 3
	if err := both.Validate(); !errors.Is(err, ErrUnalignedAtLeastOnce) || !errors.Is(err, ErrUnalignedConcurrent) {
		t.Fatalf("every problem should be reported: %v", err)
	}
	aligned := ok
	aligned.AlignedCheckpointTimeout = time.Second // ignored without unaligned, as in Flink
	aligned.MaxConcurrent = 4
	if err := aligned.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestBarrierOptions(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		kind Kind
		want Options
	}{
		{Config{}, KindCheckpoint, Options{Kind: KindCheckpoint, Alignment: Aligned}},
		{Config{Unaligned: true}, KindCheckpoint, Options{Kind: KindCheckpoint, Alignment: Unaligned}},
		{Config{Unaligned: true}, KindFullCheckpoint, Options{Kind: KindFullCheckpoint, Alignment: Unaligned}},
		{Config{Unaligned: true, AlignedCheckpointTimeout: time.Second}, KindCheckpoint, Options{Kind: KindCheckpoint, Alignment: AlignedWithTimeout, AlignedTimeout: time.Second}},
		{Config{Unaligned: true}, KindSavepoint, Options{Kind: KindSavepoint, Alignment: Aligned}},
		{Config{AlignedCheckpointTimeout: time.Second}, KindCheckpoint, Options{Kind: KindCheckpoint, Alignment: Aligned}},
		{Config{Mode: AtLeastOnce, Unaligned: true}, KindCheckpoint, Options{Kind: KindCheckpoint, Alignment: Aligned}},
	} {
		if got := tc.cfg.BarrierOptions(tc.kind); got != tc.want {
			t.Errorf("%+v.BarrierOptions(%s) = %s, want %s", tc.cfg, tc.kind, got, tc.want)
		}
	}
}

func TestRetentionDiscards(t *testing.T) {
	// Flink's CheckpointProperties per retention policy.
	want := map[Retention][3]bool{ // finished, canceled, failed
		NoExternalizedCheckpoints: {true, true, true},
		DeleteOnCancellation:      {true, true, false},
		RetainOnCancellation:      {true, false, false},
	}
	for r, w := range want {
		for i, term := range []Termination{JobFinished, JobCanceled, JobFailed} {
			if got := r.Discards(term); got != w[i] {
				t.Errorf("%s.Discards(%s) = %t, want %t", r, term, got, w[i])
			}
		}
	}
}

func TestParse(t *testing.T) {
	for s, want := range map[string]Mode{"EXACTLY_ONCE": ExactlyOnce, "at-least-once": AtLeastOnce, "At_Least_Once": AtLeastOnce} {
		if got, err := ParseMode(s); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseMode("twice"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("ParseMode(twice): %v", err)
	}
	for _, r := range []Retention{NoExternalizedCheckpoints, DeleteOnCancellation, RetainOnCancellation} {
		if got, err := ParseRetention(r.String()); err != nil || got != r {
			t.Errorf("ParseRetention(%s) = %v, %v", r, got, err)
		}
	}
	if _, err := ParseRetention("keep"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("ParseRetention(keep): %v", err)
	}
	for r := ReasonUnknown; r <= ReasonInvalidSnapshot; r++ {
		if got, err := ParseReason(r.String()); err != nil || got != r {
			t.Errorf("ParseReason(%s) = %v, %v", r, got, err)
		}
	}
}
