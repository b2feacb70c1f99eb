// Command tableserve serves a table's values over HTTP while the job that
// computes it runs: page views are counted per page into a materialized
// table (table.Materialize, queryable under "page-views"), and GET
// /pages/{page} answers a page's current count, read from the subtask
// that owns the page (sluice.Job.QueryState) — the current value, not a
// checkpointed one.
//
//	go run ./examples/tableserve              # a demo: serves, asks itself, stops
//	go run ./examples/tableserve -serve       # serves until Ctrl-C
//	curl localhost:8090/pages/page-3
//
// The same answers come from the job's REST API (GET
// /jobs/:jobid/queryable-state/page-views?key=page-3, api.Client's
// QueryState) when the job runs with one (runner.Run).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/table"
)

// View is a page view.
type View struct {
	Page string
	User int64
}

// PageStats is a page's row of the table.
type PageStats struct {
	Page  string `json:"page"`
	Views int64  `json:"views"`
}

const pages = 20

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to serve on")
	serve := flag.Bool("serve", false, "serve until interrupted (default: a short demo)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr, !*serve, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "tableserve: %v\n", err)
		os.Exit(1)
	}
}

// pageViews is the job: views from a generator (2 000 a second), counted
// per page into the materialized table "page-views".
func pageViews(chkDir string) *sluice.Environment {
	env := sluice.NewEnvironment(
		sluice.WithJobName("tableserve"),
		sluice.WithParallelism(2),
		sluice.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))),
		sluice.WithCheckpointing(time.Second, chkDir),
	)
	gen := source.NewDatagen(func(i int64) View { return View{Page: fmt.Sprintf("page-%d", i*7%pages), User: i % 1000} },
		source.DatagenRate(2000))
	views := sluice.FromSource(env, gen, sluice.NoWatermarks[View](), "views", sluice.UID("views"))
	ones := sluice.Map(views, func(v View) (table.Change[string, PageStats], error) {
		return table.Upsert(v.Page, PageStats{Page: v.Page, Views: 1}), nil
	}, sluice.UID("ones"))
	counts := sluice.Reduce(sluice.KeyBy(ones, func(c table.Change[string, PageStats]) string { return c.Key }),
		func(a, b table.Change[string, PageStats]) (table.Change[string, PageStats], error) {
			return table.Upsert(a.Key, PageStats{Page: a.Key, Views: a.Value.Views + b.Value.Views}), nil
		}, sluice.UID("count"))
	t := table.Materialize(table.FromChangelog(counts), "page-views")
	sluice.SinkTo(t.Changes(), sink.NewDiscard[table.Change[string, PageStats]](), sluice.UID("discard"))
	return env
}

// handler answers GET /pages/{page} from the running job: 200 with the
// page's row, 404 for a page without views, 503 while the job restarts.
func handler(job *sluice.Job) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pages/{page}", func(w http.ResponseWriter, r *http.Request) {
		res, err := job.QueryState(r.Context(), "page-views", r.PathValue("page"))
		switch {
		case errors.Is(err, sluice.ErrQueryUnavailable):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case !res.Found:
			http.Error(w, "no views of "+r.PathValue("page"), http.StatusNotFound)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(res.Value)
		}
	})
	return mux
}

// run starts the job and serves its table on addr; as a demo it asks
// itself for a few pages, prints the answers, checks that each page's
// count only grows, and stops.
func run(ctx context.Context, addr string, demo bool, out io.Writer) error {
	chkDir, err := os.MkdirTemp("", "sluice-tableserve-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(chkDir)
	job, err := pageViews(chkDir).ExecuteAsync(ctx)
	if err != nil {
		return err
	}
	defer func() {
		job.Cancel()
		_ = job.Wait()
	}()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(job), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "Serving the page-views table at %s/pages/{page} while the job runs.\n", base)
	if !demo {
		<-ctx.Done()
		return nil
	}
	last := map[string]int64{}
	for round := range 5 {
		time.Sleep(300 * time.Millisecond)
		for _, page := range []string{"page-0", "page-3", "page-7"} {
			st, err := get(ctx, base+"/pages/"+page)
			if err != nil {
				return err
			}
			if st.Page != page || st.Views < last[page] {
				return fmt.Errorf("GET /pages/%s answered %+v after %d views", page, st, last[page])
			}
			last[page] = st.Views
			fmt.Fprintf(out, "round %d: %s has %d views\n", round+1, page, st.Views)
		}
	}
	if last["page-0"] == 0 {
		return errors.New("page-0 has no views after the demo")
	}
	return nil
}

// get asks for a page, again while the answer is 404 (no view yet) or
// 503 (restarting).
func get(ctx context.Context, url string) (PageStats, error) {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return PageStats{}, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return PageStats{}, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return PageStats{}, err
		}
		switch resp.StatusCode {
		case http.StatusOK:
			var st PageStats
			return st, json.Unmarshal(body, &st)
		case http.StatusNotFound, http.StatusServiceUnavailable:
			select {
			case <-ctx.Done():
				return PageStats{}, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		default:
			return PageStats{}, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
		}
	}
}
