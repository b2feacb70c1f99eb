package runtime

import (
	"testing"

	"github.com/sluicehq/sluice/operators"
)

// step checks one valve call: the combined watermark and whether it
// advanced.
func expectWM(t *testing.T, what string, wm int64, adv bool, wantWM int64, wantAdv bool) {
	t.Helper()
	if adv != wantAdv || (wantAdv && wm != wantWM) {
		t.Fatalf("%s: got (%d, advanced=%v), want (%d, advanced=%v)", what, wm, adv, wantWM, wantAdv)
	}
}

func TestValveMinimumOverChannels(t *testing.T) {
	v := newWatermarkValve(3)
	wm, adv := v.watermark(0, 10)
	expectWM(t, "ch0=10", wm, adv, 0, false)
	wm, adv = v.watermark(1, 20)
	expectWM(t, "ch1=20", wm, adv, 0, false)
	wm, adv = v.watermark(2, 5)
	expectWM(t, "ch2=5", wm, adv, 5, true)
	wm, adv = v.watermark(2, 30)
	expectWM(t, "ch2=30", wm, adv, 10, true)
	wm, adv = v.watermark(0, 8) // a channel going back is ignored
	expectWM(t, "ch0=8", wm, adv, 0, false)
	if v.current != 10 {
		t.Fatalf("current %d after a lower watermark, want 10", v.current)
	}
	wm, adv = v.watermark(0, 25)
	expectWM(t, "ch0=25", wm, adv, 20, true)
	wm, adv = v.watermark(1, 20) // same again: no advance
	expectWM(t, "ch1=20 again", wm, adv, 0, false)
}

func TestValveIdleChannels(t *testing.T) {
	v := newWatermarkValve(3)
	v.watermark(0, 100)
	v.watermark(1, 50)
	// ch2 never sent a watermark and holds everything back until idle.
	wm, adv, changed := v.status(2, true)
	expectWM(t, "ch2 idle", wm, adv, 50, true)
	if changed || v.allIdle {
		t.Fatal("task idle with two active channels")
	}
	wm, adv, changed = v.status(1, true)
	expectWM(t, "ch1 idle", wm, adv, 100, true)
	if changed {
		t.Fatal("task idle with one active channel")
	}
	// All idle: the watermark holds and the task becomes idle.
	wm, adv, changed = v.status(0, true)
	expectWM(t, "all idle", wm, adv, 0, false)
	if !changed || !v.allIdle || v.current != 100 {
		t.Fatalf("all idle: changed=%v allIdle=%v current=%d", changed, v.allIdle, v.current)
	}
	// ch1 comes back with a watermark below the current one: no going back.
	wm, adv, changed = v.status(1, false)
	expectWM(t, "ch1 active", wm, adv, 0, false)
	if !changed || v.allIdle {
		t.Fatal("task still idle after a channel became active")
	}
	wm, adv = v.watermark(1, 150)
	expectWM(t, "ch1=150", wm, adv, 150, true)
	// A watermark on an idle channel makes it active again.
	wm, adv = v.watermark(2, 120)
	expectWM(t, "ch2=120 (was idle)", wm, adv, 0, false)
	if v.idle[2] {
		t.Fatal("channel still idle after a watermark")
	}
	wm, adv = v.watermark(1, 300)
	expectWM(t, "ch1=300", wm, adv, 120, false) // 120 < current 150: held
	wm, adv = v.watermark(2, 200)
	expectWM(t, "ch2=200", wm, adv, 200, true)
}

func TestValveFinishedChannels(t *testing.T) {
	v := newWatermarkValve(3)
	v.watermark(0, 10)
	v.watermark(1, 40)
	v.watermark(2, 30)
	wm, adv := v.finish(0)
	expectWM(t, "ch0 finished", wm, adv, 30, true)
	wm, adv = v.finish(2)
	expectWM(t, "ch2 finished", wm, adv, 40, true)
	wm, adv = v.finish(1)
	expectWM(t, "all finished", wm, adv, operators.MaxWatermark, true)
	if v.allIdle {
		t.Fatal("finished task reported idle")
	}
}

// TestValveFinishedAndIdle: a finished channel is at the maximum
// watermark, not idle; when the other channels are idle it does not wait
// for them.
func TestValveFinishedAndIdle(t *testing.T) {
	v := newWatermarkValve(2)
	v.watermark(0, 10)
	v.status(1, true)
	wm, adv := v.finish(0)
	expectWM(t, "ch0 finished, ch1 idle", wm, adv, operators.MaxWatermark, true)
	if v.allIdle {
		t.Fatal("task idle although one input finished")
	}

	v = newWatermarkValve(2)
	v.finish(0)
	wm, adv, _ = v.status(1, true)
	expectWM(t, "ch1 idle after ch0 finished", wm, adv, operators.MaxWatermark, true)
}

func TestValveNoChannels(t *testing.T) {
	v := newWatermarkValve(1)
	if v.current != operators.MinWatermark {
		t.Fatalf("initial watermark %d", v.current)
	}
	wm, adv := v.watermark(0, operators.MinWatermark)
	expectWM(t, "min watermark", wm, adv, 0, false)
}
