package kafkaclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Retriable reports whether a Kafka call that failed with err may succeed
// when made again, as Kafka's clients decide: an error code Kafka marks
// retriable (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
// COORDINATOR_LOAD_IN_PROGRESS, NOT_LEADER_OR_FOLLOWER,
// LEADER_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...),
// CONCURRENT_TRANSACTIONS (the id's previous transaction is still
// completing), and the network failing under the call: a connection
// refused or reset (a broker restarting or gone), a connection closed
// mid-request, a timeout, franz-go's own "the broker connection died"
// answers. A context that ended, a closed client and every other error
// code are not retriable.
func Retriable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, kgo.ErrClientClosed) || errors.As(err, new(*permanentError)) {
		return false
	}
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
		return ke.Retriable || ke == kerr.ConcurrentTransactions
	}
	if errors.As(err, new(*kgo.ErrFirstReadEOF)) {
		// EOF before the first answer: TLS or SASL misconfigured, as
		// franz-go reads it.
		return false
	}
	if ne := (*net.OpError)(nil); errors.As(err, &ne) {
		var dns *net.DNSError
		return !(errors.As(err, &dns) && dns.IsNotFound) && !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.EPERM)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	if te := (interface{ Timeout() bool })(nil); errors.As(err, &te) && te.Timeout() {
		return true
	}
	// franz-go's unexported errors for a request to retry elsewhere.
	msg := err.Error()
	for _, s := range []string{
		"the broker connection has died",     // errChosenBrokerDead
		"broker replied that the controller", // errUnknownController
		"has broker coordinator",             // errUnknownCoordinator
		"unknown broker",                     // errUnknownBroker: gone from the metadata
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// brokerWentAway says that err, a connection closed before its first
// answer (which Retriable takes for TLS or SASL misconfigured), came to a
// client whose brokers answered before: a broker stopping while the
// client connected to it, and the call may go through elsewhere or later.
func brokerWentAway(cl *kgo.Client, err error) bool {
	return errors.As(err, new(*kgo.ErrFirstReadEOF)) && !errors.As(err, new(*permanentError)) && answeredBefore(cl)
}

// Permanent marks err as not retriable whatever it wraps: a connector
// that knows better than the error code (a topic that does not exist is
// misnamed, not still spreading) says so.
func Permanent(err error) error { return &permanentError{err} }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Cause says in a few words why a Kafka call failed: the error code's
// name ("NOT_COORDINATOR"), or what the network did ("connection
// refused", "connection reset", "connection closed by the broker",
// "timed out").
func Cause(err error) string {
	switch ke := (*kerr.Error)(nil); {
	case err == nil:
		return ""
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), strings.Contains(err.Error(), "the broker connection has died"):
		return "connection closed by the broker"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	}
	if te := (interface{ Timeout() bool })(nil); errors.As(err, &te) && te.Timeout() {
		return "timed out"
	}
	if ne := (*net.OpError)(nil); errors.As(err, &ne) && ne.Err != nil {
		return ne.Op + ": " + ne.Err.Error()
	}
	if s := err.Error(); len(s) <= 60 {
		return s
	}
	return err.Error()[:60] + "..."
}

// Retry makes one Kafka call until it succeeds, fails with an error that
// is not Retriable, or its budget is spent, with exponential backoff and
// jitter between attempts (franz-go's own retries run inside each attempt).
// The first retriable failure is logged once at INFO, naming the call, the
// broker and the cause; later attempts and the recovery at DEBUG (the
// client's broker watch logs a broker lost and back once per process).
type Retry struct {
	// Call names the call in logs and errors, as Kafka's API names it,
	// with what it is about: "InitProducerId for transactional id x".
	Call string
	// Client is the client the call goes through, for the broker it went
	// to (see BrokerOf); nil when not known.
	Client *kgo.Client
	// Key is the call's Kafka request key (kmsg.InitProducerID, ...),
	// for the broker; -1 when the call makes several requests.
	Key int16
	// Budget bounds the time spent on the call, attempts and backoff
	// (the transaction timeout for a call of a transaction); 0: until ctx
	// is done. The deadline is also the context of each attempt.
	Budget time.Duration
	// BudgetName says what the budget is, for the error ("the transaction
	// timeout").
	BudgetName string
	// Log receives the retry's lines; nil logs nothing.
	Log *slog.Logger
	// Backoff is the first pause (default 100 ms), doubling up to
	// MaxBackoff (default 2 s).
	Backoff, MaxBackoff time.Duration
}

