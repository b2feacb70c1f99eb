package kafkatable_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/table"
	"github.com/sluicehq/sluice/table/kafkatable"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// account is the value of the tests' table.
type account struct {
	Owner   string `json:"owner"`
	Balance int64  `json:"balance"`
}

const (
	accounts = 30
	changes  = 600
)

// inputChange is change i of the input changelog: account i%30 gets a
// new balance, every seventh change of an account deletes it.
func inputChange(i int) table.Change[string, account] {
	k := "acct-" + strconv.Itoa(i%accounts)
	if (i/accounts)%7 == 3 {
		return table.Tombstone[string, account](k)
	}
	return table.Upsert(k, account{Owner: k, Balance: int64(i)})
}

// plainChangelog is the plain evaluation of a materialized table's
// changelog: per key, its upserts and the deletes of a value it has.
func plainChangelog() (perKey map[string][]string, final map[string]account) {
	perKey, final = map[string][]string{}, map[string]account{}
	for i := range changes {
		c := inputChange(i)
		if c.Delete {
			if _, ok := final[c.Key]; !ok {
				continue
			}
			delete(final, c.Key)
			perKey[c.Key] = append(perKey[c.Key], "deleted")
			continue
		}
		final[c.Key] = c.Value
		perKey[c.Key] = append(perKey[c.Key], strconv.FormatInt(c.Value.Balance, 10))
	}
	return perKey, final
}

// TestChangelogTopicRoundTrip: a table read from a changelog topic,
// materialized (queryable) and written to another changelog topic,
// exactly once across a failure: the committed changelog has each key's
// changes once, in order; a View rebuilt from it, the job's answers to
// queries, and the table a second job restores from a savepoint of the
// first are the same table, the plain evaluation's.
func TestChangelogTopicRoundTrip(t *testing.T) {
	seeds := testutil.KafkaCluster(t, 3, "accounts", "balances")
	ctx := testutil.Context(t, testutil.SafetyNet)
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ser := kafkatable.Serializer("accounts", codec.String{}, codec.JSON[account]{})
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			r, err := ser(inputChange(i))
			if err != nil {
				t.Fatal(err)
			}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first half now, the second once the job committed a part of
	// the first: the failure, in the second, has committed output behind
	// it and output after its latest checkpoint to undo.
	produce(0, changes/2)
	perKey, final := plainChangelog()

	// A view of the output, running from before the job starts.
	view := kafkatable.NewView(seeds, "balances", codec.String{}, codec.JSON[account]{}, kafkatable.ViewLogger(quiet))
	vctx, stopView := context.WithCancel(ctx)
	viewDone := make(chan error, 1)
	go func() { viewDone <- view.Run(vctx) }()
	defer func() {
		stopView()
		if err := <-viewDone; err != nil {
			t.Errorf("view: %v", err)
		}
	}()

	var failed atomic.Bool
	build := func(opts ...sluice.Option) *sluice.Environment {
		env := sluice.NewEnvironment(append([]sluice.Option{sluice.WithJobName("accounts"), sluice.WithParallelism(2), sluice.WithLogger(quiet),
			sluice.WithCheckpointing(30*time.Millisecond, t.TempDir()),
			sluice.WithRestartStrategy(sluice.FixedDelayRestart(3, 20*time.Millisecond))}, opts...)...)
		src, err := kafkatable.NewSource(seeds, "accounts", codec.String{}, codec.JSON[account]{}, kafkasource.Logger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		in := sluice.FromSource(env, src, sluice.NoWatermarks[table.Change[string, account]](), "accounts", sluice.UID("accounts"))
		var seen atomic.Int64
		in = sluice.Map(in, func(c table.Change[string, account]) (table.Change[string, account], error) {
			if seen.Add(1) == 3*changes/4 && failed.CompareAndSwap(false, true) {
				return c, errors.New("injected failure")
			}
			return c, nil
		}, sluice.UID("maybe-fail"))
		balances := table.Materialize(table.FromChangelog(in), "balances")
		snk, err := kafkatable.NewSink(seeds, "balances", codec.String{}, codec.JSON[account]{}, kafkasink.Logger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		sluice.SinkTo(balances.Changes(), snk, sluice.UID("balances-changelog"))
		return env
	}
	job, err := build().ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		job.Cancel()
		_ = job.Wait()
	}()
	testutil.Await(t, "a part of the first half committed", func() bool { return view.Len() > 0 })
	produce(changes/2, changes)
	testutil.Await(t, "the view equal to the plain evaluation", func() bool { return maps.Equal(view.Snapshot(), final) })
	if !failed.Load() || job.Restarts() == 0 {
		t.Fatalf("the failure was not injected (restarts %d)", job.Restarts())
	}
	if err := view.WaitRecovered(ctx); err != nil {
		t.Fatal(err)
	}
	if got := queryAll(t, ctx, job); !maps.Equal(got, final) {
		t.Fatalf("the running job answers\n%v\nwant\n%v", got, final)
	}

	sp, err := job.StopWithSavepoint(ctx, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	// Exactly once: each key's committed changes, in order, once.
	if got := committedPerKey(t, seeds, "balances"); !maps.EqualFunc(got, perKey, slices.Equal) {
		t.Fatalf("committed changelog per key\n%v\nwant\n%v", got, perKey)
	}
	rebuilt, err := kafkatable.ReadTable(ctx, seeds, "balances", codec.String{}, codec.JSON[account]{}, kafkatable.ViewLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	job2, err := build(sluice.WithRestoreFrom(sp)).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		job2.Cancel()
		_ = job2.Wait()
	}()
	testutil.Await(t, "the restored job running", func() bool { return job2.Status() == runtime.JobRunning })
	if restored := queryAll(t, ctx, job2); !maps.Equal(restored, rebuilt) || !maps.Equal(rebuilt, final) {
		t.Fatalf("the table restored from the savepoint\n%v\nthe one rebuilt from its changelog topic\n%v\nwant\n%v", restored, rebuilt, final)
	}
}

// queryAll asks the job for every account.
func queryAll(t *testing.T, ctx context.Context, job *sluice.Job) map[string]account {
	t.Helper()
	got := map[string]account{}
	for i := range accounts {
		k := "acct-" + strconv.Itoa(i)
		var res sluice.QueryResult
		testutil.Await(t, "an answer for "+k, func() bool {
			var err error
			res, err = job.QueryState(ctx, "balances", k)
			if err != nil && !errors.Is(err, sluice.ErrQueryUnavailable) {
				t.Fatalf("query %s: %v", k, err)
			}
			return err == nil
		})
		if res.Found {
			var a account
			if err := json.Unmarshal(res.Value, &a); err != nil {
				t.Fatal(err)
			}
			got[k] = a
		}
	}
	return got
}

// committedPerKey reads the changelog topic under read_committed, per
// key in order: each upsert's balance or "deleted".
func committedPerKey(t *testing.T, seeds []string, topic string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := kafkatable.ReadChangelog(testutil.Context(t, testutil.SafetyNet), seeds, topic, codec.String{}, codec.JSON[account]{},
		func(c table.Change[string, account]) {
			if c.Delete {
				out[c.Key] = append(out[c.Key], "deleted")
			} else {
				out[c.Key] = append(out[c.Key], strconv.FormatInt(c.Value.Balance, 10))
			}
		}, kafkatable.ViewLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
