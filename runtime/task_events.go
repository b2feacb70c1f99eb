package runtime

import (
	"fmt"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/runtime/network/event"
)

func (t *Task) handleEvent(ci *channelInput, boe *network.BufferOrEvent) error {
	ch := ci.gate.offset + ci.index
	switch e := boe.Event.(type) {
	case event.Watermark:
		if wm, adv := t.valve.watermark(ch, e.Timestamp); adv {
			t.inputWatermark(wm)
			return t.head.ProcessWatermark(wm)
		}
		return nil
	case event.WatermarkStatus:
		wm, adv, changed := t.valve.status(ch, e.Idle)
		if changed {
			if err := t.setIdle(t.valve.allIdle); err != nil {
				return err
			}
		}
		if adv {
			t.inputWatermark(wm)
			return t.head.ProcessWatermark(wm)
		}
		return nil
	case event.Barrier:
		if t.cp == nil {
			return fmt.Errorf("task %s: checkpoint barrier %d on channel %d, but checkpointing is off", t.name, e.ID, ch)
		}
		return t.cp.onBarrier(ch, e.Barrier, boe)
	case event.BarrierAnnouncement:
		if t.cp != nil {
			t.cp.onAnnouncement(e.Barrier)
		}
		return nil
	case event.CancelCheckpointMarker:
		if t.cp == nil {
			return nil
		}
		return t.cp.step(checkpoint.CancelReceived{Channel: ch, ID: e.ID}, nil)
	case event.EndOfData:
		return t.channelEndOfData(ch)
	case event.EndOfPartition:
		if t.cp != nil {
			if err := t.cp.step(checkpoint.ChannelEnded{Channel: ch}, nil); err != nil {
				return err
			}
		}
		wm, adv := t.valve.finish(ch)
		if adv {
			t.inputWatermark(wm)
			if err := t.head.ProcessWatermark(wm); err != nil {
				return err
			}
		}
		if err := t.channelEndOfData(ch); err != nil {
			return err
		}
		return t.maybeFinish()
	default:
		return fmt.Errorf("task %s: unexpected event %T on edge %q -> %q channel %d", t.name, boe.Event, ci.gate.edge.From.Name, ci.gate.edge.To.Name, ci.index)
	}
}

// channelEndOfData records that channel ch ended its data; once every
// channel has, the operators finish.
func (t *Task) channelEndOfData(ch int) error {
	if t.endOfData[ch] {
		return nil
	}
	t.endOfData[ch] = true
	for _, ended := range t.endOfData {
		if !ended {
			return nil
		}
	}
	return t.endOfInput()
}

// setIdle tells the consumers that this task is idle, or active again.
func (t *Task) setIdle(idle bool) error {
	if idle == t.idle {
		return nil
	}
	t.idle = idle
	for _, p := range t.partitions {
		if err := p.BroadcastEvent(event.WatermarkStatus{Idle: idle}); err != nil {
			return fmt.Errorf("task %s: broadcast watermark status: %w", t.name, err)
		}
	}
	return nil
}

// endOfInput finishes the chain head first and tells the consumers that
// the data ended; the partitions end once finishing is allowed.
func (t *Task) endOfInput() error {
	if t.inputEnded {
		return nil
	}
	t.inputEnded = true
	for i, op := range t.ops {
		if err := op.Finish(); err != nil {
			return operators.Wrap(t.opCtxs[i], err)
		}
	}
	if !t.allowedFinish {
		for _, p := range t.partitions {
			p.FlushAll()
			if err := p.BroadcastEvent(event.EndOfData{}); err != nil {
				return fmt.Errorf("task %s: broadcast end of data: %w", t.name, err)
			}
		}
		if t.src != nil && t.att.gateway != nil {
			t.toCoordinator(t.att.gateway.Report(TaskEvent{From: t.ref(), Kind: ReportEndOfInput}))
		}
	}
	return t.maybeFinish()
}

// allowFinish is the coordinator's word that the final checkpoint is
// complete: the task may end its partitions once its input has ended.
func (t *Task) allowFinish() error {
	t.allowedFinish = true
	return t.maybeFinish()
}

// maybeFinish ends the partitions and the task once the input ended, the
// coordinator allows it, and every input channel delivered its end of
// partition.
func (t *Task) maybeFinish() error {
	if t.finished || !t.inputEnded || !t.allowedFinish {
		return nil
	}
	for _, gi := range t.gates {
		if !gi.gate.Finished() {
			return nil
		}
	}
	for _, p := range t.partitions {
		if err := p.Finish(); err != nil {
			return fmt.Errorf("task %s: finish partition: %w", t.name, err)
		}
	}
	t.finished = true
	return nil
}
