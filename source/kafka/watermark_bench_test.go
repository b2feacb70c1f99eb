package kafka

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// fixedReaderSource hands out one reader made beforehand.
type fixedReaderSource struct{ r source.Reader[int] }

func (s fixedReaderSource) Bounded() bool { return false }
func (s fixedReaderSource) NewReader(source.ReaderContext) (source.Reader[int], error) {
	return s.r, nil
}

// stillClock is a processing-time service whose callbacks never run: the
// benchmark measures the records' path, not the periodic checks.
type stillClock struct{}

func (stillClock) Now() int64                     { return time.Now().UnixMilli() }
func (stillClock) At(int64, func() error) func()  { return func() {} }
func (o *intOutput) ProcessWatermark(int64) error { return nil }

var _ operators.Output[int] = (*intOutput)(nil)

// BenchmarkHandOutStrategy is BenchmarkHandOut through the source
// operator with the job's watermark strategy (bounded out-of-orderness
// with a timestamp assigner) applied to every record, as a source task
// runs it: the reader's hot path plus the strategy's.
func BenchmarkHandOutStrategy(b *testing.B) {
	const perPartition = 8192
	out := &intOutput{}
	ws := operators.WatermarkStrategy[int]{Periodic: true, OutOfOrderness: 5 * time.Second,
		Timestamps: func(v int, _ int64) int64 { return int64(v) }, Interval: 200 * time.Millisecond}
	var op *operators.Source[int]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if op == nil {
			b.StopTimer()
			osb, err := state.NewOperatorStateBackend(0, 1)
			if err != nil {
				b.Fatal(err)
			}
			sc := &operators.SourceContext{Op: &operators.Context{Subtask: 0, Parallelism: 1, OperatorState: osb, ProcessingTime: stillClock{}},
				SetIdle: func(bool) error { return nil }}
			r := handOutReader(b, perPartition, perPartition, perPartition, perPartition)
			if op, err = operators.NewSource[int](fixedReaderSource{r}, ws, sc, out); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		st, err := op.PollNext()
		if err != nil {
			b.Fatal(err)
		}
		if st == source.NothingAvailable {
			op = nil
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(out.n, 1)), "ns/record")
}