// Do runs fn as the Retry says. Its error is a *CallError unless fn
// succeeds.
func (r Retry) Do(ctx context.Context, fn func(context.Context) error) error {
	start := time.Now()
	if r.Budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Budget)
		defer cancel()
	}
	backoff := cmpOr(r.Backoff, 100*time.Millisecond)
	maxBackoff := max(cmpOr(r.MaxBackoff, 2*time.Second), backoff)
	ce := &CallError{Call: r.Call}
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		ce.Attempts = attempt
		if err == nil {
			if attempt > 1 && r.Log != nil {
				r.Log.Debug("kafka: call went through after retries", "call", r.Call, "attempts", attempt,
					"elapsed", time.Since(start).Round(time.Millisecond), "retried", ce.retried())
			}
			return nil
		}
		ce.Elapsed = time.Since(start)
		if cerr := ctx.Err(); cerr != nil {
			// The attempt ended with the budget or the caller's
			// context: the error worth reporting is the last one
			// retried, if any.
			ce.ctxErr = cerr
			if ce.Err == nil {
				ce.Err = err
			}
			ce.GaveUp = r.gaveUp(cerr, ce.Elapsed)
			return ce
		}
		ce.Err = err
		ce.Broker = BrokerOf(r.Client, r.Key, err)
		if !Retriable(err) && !brokerWentAway(r.Client, err) {
			return ce
		}
		ce.note(Cause(err))
		if attempt == 1 && r.Log != nil {
			r.Log.Info("kafka: call failed, retrying", "call", r.Call, "broker", ce.Broker, "cause", Cause(err),
				"for_up_to", r.budgetText())
		} else if r.Log != nil {
			r.Log.Debug("kafka: call failed again, retrying", "call", r.Call, "attempt", attempt, "broker", ce.Broker, "err", err)
		}
		// Jitter of ±20 %, as franz-go's.
		pause := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			ce.Elapsed, ce.ctxErr = time.Since(start), ctx.Err()
			ce.GaveUp = r.gaveUp(ctx.Err(), ce.Elapsed)
			return ce
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (r Retry) budgetText() string {
	if r.Budget <= 0 {
		return "until cancelled"
	}
	if r.BudgetName != "" {
		return fmt.Sprintf("%v (%s)", r.Budget, r.BudgetName)
	}
	return r.Budget.String()
}

// gaveUp says why the retries stopped, given the context's error.
func (r Retry) gaveUp(cerr error, elapsed time.Duration) string {
	switch {
	case !errors.Is(cerr, context.DeadlineExceeded):
		return "it was cancelled"
	case r.Budget > 0 && elapsed >= r.Budget:
		return "its time ran out (" + r.budgetText() + ")"
	}
	return "its caller's deadline passed"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// CallError is the error of a Kafka call that Retry gave up on: which
// call, which broker, how often it was tried and with what causes, and
// the last error, which it wraps.
type CallError struct {
	// Call is Retry.Call.
	Call string
	// Broker is the broker of the last attempt ("broker 2 at
	// 127.0.0.1:9092"), "" when not known.
	Broker string
	// Attempts is the number of attempts made.
	Attempts int
	// Elapsed is the time from the first attempt to the end.
	Elapsed time.Duration
	// Causes lists the causes of the retried failures in the order they
	// first happened, with how many times each.
	Causes []CauseCount
	// GaveUp says why the retries stopped while the error was still
	// retriable ("its time ran out (15m0s (the transaction timeout))",
	// "it was cancelled"); "" when the last error was not retriable.
	GaveUp string
	// Err is the last attempt's error (the last one retried when the
	// call's context ended during an attempt).
	Err error
	// ctxErr is the context's error when it ended the call.
	ctxErr error
}

// CauseCount is one cause of retried failures and how often it happened.
type CauseCount struct {
	Cause string
	N     int
}

func (e *CallError) note(cause string) {
	for i := range e.Causes {
		if e.Causes[i].Cause == cause {
			e.Causes[i].N++
			return
		}
	}
	e.Causes = append(e.Causes, CauseCount{cause, 1})
}

func (e *CallError) retried() string {
	parts := make([]string, 0, len(e.Causes))
	for _, c := range e.Causes {
		parts = append(parts, fmt.Sprintf("%s ×%d", c.Cause, c.N))
	}
	return strings.Join(parts, ", ")
}

func (e *CallError) Error() string {
	var b strings.Builder
	b.WriteString(e.Call)
	if e.Broker != "" {
		fmt.Fprintf(&b, " (%s)", e.Broker)
	}
	switch {
	case e.GaveUp != "":
		fmt.Fprintf(&b, ": gave up after %d attempt%s in %v because %s", e.Attempts, plural(e.Attempts), e.Elapsed.Round(time.Millisecond), e.GaveUp)
	case e.Attempts > 1:
		fmt.Fprintf(&b, ": failed at attempt %d after %v", e.Attempts, e.Elapsed.Round(time.Millisecond))
	}
	if len(e.Causes) > 0 {
		fmt.Fprintf(&b, " (retried: %s)", e.retried())
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the last error and, when the call's context ended it,
// the context's error (context.Canceled when the task was cancelled).
func (e *CallError) Unwrap() []error {
	if e.ctxErr != nil && !errors.Is(e.Err, e.ctxErr) {
		return []error{e.Err, e.ctxErr}
	}
	return []error{e.Err}
}
