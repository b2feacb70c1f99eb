package sluice

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/codec"
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
