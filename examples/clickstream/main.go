// Command clickstream is a Kafka-to-Kafka job with event time and
// exactly-once output, the one the README shows: clicks are read from a
// topic, every click id is let through once (a flag per id in keyed state,
// kept for an hour), the clicks of every user are counted per minute of
// event time, and the counts are written to a second topic in Kafka
// transactions that commit with the job's checkpoints. A click that comes
// after its minute was counted goes to a third topic.
//
//	go run ./examples/clickstream                                # embedded broker
//	KAFKA_BROKERS=127.0.0.1:9092 go run ./examples/clickstream   # your broker
//
// With KAFKA_BROKERS unset it starts an embedded Kafka broker in the
// process (franz-go's kfake). It creates the three topics (the clicks in
// 4 partitions), writes six minutes of clicks of six users, up to 4 s out
// of order within a partition and one in ten sent twice, and runs the job
// with a checkpoint every 500 ms. Once every minute up to the watermark is
// counted, it writes a phone's clicks that were held back: three new ones
// from the first minute, too late for it, and one sent again. It reads
// both output topics as a read_committed consumer and checks them against
// a plain computation: every user-minute once with its count of distinct
// clicks, the three late clicks in the late topic, the resent one nowhere.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
)

// Click is one input record, JSON in Kafka.
type Click struct {
	ID   string `json:"id"` // the same for a click sent twice
	User string `json:"user"`
	Page string `json:"page"`
	TS   int64  `json:"ts"` // event time, unix milliseconds
}

