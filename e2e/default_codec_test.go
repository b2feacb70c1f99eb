package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// The default-codec restore test: a job with struct records on its
// network edges, a struct in keyed value state and struct records in
// window contents is stopped with a savepoint while it runs under the
// JSON default of earlier versions (pipeline.default-codec: json and
// codec.JSON for the value state, which is what a descriptor without a
// codec got then), and resumed under the binary default. The two runs
// together must commit the plain evaluation of the input, exactly once:
// the keyed state and the window contents written as JSON are read back.

type codecRec struct {
	Seq  int64     `json:"seq"`
	User string    `json:"user"`
	At   time.Time `json:"at"`
	Tags []string  `json:"tags,omitempty"`
}

// codecUser is a composite key: its bytes (codec.DefaultKey, JSON) must
// be the same in both runs for its state to be found.
type codecUser struct {
	Name  string
	Shard int
}

type codecTally struct {
	N, Sum int64
	Last   time.Time
}

type codecOut struct {
	Kind   string `json:"kind"`
	User   string `json:"user"`
	Start  int64  `json:"start"`
	N, Sum int64
}

func (o codecOut) String() string {
	if o.Kind == "tally" {
		return fmt.Sprintf("tally %s n=%d", o.User, o.N) // the sum depends on the order of arrival
	}
	return fmt.Sprintf("window %s@%d n=%d sum=%d", o.User, o.Start, o.N, o.Sum)
}

const (
	codecKeys   = 7
	codecWindow = 40 // ms
)

var codecZone = time.FixedZone("X", 5400)

func codecRecord(i int64) codecRec {
	r := codecRec{Seq: i, User: fmt.Sprintf("u%d", i%codecKeys), At: time.UnixMilli(2 * i).Add(123 * time.Nanosecond).In(codecZone)}
	if i%3 == 0 {
		r.Tags = []string{"a", fmt.Sprint(i)}
	}
	return r
}

func codecKey(r codecRec) codecUser { return codecUser{Name: r.User, Shard: int(r.Seq%codecKeys) % 3} }

// codecWant is the plain evaluation: every tally count of every key once,
// every window's count and sum, and the final sum per key.
func codecWant(n int64) (want []string, sums map[string]int64) {
	count := map[string]int64{}
	sums = map[string]int64{}
	type win struct {
		user  string
		start int64
	}
	wins := map[win]*codecOut{}
	for i := range n {
		r := codecRecord(i)
		count[r.User]++
		sums[r.User] += i
		want = append(want, codecOut{Kind: "tally", User: r.User, N: count[r.User]}.String())
		w := win{r.User, 2 * i / codecWindow * codecWindow}
		if wins[w] == nil {
			wins[w] = &codecOut{Kind: "window", User: r.User, Start: w.start}
		}
		wins[w].N++
		wins[w].Sum += i
	}
	for _, o := range wins {
		want = append(want, o.String())
	}
	return want, sums
}

// codecTallyFn keeps a codecTally per key in value state with codec c.
type codecTallyFn struct {
	c     codec.Codec[codecTally]
	tally state.ValueState[codecTally]
}

func (f *codecTallyFn) Open(ctx *sluice.OperatorContext) (err error) {
	f.tally, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[codecTally]{Name: "tally", Codec: f.c})
	return err
}

func (f *codecTallyFn) ProcessElement(ctx *sluice.KeyedContext[codecUser], r codecRec, out sluice.Collector[codecOut]) error {
	if err := checkCodecRec(r); err != nil {
		return err
	}
	t, _, err := f.tally.Value()
	if err != nil {
		return err
	}
	if t.N > 0 && !t.Last.Equal(codecRecord(t.Last.UnixMilli()/2).At) {
		return fmt.Errorf("key %v: restored tally time %v is not a record's", ctx.Key(), t.Last)
	}
	t.N++
	t.Sum += r.Seq
	t.Last = r.At
	if err := f.tally.Update(t); err != nil {
		return err
	}
	out.Collect(codecOut{Kind: "tally", User: r.User, N: t.N, Sum: t.Sum})
	return nil
}

// checkCodecRec fails on a record that did not come back as it was made.
func checkCodecRec(r codecRec) error {
	w := codecRecord(r.Seq)
	if r.User != w.User || !r.At.Equal(w.At) || r.At.Format(time.RFC3339Nano) != w.At.Format(time.RFC3339Nano) || fmt.Sprint(r.Tags) != fmt.Sprint(w.Tags) {
		return fmt.Errorf("record %d decoded as %+v, want %+v", r.Seq, r, w)
	}
	return nil
}

