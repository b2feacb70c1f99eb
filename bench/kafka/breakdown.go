package main

import (
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
)

// sample is one output record of the latency run: when its input record
// was produced and when its output was read, Unix nanoseconds.
type sample struct{ sent, seen int64 }

// breakdown splits each measured record's latency at the checkpoint that
// made it visible (the last one whose notifications were sent before the
// record was read): from its produce to that checkpoint's trigger (the
// wait for the barrier, with the source's fetch), from the trigger to the
// notifications (the checkpoint), and from there to the read (the sink's
// commit and the consumer's fetch). It adds the distributions of the
// checkpoints' parts and of the time between triggers.
func breakdown(completed []checkpoint.Stats, samples []sample, warm time.Time) string {
	var cps []checkpoint.Stats
	for _, s := range completed {
		if !s.TriggerTime.Before(warm) {
			cps = append(cps, s)
		}
	}
	if len(cps) == 0 {
		return ""
	}
	done := func(s checkpoint.Stats) int64 { return s.TriggerTime.Add(s.Phases.Completion).UnixNano() }
	sort.Slice(cps, func(i, j int) bool { return done(cps[i]) < done(cps[j]) })
	var pre, cp, post []time.Duration
	for _, x := range samples {
		i := sort.Search(len(cps), func(i int) bool { return done(cps[i]) > x.seen }) - 1
		if i < 0 {
			continue
		}
		t := cps[i].TriggerTime.UnixNano()
		pre = append(pre, time.Duration(t-x.sent))
		cp = append(cp, time.Duration(done(cps[i])-t))
		post = append(post, time.Duration(x.seen-done(cps[i])))
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "part, ms\tp10\tp50\tp90\tp99\tmax\tn\t")
	row := func(name string, xs []time.Duration) {
		if len(xs) == 0 {
			return
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		q := func(p float64) string { return ms(s[min(len(s)-1, int(p*float64(len(s))))]) }
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", name, q(0.10), q(0.50), q(0.90), q(0.99), ms(s[len(s)-1]), len(s))
	}
	row("record: produce -> trigger", pre)
	row("record: trigger -> notified", cp)
	row("record: notified -> read", post)
	trig := make([]checkpoint.Stats, len(cps))
	copy(trig, cps)
	sort.Slice(trig, func(i, j int) bool { return trig[i].TriggerTime.Before(trig[j].TriggerTime) })
	var gaps []time.Duration
	for i := 1; i < len(trig); i++ {
		gaps = append(gaps, trig[i].TriggerTime.Sub(trig[i-1].TriggerTime))
	}
	row("checkpoint: trigger gap", gaps)
	parts := map[string][]time.Duration{}
	var names []string
	for _, s := range cps {
		for _, p := range s.Phases.Parts() {
			if _, ok := parts[p.Name]; !ok {
				names = append(names, p.Name)
			}
			parts[p.Name] = append(parts[p.Name], p.Duration)
		}
	}
	for _, n := range names {
		row("checkpoint: "+n, parts[n])
	}
	var whole []time.Duration
	for _, s := range cps {
		whole = append(whole, s.Phases.Completion)
	}
	row("checkpoint: completion", whole)
	_ = w.Flush()
	return b.String()
}

// gcSnapshot is the collector's count and total pause at one moment.
type gcSnapshot struct {
	at     time.Time
	num    int64
	pause  time.Duration
	pauses []time.Duration
}

func takeGC() gcSnapshot {
	var st debug.GCStats
	debug.ReadGCStats(&st)
	return gcSnapshot{time.Now(), st.NumGC, st.PauseTotal, st.Pause}
}

// since describes the collections between s0 and s: how many per second,
// and their pauses (the longest of the last 256 that fall in between).
func (s gcSnapshot) since(s0 gcSnapshot) string {
	if s0.at.IsZero() {
		return "gc: not measured"
	}
	n := s.num - s0.num
	var longest time.Duration
	for i := 0; i < int(min(n, int64(len(s.pauses)))); i++ {
		longest = max(longest, s.pauses[i])
	}
	return fmt.Sprintf("gc: %d collections in %.0f s (%.1f/s), pauses %s ms in all, longest %s ms",
		n, s.at.Sub(s0.at).Seconds(), float64(n)/s.at.Sub(s0.at).Seconds(), ms(s.pause-s0.pause), ms(longest))
}
