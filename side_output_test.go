package sluice_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// oddTag is a side output of strings.
var oddTag = sluice.NewOutputTag[string]("odd")

// Side outputs that cannot work are refused: a tag without a name, a name
// of two types, a union, an operator without side outputs.
func TestSideOutputErrors(t *testing.T) {
	build := func(f func(env *sluice.Environment, s *sluice.Stream[int64])) error {
		env := testjob.NewEnv()
		s := sluice.FromSource(env, source.FromSlice(tenNumbers), sluice.NoWatermarks[int64](), "nums")
		f(env, s)
		return testjob.Execute(t, env)
	}
	keyed := func(s *sluice.Stream[int64]) *sluice.Stream[int64] {
		return sluice.Process[int64, int64, int64](sluice.KeyBy(s, identity), sluice.ProcessFunc[int64, int64, int64](
			func(_ *sluice.KeyedContext[int64], v int64, out sluice.Collector[int64]) error {
				out.Collect(v)
				return nil
			}))
	}
	cases := []struct {
		name  string
		f     func(env *sluice.Environment, s *sluice.Stream[int64])
		want  string
		isOpt bool
	}{
		{"empty name", func(env *sluice.Environment, s *sluice.Stream[int64]) {
			p := keyed(s)
			sluice.SinkTo(p, sink.NewDiscard[int64]())
			sluice.SinkTo(sluice.SideOutput(p, sluice.NewOutputTag[int64]("")), sink.NewDiscard[int64]())
		}, "needs a name", true},
		{"other type", func(env *sluice.Environment, s *sluice.Stream[int64]) {
			p := keyed(s)
			sluice.SinkTo(sluice.SideOutput(p, oddTag), sink.NewDiscard[string]())
			sluice.SinkTo(sluice.SideOutput(p, sluice.NewOutputTag[int64]("odd")), sink.NewDiscard[int64]())
		}, "another type", true},
		{"union", func(env *sluice.Environment, s *sluice.Stream[int64]) {
			u := sluice.Union(keyed(s), keyed(s))
			sluice.SinkTo(sluice.SideOutput(u, oddTag), sink.NewDiscard[string]())
		}, "union", true},
		{"operator without side outputs", func(env *sluice.Environment, s *sluice.Stream[int64]) {
			m := sluice.Map(s, func(v int64) (int64, error) { return v, nil }, sluice.Name("plain-map"))
			sluice.SinkTo(sluice.SideOutput(m, oddTag), sink.NewDiscard[string]())
		}, `"plain-map"`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := build(c.f)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) || errors.Is(err, sluice.ErrInvalidOption) != c.isOpt {
				t.Fatalf("error %q: want %q (invalid option: %v)", err, c.want, c.isOpt)
			}
		})
	}
}
