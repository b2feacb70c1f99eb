package runtime

import "github.com/sluicehq/sluice/operators"

// watermarkValve combines the watermarks of a task's input channels: the
// task's watermark is the minimum over the channels that are not idle (a
// finished channel counts at the maximum watermark), and it only moves
// forward. When every channel is idle the task is idle and its watermark
// waits.
type watermarkValve struct {
	wm       []int64
	idle     []bool
	finished []bool
	current  int64
	allIdle  bool
}

func newWatermarkValve(channels int) *watermarkValve {
	v := &watermarkValve{
		wm:       make([]int64, channels),
		idle:     make([]bool, channels),
		finished: make([]bool, channels),
		current:  operators.MinWatermark,
	}
	for i := range v.wm {
		v.wm[i] = operators.MinWatermark
	}
	return v
}

// watermark records wm on channel ch; it returns the new combined
// watermark and whether it advanced.
func (v *watermarkValve) watermark(ch int, wm int64) (int64, bool) {
	if wm > v.wm[ch] {
		v.wm[ch] = wm
	}
	v.idle[ch] = false
	return v.recompute()
}

// status marks channel ch idle or active; it returns the combined
// watermark, whether it advanced, and whether the task's idleness changed.
func (v *watermarkValve) status(ch int, idle bool) (int64, bool, bool) {
	v.idle[ch] = idle
	wasIdle := v.allIdle
	wm, adv := v.recompute()
	return wm, adv, wasIdle != v.allIdle
}

// finish removes channel ch from the minimum.
func (v *watermarkValve) finish(ch int) (int64, bool) {
	v.finished[ch] = true
	return v.recompute()
}

func (v *watermarkValve) recompute() (int64, bool) {
	min := operators.MaxWatermark
	active := false
	anyFinished := false
	for i, wm := range v.wm {
		if v.finished[i] {
			// A finished channel is not idle: its watermark is the
			// maximum (as in Flink, whose finished inputs stay in the
			// valve at MAX_WATERMARK), so it never holds the others back.
			anyFinished = true
			continue
		}
		if v.idle[i] {
			continue
		}
		active = true
		if wm < min {
			min = wm
		}
	}
	v.allIdle = !active && !anyFinished
	if v.allIdle {
		return v.current, false // every channel idle: hold
	}
	if min > v.current {
		v.current = min
		return min, true
	}
	return v.current, false
}
