package sluicetest_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

// failureOf runs fn as a user's test and returns what the kit failed it
// with; it fails t if the kit passed it.
func failureOf(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	return testutil.FailureOf(t, fn)
}
