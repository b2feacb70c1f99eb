package testjob

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/sluicehq/sluice"
)

// QuietLogger keeps a job's start and stop logs out of the test output;
// with SLUICE_TEST_LOGS set in the environment they go to slog.Default.
func QuietLogger() sluice.Option {
	if os.Getenv("SLUICE_TEST_LOGS") != "" {
		return sluice.WithLogger(slog.Default())
	}
	return sluice.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// NewEnv returns an environment with quiet logs (QuietLogger) and the
// options, which may set another logger.
func NewEnv(opts ...sluice.Option) *sluice.Environment {
	return sluice.NewEnvironment(append([]sluice.Option{QuietLogger()}, opts...)...)
}

// Execute runs the job to its end under the safety net and returns how it
// ended; a job still running at the safety net fails t.
func Execute(t testing.TB, env *sluice.Environment) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), SafetyNet)
	defer cancel()
	err := env.Execute(ctx)
	if ctx.Err() != nil {
		t.Fatalf("job did not end within the safety net of %v: %v", SafetyNet, err)
	}
	return err
}

// MustExecute runs the job to its end (Execute) and fails t if it fails.
func MustExecute(t testing.TB, env *sluice.Environment) {
	t.Helper()
	if err := Execute(t, env); err != nil {
		t.Fatalf("job failed: %v", err)
	}
}

// MustStart starts the job under the safety net; when the test ends the
// job is cancelled (if still running) and waited for.
func MustStart(t testing.TB, env *sluice.Environment) *sluice.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), SafetyNet)
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		cancel()
		t.Fatalf("ExecuteAsync: %v", err)
	}
	t.Cleanup(func() {
		job.Cancel()
		_ = job.Wait()
		cancel()
	})
	return job
}

// StopWithSavepoint stops the job with a savepoint into a directory of
// the test (without draining), waits for it to end, and returns the
// savepoint's path.
func StopWithSavepoint(t testing.TB, job *sluice.Job) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), SafetyNet)
	defer cancel()
	sp, err := job.StopWithSavepoint(ctx, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("stopped job: %v", err)
	}
	return sp
}
