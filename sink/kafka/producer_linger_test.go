package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A transactional producer does not linger (its records are mostly
// acknowledged by the time the pre-commit flushes them, rather than
// waiting there for franz-go's 10 ms linger); the user's client options
// win.
func TestTransactionalProducerDoesNotLinger(t *testing.T) {
	seeds := cluster(t, 1, "out")
	for _, tc := range []struct {
		name string
		opts []Option
		want time.Duration
	}{
		{"default", nil, 0},
		{"client-options", []Option{ClientOptions(kgo.ProducerLinger(7 * time.Millisecond))}, 7 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := eosSink(t, seeds, "linger-"+tc.name, tc.opts...)
			w, err := s.NewWriter(wctx(0, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			writeAll(t, w, "a")
			cl := w.(*transactionalWriter[string]).cur.cl
			if got := cl.OptValue(kgo.ProducerLinger); got != tc.want {
				t.Errorf("ProducerLinger %v, want %v", got, tc.want)
			}
		})
	}
}
