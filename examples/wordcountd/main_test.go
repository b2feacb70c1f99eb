package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/internal/testutil"
)

var names = []string{"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The service as deploy/kubernetes runs it: a coordinator and two workers
// (here in one test process) on an embedded broker count the words of the
// input exactly once; a worker serves its own metrics, labelled; SIGTERM
// (the context) suspends them.
func TestCoordinatorAndWorkers(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 2, 1, nil, "lines", "word-counts"); err != nil {
		t.Fatal(err)
	}
	const lines = 200
	for i := range lines {
		// Keyed, so that both partitions have records: a reader knows a
		// partition's end (and its lag) from a fetch that returns some.
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lines", Key: []byte(names[i%10]), Value: []byte("alpha beta " + names[i%10])}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cp := t.TempDir()
	coord, metricsAddr := freeAddr(t), freeAddr(t)
	base := options{brokers: strings.Join(seeds, ","), input: "lines", output: "word-counts", checkpoints: cp,
		stateDir: t.TempDir(), parallelism: 2, interval: 100 * time.Millisecond}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	jobCtx, suspend := context.WithCancel(ctx)
	defer suspend()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	start := func(i int, o options) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = run(jobCtx, o, quiet)
		}()
	}
	co := base
	co.apiAddr = ""
	co.cluster = &cluster.Config{Role: cluster.RoleCoordinator, Listen: coord, HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second}
	start(0, co)
	for i := 1; i <= 2; i++ {
		wo := base
		wo.metricsAddr = ""
		if i == 1 {
			wo.metricsAddr = metricsAddr
		}
		wo.cluster = &cluster.Config{Role: cluster.RoleWorker, Coordinator: coord, Slots: 1, WorkerID: fmt.Sprintf("w%d", i),
			DataListen: "127.0.0.1:0", Host: "127.0.0.1", HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second}
		start(i, wo)
	}
	// Every word counted once per occurrence: alpha and beta 200 times.
	last := map[string]int64{}
	seen := map[string]bool{}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("word-counts"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	want := map[string]int64{"alpha": lines, "beta": lines}
	for _, n := range names {
		want[n] = lines / 10
	}
	done := func() bool {
		for k, n := range want {
			if last[k] < n {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("counts so far %v: %v", last, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			n, _ := strconv.ParseInt(string(r.Value), 10, 64)
			k := string(r.Key) + "/" + string(r.Value)
			if seen[k] {
				t.Errorf("count %s committed twice", k)
			}
			seen[k] = true
			last[string(r.Key)] = max(last[string(r.Key)], n)
		})
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `worker="w1"`) || !strings.Contains(string(body), "sluice_task_numRecordsIn") {
		t.Fatalf("worker metrics lack the worker label or the task metrics:\n%.2000s", body)
	}
	// The connectors' figures, which the program does not wire: the
	// input's records lag and the sink's transactions.
	for _, want := range []string{"sluice_kafka_source_records_lag_max{", `operator="lines"`, "sluice_kafka_sink_transactionsCommitted{", `operator="output"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("worker metrics lack %s; the Kafka connectors':\n%s", want, kafkaLines(string(body)))
		}
	}
	suspend()
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("process %d: %v", i, err)
		}
	}
	for k, n := range want {
		if last[k] != n {
			t.Errorf("%s counted %d times, want %d", k, last[k], n)
		}
	}
}

// kafkaLines are the lines of a Prometheus exposition that give the
// Kafka connectors' figures.
func kafkaLines(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "sluice_kafka_s") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