// UserMinute is one output record: a user's distinct clicks in a minute
// of event time [Start, End).
type UserMinute struct {
	User   string `json:"user"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	Clicks int    `json:"clicks"`
}

// topics names the Kafka cluster and the job's three topics.
type topics struct {
	brokers                 []string
	clicks, perMinute, late string
}

// [start job]
// clickstream adds the job to env: clicks from Kafka with event time
// (watermarks per partition, 5 s out of order), each click id once,
// clicks per user and minute to Kafka, late clicks to a topic of their own.
// [start pipeline]
func clickstream(env *sluice.Environment, kafka topics) error {
	src, err := kafkasource.NewSource(kafka.brokers, kafkasource.Topics(kafka.clicks),
		kafkasource.ValueDecoder(codec.JSON[Click]{}))
	if err != nil {
		return err
	}
	clicks := sluice.FromSource(env, src,
		sluice.ForBoundedOutOfOrderness[Click](5*time.Second).
			WithTimestampAssigner(func(c Click, _ int64) int64 { return c.TS }).
			WithIdleness(time.Minute),
		"clicks", sluice.UID("clicks"))
	unique := sluice.Process[string, Click, Click](
		sluice.KeyBy(clicks, func(c Click) string { return c.ID }), &dedup{}, sluice.UID("dedup"))
	late := sluice.NewOutputTag[Click]("late-clicks")
	perMinute := sluice.ProcessWindow(
		sluice.Window(sluice.KeyBy(unique, func(c Click) string { return c.User }),
			sluice.TumblingEventTimeWindows(time.Minute)).SideOutputLateData(late),
		sluice.ProcessWindowFunc[string, Click, UserMinute](countClicks), sluice.UID("per-minute"))

	// Exactly once, as the job's checkpoints are: each checkpoint interval's
	// records go into a Kafka transaction that commits with the checkpoint.
	minutesOut, err := kafkasink.NewSink(kafka.brokers, kafkasink.ValueSerializer(kafka.perMinute, codec.JSON[UserMinute]{}))
	if err != nil {
		return err
	}
	lateOut, err := kafkasink.NewSink(kafka.brokers, kafkasink.ValueSerializer(kafka.late, codec.JSON[Click]{}))
	if err != nil {
		return err
	}
	sluice.SinkTo(perMinute, minutesOut, sluice.UID("per-minute-out"))
	sluice.SinkTo(sluice.SideOutput(perMinute, late), lateOut, sluice.UID("late-out"))
	return nil
}

// [end pipeline]

// [start dedup]
// dedup lets the first click of every id through: a flag per id in keyed
// state, forgotten an hour after it was written.
type dedup struct{ seen state.ValueState[bool] }

func (d *dedup) Open(ctx *sluice.OperatorContext) (err error) {
	d.seen, err = state.GetValueState(ctx.KeyedState,
		state.ValueStateDescriptor[bool]{Name: "seen", TTL: state.TTLConfig{TTL: time.Hour}})
	return err
}

func (d *dedup) ProcessElement(_ *sluice.KeyedContext[string], c Click, out sluice.Collector[Click]) error {
	if seen, _, err := d.seen.Value(); err != nil || seen {
		return err
	}
	out.Collect(c)
	return d.seen.Update(true)
}

// [end dedup]

// countClicks counts a user's clicks in one minute, when the watermark
// passes the minute's end.
func countClicks(ctx *sluice.WindowContext[string], clicks []Click, out sluice.Collector[UserMinute]) error {
	w := ctx.Window()
	out.Collect(UserMinute{User: ctx.Key(), Start: w.Start, End: w.End, Clicks: len(clicks)})
	return nil
}

// [end job]

func main() {
	flag.Parse()
	if err := run(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "clickstream: %v\n", err)
		os.Exit(1)
	}
}

// run is the program: a broker, the topics, the input, the job, and the
// check of its output.
func run(w io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// The job logs warnings and errors only, so that the example's own
	// lines stand out.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fmt.Fprintln(w, "Sluice clickstream: Kafka -> each click once -> clicks per user and event-time minute -> Kafka, exactly once.")

	var seeds []string
	if v := strings.TrimSpace(os.Getenv("KAFKA_BROKERS")); v != "" {
		seeds = strings.Split(v, ",")
		fmt.Fprintf(w, "Broker: %s (KAFKA_BROKERS).\n", v)
	} else {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return fmt.Errorf("start the embedded broker: %w", err)
		}
		defer c.Close()
		seeds = c.ListenAddrs()
		fmt.Fprintf(w, "KAFKA_BROKERS is unset: started an embedded Kafka broker (franz-go kfake) at %s.\n", strings.Join(seeds, ","))
	}
	suffix := randomSuffix()
	k := topics{brokers: seeds, clicks: "clicks-" + suffix, perMinute: "clicks-per-minute-" + suffix, late: "late-clicks-" + suffix}
	if err := createTopics(ctx, seeds, map[string]int32{k.clicks: partitions, k.perMinute: 2, k.late: 1}); err != nil {
		return err
	}
	input := generateClicks(42)
	if err := produce(ctx, seeds, k.clicks, input); err != nil {
		return err
	}
	fmt.Fprintf(w, "Wrote %d clicks of %d users to %s (%d partitions), 6 minutes of event time.\n", len(input), len(users), k.clicks, partitions)

	// [start run]
	dir, err := os.MkdirTemp("", "sluice-clickstream-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env := sluice.NewEnvironment(
		sluice.WithJobName("clickstream"),
		sluice.WithParallelism(2),
		sluice.WithCheckpointing(500*time.Millisecond, dir), // exactly-once checkpoints; a restart resumes from the latest
		sluice.WithLogger(log),
	)
	if err := clickstream(env, k); err != nil {
		return err
	}
	job, err := env.ExecuteAsync(ctx)
	// [end run]
	if err != nil {
		return err
	}
	defer func() {
		job.Cancel()
		_ = job.Wait()
	}()

	want := expectedMinutes(input)
	minutesTopic, lateTopic := newReader(seeds, k.perMinute), newReader(seeds, k.late)
	defer minutesTopic.close()
	defer lateTopic.close()
	if err := minutesTopic.await(ctx, len(want), job); err != nil {
		return err
	}
	minutes, err := decode[UserMinute](minutesTopic.values)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d user-minutes committed, up to the watermark (the last click of every partition, less 5 s):\n", len(minutes))
	for _, m := range sortedMinutes(minutes)[:4] {
		fmt.Fprintf(w, "  %-4s %s-%s  %d clicks\n", m.User, clock(m.Start), clock(m.End), m.Clicks)
	}
	fmt.Fprintln(w, "  ...")

	held := heldBackClicks(input)
	if err := produce(ctx, seeds, k.clicks, held); err != nil {
		return err
	}
	fmt.Fprintf(w, "Wrote %d clicks a phone held back: 3 new ones from the minute %s, 1 sent before.\n", len(held), clock(start))
	if err := lateTopic.await(ctx, 3, job); err != nil {
		return err
	}
	// The resent click, dropped by the dedup, reaches neither topic: read
	// both again after two more checkpoints.
	if err := awaitCheckpoints(ctx, job, 2); err != nil {
		return err
	}
	minutesTopic.poll(ctx, 500*time.Millisecond)
	lateTopic.poll(ctx, 500*time.Millisecond)
	if minutes, err = decode[UserMinute](minutesTopic.values); err != nil {
		return err
	}
	lateClicks, err := decode[Click](lateTopic.values)
	if err != nil {
		return err
	}
	if err := check(minutes, want, lateClicks, held[:3]); err != nil {
		return err
	}
	fmt.Fprintf(w, "Late clicks in %s: %s.\n", k.late, idsOf(lateClicks))
	fmt.Fprintln(w, "Output exact: every user-minute once with its count of distinct clicks, as a plain computation")
	fmt.Fprintln(w, "says; the late clicks in their own topic; the click sent twice counted once.")
	return nil
}

// The input: users' clicks over six minutes of event time from start, a
// user's clicks in one partition.
const (
	partitions = 4
	outOfOrder = 4000 // ms, the most a click is behind the latest of its partition
	minutes    = 6
)

var (
	users = []string{"ann", "bob", "cy", "dee", "eve", "fay"}
	pages = []string{"/", "/search", "/item", "/cart", "/checkout"}
	start = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
)

// partitionOf places a user's clicks in one partition, every partition
// with a user.
func partitionOf(user string) int32 { return int32(slices.Index(users, user) % partitions) }

// generateClicks returns the clicks of every user, in the order they are
// written: a click every 1-4 s of event time, from a few seconds after
// start to six minutes after it, each written up to outOfOrder after its
// time (so that every partition is out of order by less than that), the
// last exactly at six minutes, and one in ten written twice.
func generateClicks(seed uint64) []Click {
	rng := mrand.New(mrand.NewPCG(seed, seed))
	end := start + minutes*60_000
	type planned struct {
		written int64 // in event time
		c       Click
	}
	var plan []planned
	for _, u := range users {
		at := start + outOfOrder + rng.Int64N(3000)
		for i := 0; ; i++ {
			ts := at - rng.Int64N(outOfOrder)
			if at == end {
				ts = end
			}
			c := Click{ID: fmt.Sprintf("%s-%03d", u, i), User: u, Page: pages[rng.IntN(len(pages))], TS: ts}
			plan = append(plan, planned{at, c})
			if rng.IntN(10) == 0 {
				plan = append(plan, planned{at, c}) // a retry sends it again
			}
			if at == end {
				break
			}
			at = min(at+1000+rng.Int64N(3000), end)
		}
	}
	slices.SortStableFunc(plan, func(a, b planned) int { return cmp.Compare(a.written, b.written) })
	out := make([]Click, len(plan))
	for i, p := range plan {
		out[i] = p.c
	}
	return out
}

// heldBackClicks returns what a phone sends late: three new clicks of
// ann's in the first minute, and one of her clicks sent before.
func heldBackClicks(input []Click) []Click {
	held := []Click{
		{ID: "ann-phone-1", User: "ann", Page: "/", TS: start + 10_000},
		{ID: "ann-phone-2", User: "ann", Page: "/item", TS: start + 20_000},
		{ID: "ann-phone-3", User: "ann", Page: "/cart", TS: start + 30_000},
	}
	i := slices.IndexFunc(input, func(c Click) bool { return c.User == "ann" })
	return append(held, input[i])
}

// expectedMinutes computes the output without the job: the distinct
// clicks per user and minute, for the minutes the final watermark closes
// (the smallest over the partitions of their latest click, less 5 s and
// 1 ms, at or past the minute's last millisecond).
func expectedMinutes(input []Click) []UserMinute {
	latest := map[int32]int64{}
	for _, c := range input {
		p := partitionOf(c.User)
		latest[p] = max(latest[p], c.TS)
	}
	watermark := int64(1<<63 - 1)
	for _, ts := range latest {
		watermark = min(watermark, ts-5000-1)
	}
	seen := map[string]bool{}
	counts := map[UserMinute]int{}
	for _, c := range input {
		if seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		s := c.TS - c.TS%60_000
		if s+60_000-1 <= watermark {
			counts[UserMinute{User: c.User, Start: s, End: s + 60_000}]++
		}
	}
	var out []UserMinute
	for m, n := range counts {
		m.Clicks = n
		out = append(out, m)
	}
	return sortedMinutes(out)
}

// check compares the committed output with the plain computation.
func check(got, want []UserMinute, late, wantLate []Click) error {
	var problems []string
	if got := sortedMinutes(got); !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("user-minutes: got %d %v,\n  want %d %v", len(got), got, len(want), want))
	}
	if g, w := idsOf(late), idsOf(wantLate); g != w {
		problems = append(problems, fmt.Sprintf("late clicks: got %s, want %s", g, w))
	}
	if len(problems) > 0 {
		return fmt.Errorf("the committed output is not what a plain computation says:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

func sortedMinutes(ms []UserMinute) []UserMinute {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b UserMinute) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.User, b.User))
	})
	return ms
}

func idsOf(cs []Click) string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	slices.Sort(ids)
	return strings.Join(ids, ", ")
}

func clock(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04") }

// createTopics creates each topic with its number of partitions.
func createTopics(ctx context.Context, seeds []string, parts map[string]int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for t, n := range parts {
		if _, err := adm.CreateTopic(ctx, n, -1, nil, t); err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return nil
}

// produce writes the clicks to topic as JSON, keyed by user, each in its
// user's partition, in order.
func produce(ctx context.Context, seeds []string, topic string, clicks []Click) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(clicks))
	for i, c := range clicks {
		v, err := json.Marshal(c)
		if err != nil {
			return err
		}
		recs[i] = &kgo.Record{Key: []byte(c.User), Value: v, Partition: partitionOf(c.User)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("write %d clicks to %s: %w", len(clicks), topic, err)
	}
	return nil
}

// reader reads a topic as a read_committed consumer, from its start.
type reader struct {
	topic  string
	cl     *kgo.Client
	err    error
	values [][]byte
}

func newReader(seeds []string, topic string) *reader {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	return &reader{topic: topic, cl: cl, err: err}
}

func (r *reader) close() {
	if r.cl != nil {
		r.cl.Close()
	}
}

// poll adds what becomes visible within d.
func (r *reader) poll(ctx context.Context, d time.Duration) {
	if r.err != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	r.cl.PollFetches(pctx).EachRecord(func(rec *kgo.Record) { r.values = append(r.values, rec.Value) })
}

// await reads until the topic holds n records.
func (r *reader) await(ctx context.Context, n int, job *sluice.Job) error {
	for r.err == nil && len(r.values) < n {
		r.poll(ctx, 200*time.Millisecond)
		select {
		case <-job.Done():
			return fmt.Errorf("the job ended with %d of %d records in %s: %w", len(r.values), n, r.topic, job.Wait())
		case <-ctx.Done():
			return fmt.Errorf("%d of %d records in %s: %w", len(r.values), n, r.topic, ctx.Err())
		default:
		}
	}
	return r.err
}

// decode decodes JSON values.
func decode[T any](values [][]byte) ([]T, error) {
	out := make([]T, len(values))
	for i, v := range values {
		if err := json.Unmarshal(v, &out[i]); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	return out, nil
}

// awaitCheckpoints waits until n more checkpoints of the job completed.
func awaitCheckpoints(ctx context.Context, job *sluice.Job, n int) error {
	completed := func() int {
		s, _ := job.CheckpointStats()
		return s.Completed
	}
	target := completed() + n
	for completed() < target {
		select {
		case <-job.Done():
			return errors.Join(errors.New("the job ended"), job.Wait())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
