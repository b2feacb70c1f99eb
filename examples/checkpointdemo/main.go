// Command checkpointdemo reproduces the unaligned-checkpoint experiment of
// the design's reference article: a datagen source (parallelism 2, about
// 1 KiB records, as fast as it can) feeds, through keyBy, a count-per-key
// operator (parallelism 2) that in slow mode sleeps 5 ms per record, with a
// checkpoint every 5 s. Backpressure fills the network buffers; aligned
// checkpoints wait for them to drain, unaligned ones overtake them and
// persist them, and mixed ones (unaligned with a 1 s aligned timeout)
// switch after a second.
//
//	go run ./examples/checkpointdemo -mode aligned -slow
//	go run ./examples/checkpointdemo -mode unaligned -slow -json
//
// It prints every completed checkpoint's id, end-to-end duration and size,
// then a table of the phases of the checkpoints' time (min, median, max:
// trigger to source, barrier to the last task, alignment, sync, async,
// acknowledgement, _metadata write and fsync, notification), and for the
// last one a table of every subtask's figures.
//
// With the cluster flags (cluster.Flags: --role, --listen,
// --coordinator, --slots, -D key=value, ...) the same job runs on several
// processes, its checkpoints in -checkpoints, a directory every process
// shares. The coordinator prints what one process prints and cancels the
// job after -duration (the workers see its result and exit); a worker
// runs the tasks placed on it and prints nothing but errors:
//
//	dir=$(mktemp -d)
//	go run ./examples/checkpointdemo -mode unaligned -slow --role coordinator --listen 127.0.0.1:6123 -checkpoints $dir &
//	go run ./examples/checkpointdemo -mode unaligned -slow --role worker --coordinator 127.0.0.1:6123 \
//		--slots 1 --data-listen 127.0.0.1:0 --host 127.0.0.1 --worker-id w1 -checkpoints $dir &
//	go run ./examples/checkpointdemo -mode unaligned -slow --role worker --coordinator 127.0.0.1:6123 \
//		--slots 1 --data-listen 127.0.0.1:0 --host 127.0.0.1 --worker-id w2 -checkpoints $dir
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// countPerKey counts records per key in keyed state; in slow mode each
// record costs 5 ms.
type countPerKey struct {
	slow  bool
	count state.ValueState[int64]
}

func (c *countPerKey) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *countPerKey) ProcessElement(_ *sluice.KeyedContext[int64], _ source.Record, out sluice.Collector[int64]) error {
	if c.slow {
		time.Sleep(5 * time.Millisecond)
	}
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.count.Update(n); err != nil {
		return err
	}
	out.Collect(n)
	return nil
}

// checkpointLine is what -json prints per completed checkpoint.
type checkpointLine struct {
	ID                 int64 `json:"id"`
	EndToEndDurationMs int64 `json:"end_to_end_duration_ms"`
	CheckpointedSize   int64 `json:"checkpointed_size"`
	PersistedData      int64 `json:"persisted_data"`
	Unaligned          bool  `json:"unaligned"`
}

