package kafkaclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testutil"
)

func TestRetriable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	noHost := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "kafka-0", IsNotFound: true}}
	for _, c := range []struct {
		err       error
		retriable bool
		cause     string
	}{
		{kerr.NotCoordinator, true, "NOT_COORDINATOR"},
		{kerr.CoordinatorNotAvailable, true, "COORDINATOR_NOT_AVAILABLE"},
		{kerr.CoordinatorLoadInProgress, true, "COORDINATOR_LOAD_IN_PROGRESS"},
		{kerr.NotLeaderForPartition, true, "NOT_LEADER_FOR_PARTITION"},
		{kerr.NotEnoughReplicas, true, "NOT_ENOUGH_REPLICAS"},
		{kerr.ConcurrentTransactions, true, "CONCURRENT_TRANSACTIONS"},
		{kerr.InvalidTxnState, false, "INVALID_TXN_STATE"},
		{kerr.ProducerFenced, false, "PRODUCER_FENCED"},
		{kerr.InvalidTransactionTimeout, false, "INVALID_TRANSACTION_TIMEOUT"},
		{refused, true, "connection refused"},
		{fmt.Errorf("unable to initialize a producer ID due to request failures: unable to dial: %w", refused), true, "connection refused"},
		{reset, true, "connection reset"},
		{io.EOF, true, "connection closed by the broker"},
		{io.ErrUnexpectedEOF, true, "connection closed by the broker"},
		{errors.New("the broker connection has died and the request will be retried on a new connection"), true, "connection closed by the broker"},
		{fmt.Errorf("write a record: %w", errors.New("unknown broker")), true, "write a record: unknown broker"},
		{noHost, false, "dial: lookup kafka-0: no such host"},
		{context.Canceled, false, "cancelled"},
		{fmt.Errorf("flush: %w", context.DeadlineExceeded), false, "deadline exceeded"},
		{kgo.ErrClientClosed, false, "client closed"},
		{Permanent(fmt.Errorf("topic t: %w", kerr.UnknownTopicOrPartition)), false, "UNKNOWN_TOPIC_OR_PARTITION"},
		{errors.New("something else"), false, "something else"},
	} {
		if got := Retriable(c.err); got != c.retriable {
			t.Errorf("Retriable(%v) = %v, want %v", c.err, got, c.retriable)
		}
		if got := Cause(c.err); got != c.cause {
			t.Errorf("Cause(%v) = %q, want %q", c.err, got, c.cause)
		}
	}
}

// Retry goes on through retriable failures, logging the first one once
// at INFO, and returns at once on one that is not.
func TestRetryRetriesWhatKafkaCallsRetriable(t *testing.T) {
	logs := &testutil.LogRecorder{}
	r := Retry{Call: "InitProducerId for transactional id p-0-0", Key: -1, Log: slog.New(logs), Backoff: time.Millisecond}
	fails := []error{kerr.CoordinatorNotAvailable, kerr.NotCoordinator, kerr.NotCoordinator}
	n := 0
	err := r.Do(context.Background(), func(context.Context) error {
		n++
		if n <= len(fails) {
			return fails[n-1]
		}
		return nil
	})
	if err != nil || n != len(fails)+1 {
		t.Fatalf("Do: %v after %d attempts, want nil after %d", err, n, len(fails)+1)
	}
	infos := logs.Matching(func(r testutil.LogRecord) bool { return r.Level >= slog.LevelInfo })
	if len(infos) != 1 || infos[0].Attrs["call"] != r.Call || infos[0].Attrs["cause"] != "COORDINATOR_NOT_AVAILABLE" {
		t.Fatalf("INFO and above: %v, want one line naming the call and the first cause", infos)
	}

	n = 0
	err = r.Do(context.Background(), func(context.Context) error { n++; return kerr.ProducerFenced })
	var ce *CallError
	if !errors.As(err, &ce) || n != 1 || !errors.Is(err, kerr.ProducerFenced) || ce.Attempts != 1 {
		t.Fatalf("a fenced producer: %v after %d attempts, want a CallError wrapping PRODUCER_FENCED after 1", err, n)
	}
	if want := "InitProducerId for transactional id p-0-0: PRODUCER_FENCED"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
}

