// Command wordcount is Sluice's main example: a Kafka-to-Kafka pipeline
// with exactly-once results. It reads lines of text from an input topic,
// splits them into words, keeps a running count per word in keyed state,
// and writes (word, count) to an output topic in Kafka transactions that
// commit only when the checkpoint covering them completes.
//
//	go run ./examples/wordcount                                # embedded broker
//	KAFKA_BROKERS=127.0.0.1:9092 go run ./examples/wordcount   # your broker
//
// With KAFKA_BROKERS unset it starts an embedded Kafka broker in the
// process (franz-go's kfake). Either way it creates an input and an output
// topic, writes sample text into the input a line at a time, runs the job
// with a checkpoint every 500 ms, and prints a line per completed
// checkpoint and, as they become visible, the records a read_committed
// consumer sees on the output topic. It stops once every word is counted
// and checks the output: for every word the counts 1..n, once each.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
)

// sampleText is what the example writes to the input topic, a line per
// record.
var sampleText = []string{
	"a stream is a river of records that never ends",
	"a checkpoint is a photograph of the river and of every boat on it",
	"the source remembers where it was reading in every partition",
	"the counter remembers how many times it has seen every word",
	"the sink writes every record of an interval into one transaction",
	"the transaction commits when the checkpoint that covers it completes",
	"if the job crashes the river is read again from the photograph",
	"and the open transaction is aborted so nothing is counted twice",
	"a reader that waits for committed records sees every count once",
	"one two three four five the counts go up one at a time",
	"records flow from the input topic to the output topic",
	"every word is a key and every key has its own count",
	"the keyed state of a word lives with the subtask that owns its key group",
	"barriers flow with the records and split the stream into intervals",
	"when every barrier is in the checkpoint is complete",
	"and then the transaction of the interval becomes visible",
}

// WordCount is one output record: a word and how often it has been seen.
type WordCount struct {
	Word  string
	Count int64
}

// countWords keeps the count of every word in keyed state.
type countWords struct {
	count state.ValueState[int64]
}

func (c *countWords) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *countWords) ProcessElement(ctx *sluice.KeyedContext[string], _ string, out sluice.Collector[WordCount]) error {
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.count.Update(n); err != nil {
		return err
	}
	out.Collect(WordCount{Word: ctx.Key(), Count: n})
	return nil
}

// words splits a line into lower-case words.
func words(line string) []string {
	return strings.FieldsFunc(strings.ToLower(line), func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' })
}

// addPipeline adds the job to env: lines from the input topic, split into
// words, a running count per word in keyed state, and the counts written
// to the output topic in Kafka transactions (exactly once; the
// transactional ids start with txnPrefix). The program and its tests
// build the job with it.
func addPipeline(env *sluice.Environment, seeds []string, input, output, txnPrefix string, log *slog.Logger) error {
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics(input),
		func(r *kgo.Record) (string, error) { return string(r.Value), nil }, kafkasource.Logger(log))
	if err != nil {
		return err
	}
	lines := sluice.FromSource(env, src, sluice.NoWatermarks[string](), "lines", sluice.UID("lines"))
	split := sluice.FlatMap(lines, func(line string, c sluice.Collector[string]) error {
		for _, w := range words(line) {
			c.Collect(w)
		}
		return nil
	}, sluice.Name("split"), sluice.UID("split"))
	counts := sluice.Process[string, string, WordCount](sluice.KeyBy(split, func(w string) string { return w }),
		&countWords{}, sluice.Name("count"), sluice.UID("count"))
	snk, err := kafkasink.NewSink(seeds, func(wc WordCount) (*kgo.Record, error) {
		return &kgo.Record{Topic: output, Key: []byte(wc.Word), Value: strconv.AppendInt(nil, wc.Count, 10)}, nil
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(txnPrefix),
		kafkasink.TransactionTimeout(5*time.Minute), kafkasink.Logger(log))
	if err != nil {
		return err
	}
	sluice.SinkTo(counts, snk, sluice.Name("output"), sluice.UID("output"))
	return nil
}

// printer serialises what the job's goroutines print.
type printer struct{ mu sync.Mutex }

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Printf(format, args...)
}

func main() {
	interval := flag.Duration("interval", 500*time.Millisecond, "checkpoint interval")
	lineGap := flag.Duration("line-gap", 200*time.Millisecond, "pause between two lines written to the input topic")
	flag.Parse()
	if err := run(*interval, *lineGap); err != nil {
		fmt.Fprintf(os.Stderr, "wordcount: %v\n", err)
		os.Exit(1)
	}
}

