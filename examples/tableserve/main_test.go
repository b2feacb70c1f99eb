package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The demo serves the table, asks itself for pages over HTTP while the
// job runs, and checks that every answer is the page asked for with a
// count that only grows.
func TestTableServeDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, "127.0.0.1:0", true, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "round 5: page-7 has") {
		t.Fatalf("demo output:\n%s", out.String())
	}
}