// A call that keeps failing gives up when its budget is spent, with an
// error that says which call, how often, what was retried and why it
// stopped; a cancelled one is context.Canceled.
func TestRetryGivesUpWithTheStory(t *testing.T) {
	r := Retry{Call: "EndTxn(commit) of transactional id p-1-0", Key: -1, Budget: 50 * time.Millisecond,
		BudgetName: "the sink's transaction timeout", Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 34409},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	n := 0
	err := r.Do(context.Background(), func(context.Context) error {
		n++
		if n%2 == 1 {
			return refused
		}
		return kerr.NotCoordinator
	})
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("Do: %v, want a *CallError", err)
	}
	if ce.Attempts != n || n < 3 || ce.GaveUp == "" {
		t.Fatalf("%+v after %d calls: want every attempt counted and why it gave up", ce, n)
	}
	for _, want := range []string{"EndTxn(commit) of transactional id p-1-0", "gave up after", "its time ran out (50ms (the sink's transaction timeout))",
		"retried: connection refused ×", "NOT_COORDINATOR ×"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not match the context's DeadlineExceeded", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	r.Budget = 0
	err = r.Do(ctx, func(context.Context) error { cancel(); return kerr.NotCoordinator })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, kerr.NotCoordinator) || !strings.Contains(err.Error(), "it was cancelled") {
		t.Fatalf("cancelled: %v, want context.Canceled with the last cause", err)
	}
}