func run(interval, lineGap time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 50*time.Second)
	defer cancel()
	out := &printer{}
	// The job logs warnings and errors only, so that the example's own
	// lines stand out.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	fmt.Println("Sluice word count: Kafka -> words -> count per word (keyed state) -> Kafka, exactly once.")
	var seeds []string
	embedded := false
	if v := strings.TrimSpace(os.Getenv("KAFKA_BROKERS")); v != "" {
		seeds = strings.Split(v, ",")
		fmt.Printf("Broker: %s (KAFKA_BROKERS).\n", v)
	} else {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return fmt.Errorf("start the embedded broker: %w", err)
		}
		defer c.Close()
		seeds, embedded = c.ListenAddrs(), true
		fmt.Printf("KAFKA_BROKERS is unset: started an embedded Kafka broker (franz-go kfake) at %s.\n", strings.Join(seeds, ","))
	}

	suffix := randomSuffix()
	input, output := "wordcount-input-"+suffix, "wordcount-output-"+suffix
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	for _, t := range []string{input, output} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, t); err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	fmt.Printf("Input topic %s, output topic %s (2 partitions each); checkpoints every %v.\n\n", input, output, interval)

	// The job.
	chkDir, err := os.MkdirTemp("", "sluice-wordcount-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(chkDir)
	env := sluice.NewEnvironment(
		sluice.WithJobName("wordcount"),
		sluice.WithParallelism(2),
		sluice.WithLogger(log),
		sluice.WithCheckpointing(interval, chkDir),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Timeout = 30 * time.Second }),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				d := s.EndToEndDuration.Round(time.Millisecond)
				if d == 0 {
					d = s.EndToEndDuration.Round(time.Microsecond)
				}
				out.printf("checkpoint %d completed in %v (state %d bytes)\n", s.ID, d, s.StateSize)
			}
		}),
	)
	if err := addPipeline(env, seeds, input, output, "wordcount-"+suffix, log); err != nil {
		return err
	}
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		return err
	}
	defer func() {
		job.Cancel()
		_ = job.Wait()
	}()

	// The sample text, a line at a time, as a live topic would receive it.
	want := map[string]int64{}
	total := 0
	for _, l := range sampleText {
		for _, w := range words(l) {
			want[w]++
			total++
		}
	}
	prodErr := make(chan error, 1)
	go func() { prodErr <- produceLines(ctx, seeds, input, lineGap) }()

	// What a read_committed consumer sees, until every word is counted.
	got, err := consumeCommitted(ctx, seeds, output, total, job, out)
	if err != nil {
		return err
	}
	if err := <-prodErr; err != nil {
		return err
	}
	job.Cancel()
	if err := job.Wait(); err != nil && !errors.Is(err, sluice.ErrJobCanceled) {
		return fmt.Errorf("job: %w", err)
	}
	return report(got, want, total, embedded, seeds, output)
}

// produceLines writes the sample text to topic, a line per record, lineGap
// apart.
func produceLines(ctx context.Context, seeds []string, topic string, lineGap time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i, l := range sampleText {
		if i > 0 {
			select {
			case <-time.After(lineGap):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(l)}).FirstErr(); err != nil {
			return fmt.Errorf("write line %d to %s: %w", i+1, topic, err)
		}
	}
	return nil
}

// consumeCommitted reads topic under read_committed until it has n
// records, printing each batch as it becomes visible, and returns the
// counts per word in the order they were read.
func consumeCommitted(ctx context.Context, seeds []string, topic string, n int, job *sluice.Job, out *printer) (map[string][]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got := map[string][]int64{}
	seen := 0
	for seen < n {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		select {
		case <-job.Done():
			return nil, fmt.Errorf("the job ended before every word was counted: %w", job.Wait())
		default:
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d (word, count) records visible: %w", seen, n, ctx.Err())
		}
		var batch []string
		fs.EachRecord(func(r *kgo.Record) {
			c, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				c = -1
			}
			got[string(r.Key)] = append(got[string(r.Key)], c)
			batch = append(batch, fmt.Sprintf("%s=%s", r.Key, r.Value))
			seen++
		})
		if len(batch) > 0 {
			out.printf("%s", wrap(fmt.Sprintf("  %d records now visible to read_committed:", len(batch)), batch))
		}
	}
	return got, nil
}

// wrap lays items out after head, in lines of about 100 characters.
func wrap(head string, items []string) string {
	var b strings.Builder
	line := head
	for _, it := range items {
		if len(line)+1+len(it) > 100 {
			b.WriteString(line + "\n")
			line = "   "
		}
		line += " " + it
	}
	b.WriteString(line + "\n")
	return b.String()
}

// report checks that every word's counts are 1..n, once each, in order,
// with n its number in the text, and prints the most frequent words.
func report(got map[string][]int64, want map[string]int64, total int, embedded bool, seeds []string, output string) error {
	var bad []string
	for w, n := range want {
		cs := got[w]
		ok := int64(len(cs)) == n
		for i := 0; ok && i < len(cs); i++ {
			ok = cs[i] == int64(i+1)
		}
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: counts %v, want 1..%d", w, cs, n))
		}
	}
	for w := range got {
		if _, ok := want[w]; !ok {
			bad = append(bad, fmt.Sprintf("%s: not in the text", w))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		return fmt.Errorf("the committed output is not exactly once:\n  %s", strings.Join(bad, "\n  "))
	}
	words := make([]string, 0, len(want))
	for w := range want {
		words = append(words, w)
	}
	sort.Slice(words, func(i, j int) bool {
		if want[words[i]] != want[words[j]] {
			return want[words[i]] > want[words[j]]
		}
		return words[i] < words[j]
	})
	var top []string
	for _, w := range words[:min(10, len(words))] {
		top = append(top, fmt.Sprintf("%s %d", w, want[w]))
	}
	fmt.Printf("\nDone: %d (word, count) records committed, one per word of the text (%d distinct words);\n", total, len(want))
	fmt.Println("every word's counts are 1..n, each exactly once, in order: the output is exactly once.")
	fmt.Printf("Most frequent: %s.\n", strings.Join(top, ", "))
	if !embedded {
		fmt.Printf("Read the output yourself: kcat -b %s -C -t %s -X isolation.level=read_committed -e -f '%%k %%s\\n'\n",
			strings.Join(seeds, ","), output)
	}
	return nil
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
