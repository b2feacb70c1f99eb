package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/state"
)

// The example runs to its end on the embedded broker and fake registry,
// and its own check of the output passes.
func TestAvroProtoExample(t *testing.T) {
	if err := run(context.Background(), 120, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// The running totals alone, in a harness: per customer, one total per
// order, growing, as the example's own check wants them; and the state a
// customer ends with.
func TestRunningTotals(t *testing.T) {
	in := orders(60)
	h := sluicetest.KeyedProcess(t, func(o Order) string { return o.Customer }, sluice.KeyedProcessFunction[string, Order, Running](&runningTotals{}),
		sluicetest.WithParallelism(2))
	for _, o := range in {
		h.ProcessElement(o, sluicetest.NoTimestamp)
	}
	got := map[string][]Running{}
	for _, r := range h.Values() {
		got[r.Customer] = append(got[r.Customer], r)
	}
	if err := check(got, in); err != nil {
		t.Fatal(err)
	}
	last := got["ada"][len(got["ada"])-1]
	if acc, _ := sluicetest.Value(h, "ada", state.ValueStateDescriptor[Running]{Name: "running"}); acc != last {
		t.Fatalf("ada's state %v, last total %v", acc, last)
	}
}

// The check refuses a duplicate, a missing total and a wrong sum.
func TestCheckRefuses(t *testing.T) {
	in := orders(20)
	good := map[string][]Running{}
	for _, o := range in {
		w := good[o.Customer]
		prev := Running{Customer: o.Customer}
		if len(w) > 0 {
			prev = w[len(w)-1]
		}
		good[o.Customer] = append(w, Running{o.Customer, prev.Orders + 1, prev.Cents + o.AmountCents})
	}
	if err := check(good, in); err != nil {
		t.Fatalf("the right totals refused: %v", err)
	}
	c := in[0].Customer
	for name, mutate := range map[string]func(m map[string][]Running){
		"duplicate": func(m map[string][]Running) { m[c] = append(m[c], m[c][len(m[c])-1]) },
		"missing":   func(m map[string][]Running) { m[c] = m[c][1:] },
		"sum":       func(m map[string][]Running) { m[c][0].Cents++ },
	} {
		bad := map[string][]Running{}
		for k, v := range good {
			bad[k] = append([]Running(nil), v...)
		}
		mutate(bad)
		if err := check(bad, in); err == nil || !strings.Contains(err.Error(), c) {
			t.Fatalf("%s: check said %v", name, err)
		}
	}
}
