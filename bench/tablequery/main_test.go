package main

import (
	"context"
	"testing"
	"time"
)

// A short run of both ways answers queries with values.
func TestTableQueryRuns(t *testing.T) {
	for _, via := range []string{"job", "rest"} {
		res, err := run(context.Background(), options{keys: 100, rate: 200, records: 2000, duration: 300 * time.Millisecond, warmup: 100 * time.Millisecond, via: via})
		if err != nil {
			t.Fatal(err)
		}
		if res.found == 0 || res.errs != 0 {
			t.Fatalf("via %s: %v", via, res)
		}
		t.Log(res)
	}
}
