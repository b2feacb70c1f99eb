package filesink

import "github.com/sluicehq/sluice/sink"

// Crash abandons w as a killed process would: what was buffered reaches
// the in-progress file, the file is closed but nothing is deleted, and the
// writer is unusable.
func Crash[T any](w sink.Writer[T]) {
	ww := w.(*writer[T])
	if ww.f != nil {
		_ = ww.bw.Flush()
		_ = ww.f.Close()
		ww.f = nil
	}
	ww.closed = true
}