func codecWindowFn(ctx *sluice.WindowContext[codecUser], els []codecRec, out sluice.Collector[codecOut]) error {
	o := codecOut{Kind: "window", User: ctx.Key().Name, Start: ctx.Window().Start}
	for _, r := range els {
		if err := checkCodecRec(r); err != nil {
			return err
		}
		o.N++
		o.Sum += r.Seq
	}
	out.Collect(o)
	return nil
}

func codecJob(out string, records int64, rate float64, tallyCodec codec.Codec[codecTally], opts ...sluice.Option) (*sluice.Environment, *atomic.Int64) {
	seen := &atomic.Int64{}
	env := newEnv(append([]sluice.Option{sluice.WithParallelism(2), sluice.WithBufferTimeout(2 * time.Millisecond),
		sluice.WithRestartStrategy(sluice.NoRestart()),
		sluice.WithAutoWatermarkInterval(5 * time.Millisecond)}, opts...)...)
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(records), source.DatagenRate(rate),
		source.DatagenTimestamps(func(i int64) int64 { return 2 * i }))
	ids := sluice.FromSource(env, gen, sluice.ForBoundedOutOfOrderness[int64](20*time.Millisecond), "gen", sluice.UID("gen"))
	recs := sluice.Map(ids, func(i int64) (codecRec, error) { seen.Add(1); return codecRecord(i), nil }, sluice.UID("records"))
	ks := sluice.KeyBy(recs, codecKey)
	tallies := sluice.Process[codecUser, codecRec, codecOut](ks, &codecTallyFn{c: tallyCodec}, sluice.UID("tally"))
	windows := sluice.ProcessWindow(sluice.Window(ks, sluice.TumblingEventTimeWindows(codecWindow*time.Millisecond)),
		sluice.ProcessWindowFunc[codecUser, codecRec, codecOut](codecWindowFn), sluice.UID("window"))
	sluice.SinkTo(sluice.Union(tallies, windows), filesink.New[codecOut](out, codec.JSON[codecOut]{}), sluice.UID("files"))
	return env, seen
}

func TestJSONDefaultStateRestoresUnderBinaryDefault(t *testing.T) {
	for _, backend := range []string{"heap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			const records = 3000
			var opts []sluice.Option
			if backend == "rocksdb" {
				opts = append(opts, sluice.WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{})))
			}
			out, cpDir, spDir := t.TempDir(), t.TempDir(), t.TempDir()
			old := sluice.NewConfiguration()
			if err := old.Set("pipeline.default-codec", "json"); err != nil {
				t.Fatal(err)
			}
			// 800 records/s: the savepoint has seconds to complete before
			// the input ends, even on a loaded machine.
			env, seen := codecJob(out, records, 800, codec.JSON[codecTally]{},
				append(opts, sluice.WithConfiguration(old), sluice.WithCheckpointing(30*time.Millisecond, cpDir))...)
			job, err := env.ExecuteAsync(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			await(t, "records to flow", func() bool { return seen.Load() > 400 })
			ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
			defer cancel()
			sp, err := job.StopWithSavepoint(ctx, spDir, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := job.Wait(); err != nil {
				t.Fatalf("stopped job: %v", err)
			}
			if n := seen.Load(); n >= records {
				t.Fatalf("the first run read all %d records; the test needs a savepoint midway", n)
			}

			env2, _ := codecJob(out, records, 40000, nil, append(opts, sluice.WithRestoreFrom(sp),
				sluice.WithCheckpointing(30*time.Millisecond, cpDir))...)
			mustExecute(t, env2)

			got, err := filesink.ReadCommitted(out, codec.JSON[codecOut]{})
			if err != nil {
				t.Fatal(err)
			}
			want, sums := codecWant(records)
			strs := make([]string, len(got))
			final := map[string]int64{}
			for i, o := range got {
				strs[i] = o.String()
				if o.Kind == "tally" && o.N == (records+codecKeys-1-int64(userIndex(o.User)))/codecKeys {
					final[o.User] = o.Sum
				}
			}
			if d := sameMultiset(strs, want); d != "" {
				t.Fatalf("committed results differ from the plain evaluation: %s", d)
			}
			users := make([]string, 0, len(sums))
			for u := range sums {
				users = append(users, u)
			}
			sort.Strings(users)
			for _, u := range users {
				if final[u] != sums[u] {
					t.Errorf("key %s: final sum %d, want %d", u, final[u], sums[u])
				}
			}
		})
	}
}

func userIndex(u string) int {
	var i int
	fmt.Sscanf(u, "u%d", &i)
	return i
}