// The error of a call names the broker it went to, from the client's
// broker watch.
// fakeClusterClient starts a kfake cluster of brokers brokers and a client
// of it made by a Config (with the broker watch), both closed by t.
func fakeClusterClient(t *testing.T, brokers int, opts ...kfake.Opt) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(brokers)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := &Config{Seeds: c.ListenAddrs(), Logger: slog.New(slog.DiscardHandler)}
	cl, err := cfg.NewClient("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

func TestBrokerOfNamesTheBroker(t *testing.T) {
	c, cl := fakeClusterClient(t, 3, kfake.SeedTopics(1, "t"))
	ctx := testutil.Context(t, 0)
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	id := "x"
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = 60000
	if _, err := req.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	coord := c.CoordinatorFor(id)
	got := BrokerOf(cl, int16(kmsg.InitProducerID), errors.New("some failure"))
	if want := fmt.Sprintf("broker %d at ", coord); !strings.HasPrefix(got, want) {
		t.Fatalf("BrokerOf(InitProducerId) = %q, want %q...", got, want)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, Err: syscall.ECONNREFUSED}
	if got := BrokerOf(cl, int16(kmsg.InitProducerID), refused); got != "broker at 127.0.0.1:1" {
		t.Errorf("BrokerOf(a dial to an unknown address) = %q", got)
	}
}

// A broker that cannot be reached is reported once at INFO however many
// clients dial it, with the cause in words, and once again when it is
// back.
func TestBrokerWatchReportsLostAndBackOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens: connections are refused
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logs := &testutil.LogRecorder{}
	cfg := &Config{Seeds: []string{addr}, Logger: slog.New(logs)}
	ctx := testutil.Context(t, 0)
	for range 2 {
		cl, err := cfg.NewClient("test", kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Ping(ctx); err == nil {
			t.Fatalf("ping %s with nothing listening succeeded", addr)
		}
		cl.Close()
	}
	lost := logs.Matching(func(r testutil.LogRecord) bool { return strings.Contains(r.Message, "unreachable") })
	if want := "kafka: seed broker " + addr + " unreachable: connection refused; requests to it are retried"; len(lost) != 1 || lost[0].Message != want {
		t.Fatalf("lines about the broker lost: %v, want one: %q (all: %v)", lost, want, logs.Records())
	}

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	defer c.Close()
	cl, err := cfg.NewClient("test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	back := logs.Matching(func(r testutil.LogRecord) bool { return strings.Contains(r.Message, "reachable again") })
	if len(back) != 1 || back[0].Attrs["cause"] != "connection refused" {
		t.Fatalf("lines about the broker back: %v, want one", back)
	}
}

// The clients' own lines: franz-go's routine is DEBUG, its warnings about
// retriable errors too (the connectors report the failover), the others
// keep their level.
func TestClientLoggerLevels(t *testing.T) {
	logs := &testutil.LogRecorder{}
	l := newClientLogger(slog.New(logs), "sink-committer")
	if l.Level() != kgo.LogLevelDebug {
		t.Fatalf("Level with a DEBUG handler: %v", l.Level())
	}
	l.Log(kgo.LogLevelInfo, "initializing producer id")
	l.Log(kgo.LogLevelWarn, "unable to open connection to broker", "addr", "127.0.0.1:1", "err",
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	l.Log(kgo.LogLevelError, "abandoning InitProducerID retry due to request ctx quitting")
	l.Log(kgo.LogLevelWarn, "read from broker errored, killing connection after 0 successful responses (is SASL missing?)", "err", errors.New("sasl"))
	l.Log(kgo.LogLevelError, "fatal InitProducerID error, failing all buffered records", "err", kerr.TransactionalIDAuthorizationFailed)
	want := []slog.Level{slog.LevelDebug, slog.LevelDebug, slog.LevelDebug, slog.LevelWarn, slog.LevelError}
	recs := logs.Records()
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d: %v", len(recs), len(want), recs)
	}
	for i, r := range recs {
		if r.Level != want[i] || r.Attrs["component"] != "kafka-client" || r.Attrs["client"] != "sink-committer" {
			t.Errorf("record %d: %v, want level %v with component=kafka-client client=sink-committer", i, r, want[i])
		}
	}
	if got := newClientLogger(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})), "x").Level(); got != kgo.LogLevelWarn {
		t.Errorf("Level with an INFO handler: %v, want WARN (franz-go's INFO lines would be DEBUG)", got)
	}
}

// A connection closed before its first answer is a misconfiguration (TLS
// or SASL) to a client no broker ever answered, and fails at once; to a
// client whose brokers answered before it is a broker stopping under the
// call (the broker failover test met it in InitProducerId), and retried.
func TestRetryFirstReadEOFOnlyAfterAnAnswer(t *testing.T) {
	_, cl := fakeClusterClient(t, 1)
	eof := func() error { return fmt.Errorf("init: %w", &kgo.ErrFirstReadEOF{}) }
	try := func() (int, error) {
		n := 0
		err := Retry{Call: "InitProducerId", Client: cl, Key: int16(kmsg.InitProducerID), Backoff: time.Millisecond}.Do(context.Background(),
			func(context.Context) error {
				if n++; n == 1 {
					return eof()
				}
				return nil
			})
		return n, err
	}
	if n, err := try(); err == nil || n != 1 || !errors.As(err, new(*kgo.ErrFirstReadEOF)) {
		t.Fatalf("before any answer: %v after %d attempts, want the EOF after 1", err, n)
	}
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(testutil.Context(t, 0), cl); err != nil {
		t.Fatal(err)
	}
	if n, err := try(); err != nil || n != 2 {
		t.Fatalf("after an answer: %v after %d attempts, want nil after 2", err, n)
	}
	if err := (Retry{Call: "x", Client: cl, Key: -1, Backoff: time.Millisecond}).Do(context.Background(),
		func(context.Context) error { return Permanent(eof()) }); err == nil {
		t.Fatal("a permanent EOF was retried to success")
	}
}
