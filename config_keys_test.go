package sluice

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/source"
)

func TestDefaultCodecKey(t *testing.T) {
	for v, want := range map[string]codec.Format{"json": codec.FormatJSON, "BINARY": codec.FormatBinary} {
		c := NewConfiguration()
		if err := c.Set("pipeline.default-codec", v); err != nil {
			t.Fatal(err)
		}
		e := NewEnvironment(WithDefaultCodec(codec.FormatJSON - want)) // the other one first
		WithConfiguration(c)(e)
		if len(e.errs) > 0 || e.codecFormat != want {
			t.Errorf("%s: format %v (errors %v), want %v", v, e.codecFormat, e.errs, want)
		}
	}
	c := NewConfiguration()
	err := c.Set("pipeline.default-codec", "avro")
	if err == nil {
		e := NewEnvironment()
		WithConfiguration(c)(e)
		err = errors.Join(e.errs...)
	}
	if !errors.Is(err, codec.ErrUnknownFormatName) || !strings.Contains(err.Error(), "pipeline.default-codec") {
		t.Errorf("avro: %v, want an error naming the key", err)
	}
	if e := NewEnvironment(WithDefaultCodec(codec.Format(9))); !errors.Is(errors.Join(e.errs...), ErrInvalidOption) {
		t.Errorf("format 9: %v", e.errs)
	}
}

// TestWindowBufferKey: table.exec.window-agg.buffer-size-limit sets the
// session windows' buffer (default DefaultWindowBufferLimit, 0 turns it
// off), and the operator is built with it; a negative limit is refused.
func TestWindowBufferKey(t *testing.T) {
	if e := NewEnvironment(); e.windowBuffer != DefaultWindowBufferLimit {
		t.Fatalf("default window buffer %d, want %d", e.windowBuffer, DefaultWindowBufferLimit)
	}
	for v, want := range map[string]int{"0": 0, "7": 7} {
		c := NewConfiguration()
		if err := c.Set("table.exec.window-agg.buffer-size-limit", v); err != nil {
			t.Fatal(err)
		}
		e := NewEnvironment()
		WithConfiguration(c)(e)
		if len(e.errs) > 0 || e.windowBuffer != want {
			t.Errorf("%s: limit %d (errors %v), want %d", v, e.windowBuffer, e.errs, want)
		}
		ks := KeyBy(FromSource(e, source.Source[int](source.FromSlice([]int{1})), NoWatermarks[int](), "ints"), func(v int) int { return v })
		s := ReduceWindow(Window(ks, EventTimeSessionWindows(time.Second)), func(a, b int) (int, error) { return a + b, nil })
		op, _, err := s.from[0].Build(operators.Output[int](discardInts{}))
		if err != nil {
			t.Fatal(err)
		}
		if got := op.(*operators.WindowOperator[int, int, int, int]).BufferLimit(); got != want {
			t.Errorf("%s: the operator's limit %d, want %d", v, got, want)
		}
	}
	c := NewConfiguration()
	err := c.Set("table.exec.window-agg.buffer-size-limit", "-1")
	if err == nil {
		e := NewEnvironment()
		WithConfiguration(c)(e)
		err = errors.Join(e.errs...)
	}
	if err == nil || !strings.Contains(err.Error(), "table.exec.window-agg.buffer-size-limit") {
		t.Errorf("-1: %v, want an error naming the key", err)
	}
}

type discardInts struct{}

func (discardInts) Collect(int, int64) error  { return nil }
func (discardInts) EmitWatermark(int64) error { return nil }