func main() {
	mode := flag.String("mode", "aligned", "aligned, unaligned, or mixed (unaligned with a 1 s aligned-checkpoint-timeout)")
	slow := flag.Bool("slow", false, "the count-per-key operator sleeps 5 ms per record")
	duration := flag.Duration("duration", 30*time.Second, "how long to run")
	interval := flag.Duration("interval", 5*time.Second, "checkpoint interval")
	asJSON := flag.Bool("json", false, "print one JSON object per completed checkpoint and nothing else")
	cpDir := flag.String("checkpoints", "", "checkpoint directory, the same for every process of a job on several (default: a new temporary directory)")
	cc := cluster.Flags(flag.CommandLine)
	flag.Parse()

	worker := cc.Role == cluster.RoleWorker
	var logOut io.Writer = os.Stderr
	level := slog.LevelWarn
	if worker {
		level = slog.LevelError // a worker prints nothing but errors
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level})))
	dir := *cpDir
	if dir == "" {
		if cc.Role != cluster.RoleSingle {
			fail(fmt.Errorf("--role %s needs -checkpoints, a directory every process of the job shares", cc.Role))
		}
		var err error
		if dir, err = os.MkdirTemp("", "checkpointdemo-"); err != nil {
			fail(err)
		}
		defer os.RemoveAll(dir)
	}

	var mu sync.Mutex
	var completed []checkpoint.Stats
	listener := func(cs checkpoint.Stats) {
		if cs.Status != checkpoint.StatusCompleted {
			if !*asJSON && cs.FailureReason != checkpoint.ReasonShutdown {
				fmt.Printf("checkpoint %d failed: %s\n", cs.ID, cs.FailureMessage)
			}
			return
		}
		mu.Lock()
		completed = append(completed, cs)
		mu.Unlock()
		if *asJSON {
			b, _ := json.Marshal(checkpointLine{ID: cs.ID, EndToEndDurationMs: cs.EndToEndDuration.Milliseconds(),
				CheckpointedSize: cs.CheckpointedSize, PersistedData: cs.PersistedData, Unaligned: cs.Unaligned})
			fmt.Println(string(b))
			return
		}
		fmt.Printf("checkpoint %-3d end-to-end %8s  size %9s  persisted %9s  unaligned=%t\n", cs.ID,
			cs.EndToEndDuration.Round(time.Millisecond), bytes(cs.CheckpointedSize), bytes(cs.PersistedData), cs.Unaligned)
	}

	opts := []sluice.Option{
		sluice.WithParallelism(2),
		sluice.WithJobName("checkpointdemo-" + *mode),
		sluice.WithCheckpointing(*interval, dir),
		sluice.WithCheckpointListener(listener),
		sluice.WithLogger(slog.Default()),
		cluster.With(*cc),
	}
	switch *mode {
	case "aligned":
	case "unaligned":
		opts = append(opts, sluice.WithUnalignedCheckpoints(0))
	case "mixed":
		opts = append(opts, sluice.WithUnalignedCheckpoints(time.Second))
	default:
		fail(fmt.Errorf("-mode %q: want aligned, unaligned or mixed", *mode))
	}
	env := sluice.NewEnvironment(opts...)
	gen := source.NewDatagen(source.RandomRecords(1, 1000, 1000))
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "datagen",
		sluice.WithCodec[source.Record](source.RecordCodec{}), sluice.UID("datagen"))
	counts := sluice.Process[int64, source.Record, int64](
		sluice.KeyBy(recs, func(r source.Record) int64 { return r.Key }),
		&countPerKey{slow: *slow}, sluice.Name("count-per-key"), sluice.UID("count-per-key"))
	sluice.SinkTo(counts, sink.NewDiscard[int64](), sluice.Name("discard"), sluice.UID("discard"))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if worker {
		// Until the coordinator records the job's end (or an interrupt).
		if err := env.Execute(ctx); err != nil && ctx.Err() == nil {
			fail(err)
		}
		return
	}
	if cc.Role == cluster.RoleSingle {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	if !*asJSON {
		fmt.Printf("mode %s, slow=%t, checkpoint every %v, running %v\n", *mode, *slow, *interval, *duration)
	}
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		fail(err)
	}
	var elapsed atomic.Bool
	if cc.Role == cluster.RoleCoordinator {
		// A coordinator cancels the job at the end rather than suspend it:
		// its result, recorded in the shared directory, tells the workers
		// to exit.
		t := time.AfterFunc(*duration, func() { elapsed.Store(true); job.Cancel() })
		defer t.Stop()
	}
	if err := job.Wait(); err != nil && ctx.Err() == nil && !elapsed.Load() {
		fail(err)
	}
	if *asJSON {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if len(completed) == 0 {
		fmt.Println("no checkpoint completed: run longer than the interval")
		return
	}
	summarize(completed)
	last := completed[len(completed)-1]
	fmt.Printf("\nsubtasks of checkpoint %d:\n", last.ID)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "vertex\tsub\tstart_delay\talignment\tsync\tasync\t(of it: channel-state wait)\tend_to_end\tpersisted\tunaligned\t")
	tasks := last.Tasks
	sort.SliceStable(tasks, func(i, j int) bool {
		if tasks[i].Vertex != tasks[j].Vertex {
			return tasks[i].Vertex > tasks[j].Vertex // sources first
		}
		return tasks[i].Subtask < tasks[j].Subtask
	})
	for _, t := range tasks {
		f := t.Figures
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%t\t\n", t.Vertex, t.Subtask, us(f.StartDelay), us(f.Alignment),
			us(f.Sync), us(f.Async), us(f.ChannelStateWait), us(t.EndToEndDuration), bytes(f.PersistedData), f.Unaligned)
	}
	w.Flush()
}

// summarize prints the median end-to-end duration and sizes, and a table
// of every phase's min, median and max over the checkpoints.
func summarize(cs []checkpoint.Stats) {
	var persisted, size int64
	for _, c := range cs {
		persisted += c.PersistedData
		size += c.CheckpointedSize
	}
	e2e := spread(cs, func(c checkpoint.Stats) time.Duration { return c.EndToEndDuration })
	fmt.Printf("\n%d checkpoints: end-to-end min %s median %s max %s; mean size %s, mean persisted %s\n",
		len(cs), ms(e2e[0]), ms(e2e[1]), ms(e2e[2]), bytes(size/int64(len(cs))), bytes(persisted/int64(len(cs))))
	fmt.Println("\nphases along the task acknowledging last (end_to_end = trigger_to_source .. ack; completion adds metadata and notify):")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "phase\tmin\tmedian\tmax\t")
	row := func(name string, f func(checkpoint.Stats) time.Duration) {
		d := spread(cs, f)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", name, us(d[0]), us(d[1]), us(d[2]))
	}
	for i, part := range (checkpoint.Phases{}).Parts() {
		row(part.Name, func(c checkpoint.Stats) time.Duration { return c.Phases.Parts()[i].Duration })
		if part.Name == "ack" {
			row("end_to_end", func(c checkpoint.Stats) time.Duration { return c.EndToEndDuration })
		}
	}
	row("completion", func(c checkpoint.Stats) time.Duration { return c.Phases.Completion })
	w.Flush()
}

// spread returns the min, median and max of f over cs.
func spread(cs []checkpoint.Stats, f func(checkpoint.Stats) time.Duration) [3]time.Duration {
	d := make([]time.Duration, len(cs))
	for i, c := range cs {
		d[i] = f(c)
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return [3]time.Duration{d[0], median(d), d[len(d)-1]}
}

// median of sorted d: the mean of the middle two for an even count.
func median(d []time.Duration) time.Duration {
	n := len(d)
	if n%2 == 1 {
		return d[n/2]
	}
	return (d[n/2-1] + d[n/2]) / 2
}

func us(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func bytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "checkpointdemo:", err)
	os.Exit(1)
}
