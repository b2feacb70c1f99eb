package sink_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/sink"
)

const writers, perWriter = 4, 500

// writeConcurrently opens `writers` writers of s and has each write
// perWriter values w*perWriter+i (timestamp = value) from its own
// goroutine, then flush with endOfInput and close.
func writeConcurrently(t *testing.T, s sink.Sink[int]) {
	t.Helper()
	ws := make([]sink.Writer[int], writers)
	for i := range ws {
		w, err := s.NewWriter(sink.WriterContext{Subtask: i, Parallelism: writers})
		if err != nil {
			t.Fatalf("NewWriter(%d): %v", i, err)
		}
		ws[i] = w
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for sub, w := range ws {
		wg.Go(func() {
			for i := range perWriter {
				v := sub*perWriter + i
				if err := w.Write(v, int64(v)); err != nil {
					errs <- err
					return
				}
			}
			if err := w.Flush(true); err != nil {
				errs <- err
				return
			}
			if err := w.Close(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestCollectConcurrentWriters(t *testing.T) {
	c := sink.NewCollect[int]()
	writeConcurrently(t, c)
	if c.Len() != writers*perWriter {
		t.Fatalf("Len() = %d, want %d", c.Len(), writers*perWriter)
	}
	vals := c.Values()
	slices.Sort(vals)
	for i, v := range vals {
		if v != i {
			t.Fatalf("sorted Values()[%d] = %d", i, v)
		}
	}
	next := make([]int, writers) // next value expected per subtask
	for i := range next {
		next[i] = i * perWriter
	}
	for _, r := range c.Records() {
		if r.Value != next[r.Subtask] {
			t.Fatalf("subtask %d: got %d, want %d (order within a subtask lost)", r.Subtask, r.Value, next[r.Subtask])
		}
		if r.Timestamp != int64(r.Value) {
			t.Fatalf("record %d has timestamp %d", r.Value, r.Timestamp)
		}
		next[r.Subtask]++
	}
}

func TestCollectZeroValueAndCopies(t *testing.T) {
	var c sink.Collect[string]
	w, err := c.NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("a", 7); err != nil {
		t.Fatal(err)
	}
	vals := c.Values()
	vals[0] = "changed"
	recs := c.Records()
	recs[0].Value = "changed"
	if got := c.Values(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Values() = %v: callers can change the sink's records", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write("b", 0); !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
	if c.Len() != 1 {
		t.Fatalf("Len() = %d after a refused write", c.Len())
	}
}

func TestDiscardConcurrentWriters(t *testing.T) {
	d := sink.NewDiscard[int]()
	writeConcurrently(t, d)
	if got := d.Count(); got != writers*perWriter {
		t.Fatalf("Count() = %d, want %d", got, writers*perWriter)
	}
}

func TestPrintConcurrentWriters(t *testing.T) {
	var buf bytes.Buffer
	p := sink.NewPrint[int](sink.PrintTo(&buf))
	writeConcurrently(t, p)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != writers*perWriter {
		t.Fatalf("%d lines, want %d", len(lines), writers*perWriter)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	for sub := range writers {
		for i := range perWriter {
			want := fmt.Sprintf("%d> %d", sub+1, sub*perWriter+i)
			if !seen[want] {
				t.Fatalf("line %q missing (or interleaved with another)", want)
			}
		}
	}
}

func TestPrintPrefixes(t *testing.T) {
	type point struct{ X, Y int }
	for _, tc := range []struct {
		prefix     string
		subtask, p int
		want       string
	}{
		{"", 0, 1, "{1 2}\n"},
		{"", 1, 3, "2> {1 2}\n"},
		{"out", 0, 1, "out> {1 2}\n"},
		{"out", 2, 3, "out:3> {1 2}\n"},
	} {
		var buf bytes.Buffer
		p := sink.NewPrint[point](sink.PrintTo(&buf), sink.PrintPrefix(tc.prefix))
		w, err := p.NewWriter(sink.WriterContext{Subtask: tc.subtask, Parallelism: tc.p})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(point{1, 2}, 0); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tc.want {
			t.Errorf("prefix %q subtask %d of %d: printed %q, want %q", tc.prefix, tc.subtask, tc.p, buf.String(), tc.want)
		}
	}
}

func TestPrintFlushesBufferedWriter(t *testing.T) {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	w, err := sink.NewPrint[string](sink.PrintTo(bw)).NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("hello", 0); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatal("bufio.Writer flushed early; the test cannot tell whether Flush works")
	}
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "hello\n" {
		t.Fatalf("after Flush the output is %q", buf.String())
	}
}

type failingWriter struct{}

var errDisk = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDisk }

func TestPrintWriteError(t *testing.T) {
	w, err := sink.NewPrint[int](sink.PrintTo(failingWriter{})).NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(1, 0); !errors.Is(err, errDisk) {
		t.Fatalf("Write error %v, want the io.Writer's error", err)
	}
}

func TestInvalidWriterContext(t *testing.T) {
	for name, s := range map[string]sink.Sink[int]{
		"collect": sink.NewCollect[int](),
		"print":   sink.NewPrint[int](),
		"discard": sink.NewDiscard[int](),
	} {
		for _, ctx := range []sink.WriterContext{{Subtask: 0, Parallelism: 0}, {Subtask: 3, Parallelism: 3}, {Subtask: -1, Parallelism: 2}} {
			if _, err := s.NewWriter(ctx); !errors.Is(err, sink.ErrInvalidWriterContext) {
				t.Errorf("%s: NewWriter(%+v) error %v, want ErrInvalidWriterContext", name, ctx, err)
			}
		}
	}
}
