package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/operators"
)

// AsyncFunction calls an external service for each record without
// blocking the task, as Flink's AsyncFunction: AsyncInvoke runs on the
// task goroutine, starts the request and returns; the request completes
// the ResultFuture from any goroutine. It may also implement
// AsyncTimeoutHandler, Open(*OperatorContext) error and Close() error.
//
//	lookup := sluice.AsyncFunc[Order, Enriched](func(ctx context.Context, o Order, rf sluice.ResultFuture[Enriched]) {
//		go func() {
//			c, err := customers.Get(ctx, o.CustomerID)
//			if err != nil {
//				rf.CompleteExceptionally(err)
//				return
//			}
//			rf.Complete(Enriched{o, c})
//		}()
//	})
//	enriched := sluice.OrderedWait(orders, lookup, time.Second, 100, sluice.UID("lookup"))
type AsyncFunction[IN, OUT any] = operators.AsyncFunction[IN, OUT]

// AsyncFunc adapts a function to an AsyncFunction.
type AsyncFunc[IN, OUT any] = operators.AsyncFunc[IN, OUT]

// ResultFuture receives the result of one async call: Complete with any
// number of output records, or CompleteExceptionally.
type ResultFuture[OUT any] = operators.ResultFuture[OUT]

// AsyncTimeoutHandler is implemented by an AsyncFunction that decides
// what a timed-out call yields (Flink's AsyncFunction.timeout); without
// it a timeout fails the task with ErrAsyncTimeout.
type AsyncTimeoutHandler[IN, OUT any] = operators.AsyncTimeoutHandler[IN, OUT]

// ErrAsyncTimeout is the error of a call that timed out without a
// timeout handler.
var ErrAsyncTimeout = operators.ErrAsyncTimeout

// AsyncRetryStrategy retries async calls by result or error, with a fixed
// delay or exponential backoff (Flink's AsyncRetryStrategies); build one
// with FixedDelayRetry or ExponentialBackoffRetry and IfResult / IfError.
type AsyncRetryStrategy[OUT any] = operators.AsyncRetryStrategy[OUT]

// FixedDelayRetry retries a call up to maxAttempts times (after the first
// call, as Flink's maxAttempts) with delay between calls; add what to
// retry with IfResult and IfError.
func FixedDelayRetry[OUT any](maxAttempts int, delay time.Duration) AsyncRetryStrategy[OUT] {
	return AsyncRetryStrategy[OUT]{MaxAttempts: maxAttempts, Delay: delay}
}

// ExponentialBackoffRetry retries a call up to maxAttempts times, the
// delays starting at initial and growing by multiplier up to maxDelay
// (Flink's ExponentialBackoffDelayRetryStrategy).
func ExponentialBackoffRetry[OUT any](maxAttempts int, initial, maxDelay time.Duration, multiplier float64) AsyncRetryStrategy[OUT] {
	return AsyncRetryStrategy[OUT]{MaxAttempts: maxAttempts, Delay: initial, MaxDelay: maxDelay, Multiplier: multiplier}
}

// IfResult retries the calls whose results match pred (EmptyResult: none).
func IfResult[OUT any](r AsyncRetryStrategy[OUT], pred func(results []OUT) bool) AsyncRetryStrategy[OUT] {
	r.RetryOnResult = pred
	return r
}

// IfError retries the calls that fail with an error matching pred
// (HasError: any).
func IfError[OUT any](r AsyncRetryStrategy[OUT], pred func(err error) bool) AsyncRetryStrategy[OUT] {
	r.RetryOnError = pred
	return r
}

// EmptyResult matches a call that completed with no record (Flink's
// RetryPredicates.EMPTY_RESULT_PREDICATE).
func EmptyResult[OUT any](results []OUT) bool { return len(results) == 0 }

// HasError matches any error (Flink's HAS_EXCEPTION_PREDICATE).
func HasError(err error) bool { return err != nil }

// OrderedWait runs fn for every record with up to capacity calls in
// flight (Flink's AsyncDataStream.orderedWait; 0 means Flink's default
// 100) and emits the results in the order of the records. timeout bounds
// each record's calls (0: none). At capacity the task stops reading input
// but goes on with checkpoints and timers; results are emitted on the
// task goroutine. The records of the calls in flight at a checkpoint are
// kept in its state and called again on restore.
func OrderedWait[IN, OUT any](s *Stream[IN], fn AsyncFunction[IN, OUT], timeout time.Duration, capacity int, opts ...OpOption) *Stream[OUT] {
	return asyncWait(s, fn, timeout, capacity, nil, true, opts)
}

// UnorderedWait is OrderedWait emitting each result as soon as its call
// completes, but never across a watermark: the results of the records
// before a watermark are all emitted before it (Flink's unorderedWait in
// event time).
func UnorderedWait[IN, OUT any](s *Stream[IN], fn AsyncFunction[IN, OUT], timeout time.Duration, capacity int, opts ...OpOption) *Stream[OUT] {
	return asyncWait(s, fn, timeout, capacity, nil, false, opts)
}

// OrderedWaitWithRetry is OrderedWait with calls retried by the strategy
// (Flink's orderedWaitWithRetry).
func OrderedWaitWithRetry[IN, OUT any](s *Stream[IN], fn AsyncFunction[IN, OUT], timeout time.Duration, capacity int, retry AsyncRetryStrategy[OUT], opts ...OpOption) *Stream[OUT] {
	return asyncWait(s, fn, timeout, capacity, &retry, true, opts)
}

// UnorderedWaitWithRetry is UnorderedWait with calls retried by the
// strategy (Flink's unorderedWaitWithRetry).
func UnorderedWaitWithRetry[IN, OUT any](s *Stream[IN], fn AsyncFunction[IN, OUT], timeout time.Duration, capacity int, retry AsyncRetryStrategy[OUT], opts ...OpOption) *Stream[OUT] {
	return asyncWait(s, fn, timeout, capacity, &retry, false, opts)
}

func asyncWait[IN, OUT any](s *Stream[IN], fn AsyncFunction[IN, OUT], timeout time.Duration, capacity int, retry *AsyncRetryStrategy[OUT], ordered bool, opts []OpOption) *Stream[OUT] {
	name := "AsyncWait(Unordered)"
	if ordered {
		name = "AsyncWait(Ordered)"
	}
	n, _ := newNode[OUT](s.env, name, opts, true)
	switch {
	case fn == nil:
		s.env.addErr(fmt.Errorf("%w: operator %q: no async function", ErrInvalidOption, n.Name))
	case capacity < 0:
		s.env.addErr(fmt.Errorf("%w: operator %q: capacity must not be negative, got %d", ErrInvalidOption, n.Name, capacity))
	case timeout < 0:
		s.env.addErr(fmt.Errorf("%w: operator %q: timeout must not be negative, got %v", ErrInvalidOption, n.Name, timeout))
	}
	if retry != nil {
		if err := retry.Validate(); err != nil {
			s.env.addErr(fmt.Errorf("%w: operator %q: %w", ErrInvalidOption, n.Name, err))
		}
	}
	cfg := operators.AsyncConfig[IN, OUT]{Ordered: ordered, Capacity: capacity, Timeout: timeout, Retry: retry, InCodec: streamCodec(s)}
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewAsyncWait(cfg, cloneFunction(fn), out.(operators.Output[OUT]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[OUT](s.env, n)
}
