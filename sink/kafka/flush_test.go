package kafka

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
)

// A record franz-go refuses before buffering it (here one larger than the
// producer's whole buffer) has its promise called on a goroutine of
// franz-go's, after Produce returned, and Flush does not wait for it: the
// pre-commit must, or a checkpoint right after the record could complete
// without it (the record lost, nothing failed). Both guarantees that
// flush at the barrier are checked, each a few times (the promise often
// comes in time by itself).
func TestPrecommitWaitsForRefusedRecords(t *testing.T) {
	seeds := cluster(t, 1, "out")
	for _, g := range []DeliveryGuarantee{AtLeastOnce, ExactlyOnce} {
		for i := range 20 {
			s, err := NewSink(seeds, ValueSerializer("out", codec.String{}), Guarantee(g), TransactionalIDPrefix(fmt.Sprintf("big%d", i)),
				TransactionTimeout(time.Minute), ClientOptions(kgo.MaxBufferedBytes(1000)))
			if err != nil {
				t.Fatal(err)
			}
			w, _ := writerAndCommitter(t, s)
			writeAll(t, w, strings.Repeat("x", 2000))
			cs, err := w.(sink.PrecommittingWriter[string]).PrepareCommit(1)
			if !errors.Is(err, kerr.MessageTooLarge) || !errors.Is(err, ErrProduce) {
				t.Fatalf("%v, attempt %d: pre-commit after a record larger than the buffer: %d committables, %v; want its MessageTooLarge", g, i, len(cs), err)
			}
			w.Close()
		}
	}
}
