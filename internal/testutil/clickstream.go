package testutil

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Click is a click of the clickstream fixture of the "Flink habits"
// tests: its event time is in the payload.
type Click struct {
	ID   int    `json:"id"`
	User string `json:"user"`
	TS   int64  `json:"ts"`
}

// ClickDisorder is the largest disorder of the clicks of one partition of
// Clickstream: a strategy bounded by it calls none of them late but the
// stragglers.
const ClickDisorder = 500 * time.Millisecond

// Clickstream makes the clicks of parts partitions of users users: each
// partition's event times advance 20 ms a click with up to 400 ms of
// disorder, and the partitions are a minute apart in event time, so a
// reader that hands out its partitions in turn mixes timestamps a minute
// apart. Every straggler-th click of a partition (none when 0) is 10 s
// behind its partition: Flink may call it late.
func Clickstream(parts, perPart, straggler, users int) [][]Click {
	rng := rand.New(rand.NewSource(24))
	const base = int64(1_700_000_000_000)
	out := make([][]Click, parts)
	id := 0
	for p := range parts {
		for i := range perPart {
			ts := base + int64(p)*60_000 + int64(i)*20 - rng.Int63n(400)
			if straggler > 0 && i > 0 && i%straggler == 0 {
				ts -= 10_000
			}
			out[p] = append(out[p], Click{ID: id, User: fmt.Sprint("u", rng.Intn(users)), TS: ts})
			id++
		}
	}
	return out
}

// ProduceClicks writes each partition's clicks to it as JSON, in order,
// with the producer's default record timestamps (the time of writing,
// nothing like the clicks' event times).
func ProduceClicks(t testing.TB, seeds []string, topic string, clicks [][]Click) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for p, cs := range clicks {
		for _, c := range cs {
			b, _ := json.Marshal(c)
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(p), Value: b})
		}
	}
	if err := cl.ProduceSync(Context(t, 0), rs...).FirstErr(); err != nil {
		t.Fatalf("produce clicks to %s: %v", topic, err)
	}
}

// MayCallLate is the plain per-partition evaluation of Flink's lateness
// for a window job whose source applies a bounded out-of-orderness
// strategy per partition: the watermark when a click is read is at most
// its partition's largest earlier timestamp - bound - 1 ms, so a click is
// never late unless windowMax(ts), the largest timestamp of the smallest
// window it can be in, is at or below that. It returns the ids of the
// clicks that may be late.
func MayCallLate(clicks [][]Click, bound time.Duration, windowMax func(ts int64) int64) map[int]bool {
	may := map[int]bool{}
	for _, cs := range clicks {
		maxBefore, seen := int64(0), false
		for _, c := range cs {
			if seen && windowMax(c.TS) <= maxBefore-bound.Milliseconds()-1 {
				may[c.ID] = true
			}
			maxBefore, seen = max(maxBefore, c.TS), true
		}
	}
	return may
}

// Window is one window's count of a user's clicks.
type Window struct {
	User       string
	Start, End int64
	N          int
}

// TumblingCounts is the plain evaluation of a job counting each user's
// clicks per tumbling event-time window of size, without those in skip.
func TumblingCounts(clicks [][]Click, size time.Duration, skip map[int]bool) map[Window]bool {
	n := map[Window]int{}
	ms := size.Milliseconds()
	for _, cs := range clicks {
		for _, c := range cs {
			if !skip[c.ID] {
				start := c.TS - c.TS%ms
				n[Window{User: c.User, Start: start, End: start + ms}]++
			}
		}
	}
	return counted(n)
}

// SessionCounts is the plain evaluation of a job counting each user's
// clicks per event-time session of gap, without those in skip: a click's
// window [ts, ts+gap) merges with every window it intersects, bounds
// included, as Flink's TimeWindow.intersects.
func SessionCounts(clicks [][]Click, gap time.Duration, skip map[int]bool) map[Window]bool {
	byUser := map[string][]int64{}
	for _, cs := range clicks {
		for _, c := range cs {
			if !skip[c.ID] {
				byUser[c.User] = append(byUser[c.User], c.TS)
			}
		}
	}
	out := map[Window]bool{}
	g := gap.Milliseconds()
	for u, ts := range byUser {
		slices.Sort(ts)
		var w Window
		for i, t := range ts {
			if i == 0 || t > w.End {
				if i > 0 {
					out[w] = true
				}
				w = Window{User: u, Start: t, End: t + g}
			}
			w.End = max(w.End, t+g)
			w.N++
		}
		out[w] = true
	}
	return out
}

// MergeSessions merges the sessions of each user that intersect, bounds
// included, transitively, summing their counts. A session window fires
// for good when the watermark passes its end, so a click that arrives
// behind the watermark but is not late (its own window still ends after
// it) starts a session of its own where a plain evaluation merges it
// with the session that fired: such pieces of one plain session
// intersect, and merged they are that session.
func MergeSessions(ws []Window) []Window {
	byUser := map[string][]Window{}
	for _, w := range ws {
		byUser[w.User] = append(byUser[w.User], w)
	}
	var out []Window
	for _, us := range byUser {
		slices.SortFunc(us, func(a, b Window) int { return cmp.Compare(a.Start, b.Start) })
		cur := us[0]
		for _, w := range us[1:] {
			if w.Start > cur.End {
				out = append(out, cur)
				cur = w
				continue
			}
			cur.End = max(cur.End, w.End)
			cur.N += w.N
		}
		out = append(out, cur)
	}
	return out
}

func counted(n map[Window]int) map[Window]bool {
	out := map[Window]bool{}
	for w, c := range n {
		w.N = c
		out[w] = true
	}
	return out
}

// DiffWindows describes how got differs from want ("" when it does not):
// how many windows are missing or unexpected, with an example of each.
func DiffWindows(got []Window, want map[Window]bool) string {
	have := map[Window]bool{}
	var twice []Window
	for _, w := range got {
		if have[w] {
			twice = append(twice, w)
		}
		have[w] = true
	}
	var missing, unexpected []Window
	for w := range want {
		if !have[w] {
			missing = append(missing, w)
		}
	}
	for w := range have {
		if !want[w] {
			unexpected = append(unexpected, w)
		}
	}
	if len(missing)+len(unexpected)+len(twice) == 0 {
		return ""
	}
	ex := func(ws []Window) any {
		if len(ws) == 0 {
			return "-"
		}
		return ws[0]
	}
	return fmt.Sprintf("%d of %d windows missing (e.g. %+v), %d unexpected (e.g. %+v), %d twice (e.g. %+v)",
		len(missing), len(want), ex(missing), len(unexpected), ex(unexpected), len(twice), ex(twice))
}

// ReadCommitted returns the values committed to topic, as read_committed
// consumers see them, with how often each was. No transaction may be
// open (the job has ended): an end marker written to every partition
// bounds what there is to read.
func ReadCommitted(t testing.TB, seeds []string, topic string) map[string]int {
	t.Helper()
	ctx := Context(t, 0)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	const marker = "\x00end"
	open := map[int32]bool{}
	ends.Each(func(o kadm.ListedOffset) {
		open[o.Partition] = true
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: o.Partition, Value: []byte(marker)}).FirstErr(); err != nil {
			t.Fatalf("end marker to %s/%d: %v", topic, o.Partition, err)
		}
	})
	seen := map[string]int{}
	for len(open) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (the end marker of partitions %v not seen)", topic, ctx.Err(), open)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == marker {
				delete(open, r.Partition)
			} else {
				seen[string(r.Value)]++
			}
		})
	}
	return seen
}
