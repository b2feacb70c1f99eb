package api_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testjob"
)

// A server closed while it answers a request (the stop's outcome, read as
// the job ends) stops listening at once but finishes that answer: with
// http.Server.Close the client's request failed, its transport retried on
// a new connection, and `sluice stop` said the server went away (a flake
// of cmd/sluice's TestDocumentedStopFlow on a busy machine).
func TestCloseHTTPServerFinishesTheAnswerInFlight(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inHandler, release := make(chan struct{}), make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-release
		_, _ = io.WriteString(w, "savepoint stored in /sp/savepoint-1")
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	type answer struct {
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{string(b), err}
	}()
	<-inHandler
	closed := make(chan error, 1)
	go func() { closed <- api.CloseHTTPServer(srv) }()
	// Closing has begun once the listener refuses new connections; only
	// then may the handler answer.
	testjob.Await(t, "the listener closed", func() bool {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	})
	close(release)
	a := <-got
	if a.err != nil || a.body != "savepoint stored in /sp/savepoint-1" {
		t.Fatalf("the answer in flight: %q, %v; want it whole", a.body, a.err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("CloseHTTPServer: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}
