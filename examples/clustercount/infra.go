package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/sluicehq/sluice/internal/testcerts"
)

// startEtcd runs a one-member etcd in this process, on loopback ports
// the kernel picks, its data in dir, without log output, and returns its
// client endpoint.
func startEtcd(dir string) (*embed.Etcd, string, error) {
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg := embed.NewConfig()
	cfg.Name = "clustercount"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true // a demo's data need not survive the machine
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("etcd failed while starting: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, "", fmt.Errorf("etcd not ready after 30s")
	}
	return e, "http://" + e.Clients[0].Addr().String(), nil
}

// freeLoopbackAddr returns a loopback address with a port that was free
// a moment ago, for the coordinator: workers must know it before it
// listens.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// createTopics creates the topics with partitions partitions each.
func createTopics(ctx context.Context, seeds []string, partitions int32, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, t := range topics {
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, t); err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return nil
}

// writeInput writes lines to topic, spread over its partitions in turn.
func writeInput(ctx context.Context, seeds []string, topic string, partitions int32, lines []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(l)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("write the input to %s: %w", topic, err)
	}
	return nil
}

// committedReader reads a topic under read_committed from its start, for
// the whole demo: what a downstream consumer of the job sees.
type committedReader struct {
	cl     *kgo.Client
	done   chan struct{}
	closed sync.Once

	mu    sync.Mutex
	n     int
	bad   int                // values that are no number
	count map[string][]int64 // per word, the counts in the order read
}

func readCommitted(ctx context.Context, seeds []string, topic string) (*committedReader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	r := &committedReader{cl: cl, done: make(chan struct{}), count: map[string][]int64{}}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(rec *kgo.Record) {
				c, err := strconv.ParseInt(string(rec.Value), 10, 64)
				r.mu.Lock()
				if err != nil {
					r.bad++
				}
				r.count[string(rec.Key)] = append(r.count[string(rec.Key)], c)
				r.n++
				r.mu.Unlock()
			})
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	return r, nil
}

// records is how many committed records it has read.
func (r *committedReader) records() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *committedReader) close() {
	r.closed.Do(r.cl.Close)
	<-r.done
}

// check compares what was read with want (each word's number in the
// input): every word's counts must be 1..n, each once, in order.
func (r *committedReader) check(want map[string]int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bad []string
	for w, n := range want {
		cs := r.count[w]
		ok := int64(len(cs)) == n
		for i := 0; ok && i < len(cs); i++ {
			ok = cs[i] == int64(i+1)
		}
		if !ok {
			bad = append(bad, fmt.Sprintf("%q: counts %s, want 1..%d once each", w, short(cs), n))
		}
	}
	for w := range r.count {
		if _, ok := want[w]; !ok {
			bad = append(bad, fmt.Sprintf("%q: not in the input", w))
		}
	}
	if r.bad > 0 {
		bad = append(bad, fmt.Sprintf("%d records whose value is not a count", r.bad))
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("... and %d more", len(bad)-10))
		}
		return fmt.Errorf("the committed output is NOT exactly once (%d records read):\n  %s", r.n, strings.Join(bad, "\n  "))
	}
	return nil
}

// short prints a list of counts, eliding the middle of a long one.
func short(cs []int64) string {
	if len(cs) <= 12 {
		return fmt.Sprint(cs)
	}
	return fmt.Sprintf("%v ... %v (%d)", cs[:6], cs[len(cs)-6:], len(cs))
}

// demoCertificates makes a CA in dir and a certificate of their own for
// each of names, and returns each one's flags: --tls-cert, --tls-key and
// --tls-ca.
func demoCertificates(dir string, names ...string) (map[string][]string, error) {
	ca, err := testcerts.NewCA("clustercount demo CA")
	if err != nil {
		return nil, err
	}
	caFile, err := ca.WriteFile(dir, "ca")
	if err != nil {
		return nil, err
	}
	args := map[string][]string{}
	for _, name := range names {
		leaf, err := ca.Issue(name, "127.0.0.1", "localhost")
		if err != nil {
			return nil, err
		}
		cert, key, err := leaf.WriteFiles(dir, name)
		if err != nil {
			return nil, err
		}
		args[name] = []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", caFile}
	}
	return args, nil
}
