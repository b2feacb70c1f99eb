package main

import (
	"strings"
	"testing"
)

// The example runs both runs, resumes from a checkpoint of the first, and
// its own check of the committed output passes; the check itself refuses
// a duplicate and a missing window.
func TestWindowResume(t *testing.T) {
	var out strings.Builder
	if err := run(8, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"run 1 suspended after checkpoint", "run 2 resumed from checkpoint", "output exact: 120 windows"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	want := expected()
	p := &printer{out: &strings.Builder{}}
	if err := check(append(want[:len(want):len(want)], want[0]), p); err == nil || !strings.Contains(err.Error(), "2 times") {
		t.Errorf("a duplicate window: %v", err)
	}
	if err := check(want[1:], p); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing window: %v", err)
	}
}
