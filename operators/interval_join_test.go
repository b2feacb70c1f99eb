package operators_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
)

// plainIntervalJoin is the plain evaluation of an interval join over a
// script: a record at or below the watermark when it arrives is late; every
// pair of records of one key that are not late, with the right timestamp
// in [left+lower, left+upper], is joined.
func plainIntervalJoin(steps []coStep, lower, upper int64) (pairs, late []string) {
	wm := operators.MinWatermark
	var ls, rs []coEv
	for _, st := range steps {
		switch {
		case st.input == 0:
			wm = max(wm, st.wm)
		case st.ev.ts <= wm:
			late = append(late, fmt.Sprintf("%d:%d", st.input, st.ev.v))
		case st.input == 1:
			ls = append(ls, st.ev)
		default:
			rs = append(rs, st.ev)
		}
	}
	for _, l := range ls {
		for _, r := range rs {
			if l.key == r.key && r.ts-l.ts >= lower && r.ts-l.ts <= upper {
				pairs = append(pairs, fmt.Sprintf("%d+%d@%d", l.v, r.v, max(l.ts, r.ts)))
			}
		}
	}
	return pairs, late
}

func TestIntervalJoinAgainstPlainEvaluation(t *testing.T) {
	bounds := [][2]int64{{-5, 5}, {0, 12}, {-20, -3}, {4, 30}, {0, 0}}
	for seed := range uint64(4) {
		for _, b := range bounds {
			rng := rand.New(rand.NewPCG(seed, 99))
			steps := coScript(rng, 300)
			main, late := &out[string]{}, &out[string]{}
			keyOf := func(e coEv) string { return e.key }
			fn := operators.ProcessJoinFunc[coEv, coEv, string](func(ctx *operators.JoinContext, l, r coEv, o operators.Collector[string]) error {
				if ctx.LeftTimestamp() != l.ts || ctx.RightTimestamp() != r.ts {
					return fmt.Errorf("context timestamps %d %d for %v %v", ctx.LeftTimestamp(), ctx.RightTimestamp(), l, r)
				}
				o.Collect(fmt.Sprintf("%d+%d@%d", l.v, r.v, ctx.Timestamp()))
				return nil
			})
			j := operators.NewIntervalJoin(operators.IntervalJoinConfig[string, coEv, coEv]{
				Lower: b[0], Upper: b[1], KeyOfLeft: keyOf, KeyOfRight: keyOf, KeyCodec: codec.String{},
				LeftCodec: coEvCodec{}, RightCodec: coEvCodec{}, LeftLateTag: "late-l", RightLateTag: "late-r",
			}, fn, main)
			lateL, lateR := &taggedOut{tag: "1", to: late}, &taggedOut{tag: "2", to: late}
			sides, err := operators.NewSideOutputs([]string{"late-l", "late-r"}, []any{operators.Output[coEv](lateL), operators.Output[coEv](lateR)})
			if err != nil {
				t.Fatal(err)
			}
			j.SetSideOutputs(sides)
			ctx := keyedContext(t, "ij", 0)
			if err := j.Open(ctx); err != nil {
				t.Fatal(err)
			}
			for _, st := range steps {
				switch st.input {
				case 0:
					err = j.ProcessWatermark(st.wm)
				case 1:
					err = j.Input1().ProcessElement(st.ev, st.ev.ts)
				case 2:
					err = j.Input2().ProcessElement(st.ev, st.ev.ts)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			wantPairs, wantLate := plainIntervalJoin(steps, b[0], b[1])
			if len(wantPairs) == 0 || len(wantLate) == 0 {
				t.Fatalf("bounds %v: %d pairs, %d late records: the test needs both", b, len(wantPairs), len(wantLate))
			}
			for i, v := range main.vals {
				if want := fmt.Sprintf("@%d", main.ts[i]); v[len(v)-len(want):] != want {
					t.Fatalf("result %s carries timestamp %d", v, main.ts[i])
				}
			}
			if got, want := slices.Sorted(slices.Values(main.vals)), slices.Sorted(slices.Values(wantPairs)); !slices.Equal(got, want) {
				t.Fatalf("seed %d bounds %v: joined %d pairs, want %d\ngot  %v\nwant %v", seed, b, len(got), len(want), got, want)
			}
			if !slices.Equal(late.vals, wantLate) {
				t.Fatalf("seed %d bounds %v: late %v, want %v", seed, b, late.vals, wantLate)
			}
			// The final watermark cleaned every buffered record.
			for _, name := range []string{"interval-join-left", "interval-join-right"} {
				n := 0
				if err := ctx.KeyedState.Keys(name, nil, func([]byte, int) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Fatalf("bounds %v: %d keys still hold %s state after the final watermark", b, n, name)
				}
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// taggedOut records "tag:v" of the records it gets into to.
type taggedOut struct {
	tag string
	to  *out[string]
}

func (o *taggedOut) Collect(v coEv, ts int64) error {
	return o.to.Collect(fmt.Sprintf("%s:%d", o.tag, v.v), ts)
}
func (o *taggedOut) EmitWatermark(int64) error { return nil }

// coEvCodec stores coEv records in state (they have unexported fields).
type coEvCodec struct{}

func (coEvCodec) Append(dst []byte, e coEv) ([]byte, error) {
	return fmt.Appendf(dst, "%s %d %d", e.key, e.v, e.ts), nil
}

func (coEvCodec) Decode(src []byte) (coEv, error) {
	var e coEv
	_, err := fmt.Sscanf(string(src), "%s %d %d", &e.key, &e.v, &e.ts)
	return e, err
}

func TestListCodecRoundTrip(t *testing.T) {
	c := operators.ListCodec[string]{Elem: codec.String{}}
	for _, vs := range [][]string{nil, {""}, {"a", "", "bcd"}} {
		b, err := c.Append(nil, vs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Decode(b)
		if err != nil || !slices.Equal(got, vs) {
			t.Fatalf("round trip of %q: %q, %v", vs, got, err)
		}
		if len(b) > 0 {
			if _, err := c.Decode(b[:len(b)-1]); err == nil && len(vs) > 0 && vs[len(vs)-1] != "" {
				t.Fatalf("truncated %q decoded", vs)
			}
		}
	}
}
