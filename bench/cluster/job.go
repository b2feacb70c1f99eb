package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// jobFlags configure the measured job. Every process of one setup gets the
// same values (the parent passes them on): they all build the same plan.
type jobFlags struct {
	records     int64
	keys        int
	payload     int
	parallelism int
	interval    time.Duration
	rate        float64
	checkpoints string
}

func (j *jobFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&j.records, "records", 8_000_000, "job: records the bounded datagen source emits, over all subtasks")
	fs.IntVar(&j.keys, "keys", 10_000, "job: distinct int64 keys")
	fs.IntVar(&j.payload, "payload", 1024, "job: payload bytes per record")
	fs.IntVar(&j.parallelism, "parallelism", 6, "job: parallelism of every operator (the job needs as many slots)")
	fs.DurationVar(&j.interval, "interval", time.Second, "job: checkpoint interval (aligned)")
	fs.Float64Var(&j.rate, "rate", 0, "job: source rate limit, records/s over all subtasks (0: as fast as it can)")
	fs.StringVar(&j.checkpoints, "checkpoints", "", "job: checkpoint directory, shared by every process of a setup (the parent makes one per run)")
}

// args are the flags that give another process the same job.
func (j *jobFlags) args() []string {
	return []string{
		"--records", strconv.FormatInt(j.records, 10), "--keys", strconv.Itoa(j.keys),
		"--payload", strconv.Itoa(j.payload), "--parallelism", strconv.Itoa(j.parallelism),
		"--interval", j.interval.String(), "--rate", strconv.FormatFloat(j.rate, 'g', -1, 64),
		"--checkpoints", j.checkpoints,
	}
}

// countPerKey keeps a running count per key in keyed state (the heap
// backend) and emits it.
type countPerKey struct {
	count state.ValueState[int64]
}

func (c *countPerKey) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *countPerKey) ProcessElement(_ *sluice.KeyedContext[int64], _ source.Record, out sluice.Collector[int64]) error {
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

// newJob builds the plan, the same in every process: datagen of records
// with an int64 key and a payload -> keyBy(key) -> running count in keyed
// state -> discard, aligned checkpoints every interval. The source and
// the count+discard chain are two vertices of the same parallelism, so
// with slot sharing the job needs parallelism slots.
func newJob(j jobFlags, cc cluster.Config, log *slog.Logger, extra ...sluice.Option) (*sluice.Environment, *sink.Discard[int64], error) {
	if j.checkpoints == "" {
		return nil, nil, errors.New("--checkpoints is needed in a child process")
	}
	env := sluice.NewEnvironment(append([]sluice.Option{
		sluice.WithJobName("bench-cluster-keyed-count"),
		sluice.WithParallelism(j.parallelism),
		sluice.WithLogger(log),
		cluster.With(cc),
		sluice.WithCheckpointing(j.interval, j.checkpoints),
		// A failure is reported, not hidden behind a restart.
		sluice.WithRestartStrategy(sluice.NoRestart()),
	}, extra...)...)
	opts := []source.DatagenOption{source.DatagenCount(j.records)}
	if j.rate > 0 {
		opts = append(opts, source.DatagenRate(j.rate))
	}
	gen := source.NewDatagen(source.RandomRecords(1, j.payload, j.keys), opts...)
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "datagen",
		sluice.WithCodec[source.Record](source.RecordCodec{}), sluice.UID("datagen"))
	counts := sluice.Process[int64, source.Record, int64](
		sluice.KeyBy(recs, func(r source.Record) int64 { return r.Key }),
		&countPerKey{}, sluice.Name("count"), sluice.UID("count"))
	d := sink.NewDiscard[int64]()
	sluice.SinkTo(counts, d, sluice.Name("discard"), sluice.UID("discard"))
	return env, d, nil
}

// result is what a single process or a coordinator prints as its last
// line of standard output; a worker prints its discarded count.
type result struct {
	Kind        string  `json:"bench"` // "result" or "worker"
	Status      string  `json:"status,omitempty"`
	Err         string  `json:"err,omitempty"`
	Restarts    int64   `json:"restarts,omitempty"`
	JobWallMs   float64 `json:"job_wall_ms,omitempty"` // from the (first) deployment to the job's end
	Checkpoints int     `json:"checkpoints"`
	Failed      int     `json:"failed_checkpoints"`
	CpMedianMs  int64   `json:"cp_median_ms"`
	CpMaxMs     int64   `json:"cp_max_ms"`
	Discarded   int64   `json:"discarded"` // records the discard sink of this process saw (single, worker)
}

// hook is a slog handler that shows every record to fn before handing it
// on.
type hook struct {
	slog.Handler
	fn func(slog.Record)
}

func (h hook) Handle(ctx context.Context, r slog.Record) error {
	h.fn(r)
	return h.Handler.Handle(ctx, r)
}
func (h hook) WithAttrs(as []slog.Attr) slog.Handler { return hook{h.Handler.WithAttrs(as), h.fn} }
func (h hook) WithGroup(n string) slog.Handler       { return hook{h.Handler.WithGroup(n), h.fn} }

// runChild is one process of a setup, in the role cc says. Its logs go
// to standard error (JSON); its result is one JSON line on standard
// output. It stops when its standard input closes: the parent is gone.
func runChild(cc cluster.Config, j jobFlags) error {
	level := slog.LevelWarn
	if cc.Role == cluster.RoleCoordinator {
		level = slog.LevelInfo
	}
	var deployed atomic.Int64 // unix nanos of the first "deploying attempt"
	log := slog.New(hook{slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}), func(r slog.Record) {
		if r.Message == "deploying attempt" {
			deployed.CompareAndSwap(0, r.Time.UnixNano())
		}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
		time.AfterFunc(5*time.Second, func() { os.Exit(3) })
	}()
	var mu sync.Mutex
	var durations []time.Duration
	failed := 0
	listener := sluice.WithCheckpointListener(func(s checkpoint.Stats) {
		mu.Lock()
		defer mu.Unlock()
		if s.Status == checkpoint.StatusCompleted {
			durations = append(durations, s.EndToEndDuration)
		} else if s.FailureReason != checkpoint.ReasonShutdown {
			failed++
			log.Warn("checkpoint failed", "checkpoint", s.ID, "reason", s.FailureMessage)
		}
	})
	env, discard, err := newJob(j, cc, log, listener)
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	if cc.Role == cluster.RoleWorker {
		err := env.Execute(ctx)
		_ = out.Encode(result{Kind: "worker", Discarded: discard.Count()})
		return err
	}
	started := time.Now()
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		return err
	}
	err = job.Wait()
	end := time.Now()
	from := started
	if d := deployed.Load(); d != 0 && cc.Role == cluster.RoleCoordinator {
		from = time.Unix(0, d)
	}
	mu.Lock()
	r := result{Kind: "result", Status: fmt.Sprint(job.Status()), Restarts: job.Restarts(),
		JobWallMs: float64(end.Sub(from).Microseconds()) / 1000, Checkpoints: len(durations), Failed: failed}
	if len(durations) > 0 {
		slices.Sort(durations)
		r.CpMedianMs = durations[len(durations)/2].Milliseconds()
		r.CpMaxMs = durations[len(durations)-1].Milliseconds()
	}
	mu.Unlock()
	if cc.Role == cluster.RoleSingle {
		r.Discarded = discard.Count()
	}
	if err != nil {
		r.Err = err.Error()
	}
	_ = out.Encode(r)
	return err
}
