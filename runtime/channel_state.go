package runtime

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// writeChannelState writes the persisted in-flight data of a task in one
// stream: input channels by task channel index, then output subpartitions
// (Gate is the partition's index).
func writeChannelState(loc *storage.Location, owner string, p *pendingSnapshot) (in, out []storage.ChannelStateHandle, n int64, err error) {
	s := loc.CreateStateStream(owner)
	var off int64
	for _, ch := range slices.Sorted(maps.Keys(p.input)) {
		data := p.input[ch]
		if len(data) == 0 {
			continue
		}
		if _, err := s.Write(data); err != nil {
			s.Abort()
			return nil, nil, 0, err
		}
		in = append(in, storage.ChannelStateHandle{Channel: ch, Offset: off, Length: int64(len(data))})
		off += int64(len(data))
	}
	for _, c := range p.output {
		if _, err := s.Write(c.data); err != nil {
			s.Abort()
			return nil, nil, 0, err
		}
		out = append(out, storage.ChannelStateHandle{Gate: c.partition, Channel: c.sub, Offset: off, Length: int64(len(c.data))})
		off += int64(len(c.data))
	}
	h, err := s.Close()
	if err != nil {
		return nil, nil, 0, err
	}
	for i := range in {
		in[i].Handle = h
	}
	for i := range out {
		out[i].Handle = h
	}
	return in, out, h.Size, nil
}

// channel maps a task channel index to its gate and the channel in it.
func (t *Task) channel(ch int) (*gateInput, int) {
	for _, gi := range t.gates {
		if ch < gi.offset+len(gi.channels) {
			return gi, ch - gi.offset
		}
	}
	panic(fmt.Sprintf("runtime: task %s has no channel %d", t.name, ch))
}

// replayChannelState puts the restored in-flight data back before any new
// input: output buffers into their subpartitions, then the input channel
// state through each channel's record reader into the operators.
func (t *Task) replayChannelState() error {
	start := time.Now()
	defer func() { t.att.replayed(t.restoreCounters, time.Since(start)) }()
	if len(t.units) == 0 {
		return nil
	}
	head := t.units[0]
	if len(head.inputState) == 0 && len(head.outputState) == 0 {
		return nil
	}
	r := t.restore
	read := func(h storage.ChannelStateHandle) ([]byte, error) {
		data, err := r.snap.ReadAll(h.Handle)
		t.restoreCounters.bytes.Add(h.Length)
		if err != nil {
			return nil, fmt.Errorf("%w channel state of task %s from checkpoint %d: %w", ErrRestore, t.name, r.id(), err)
		}
		if h.Offset < 0 || h.Length < 0 || h.Offset > int64(len(data)) || h.Length > int64(len(data))-h.Offset {
			return nil, fmt.Errorf("%w channel state of task %s from checkpoint %d: range beyond its stream", ErrRestore, t.name, r.id())
		}
		return data[h.Offset : h.Offset+h.Length], nil
	}
	for _, h := range head.outputState {
		if h.Gate < 0 || h.Channel < 0 || h.Gate >= len(t.partitions) || h.Channel >= t.partitions[h.Gate].NumSubpartitions() {
			return fmt.Errorf("%w: checkpoint %d holds output state of partition %d subpartition %d, which task %s does not have",
				ErrRestore, r.id(), h.Gate, h.Channel, t.name)
		}
		data, err := read(h)
		if err != nil {
			return err
		}
		if err := t.partitions[h.Gate].WriteRaw(t.ctx, h.Channel, data); err != nil {
			return fmt.Errorf("task %s: replay output channel state: %w", t.name, err)
		}
	}
	// Every channel's restored input goes into its reader before any is
	// processed: a checkpoint whose barrier comes during the replay (the
	// task polls priority events between records) then finds all the
	// restored records not yet processed in the readers' pending bytes,
	// and persists them again, instead of losing those of the channels
	// not replayed yet.
	var restored []*channelInput
	for _, h := range head.inputState {
		if h.Channel < 0 || h.Channel >= t.numChannels {
			return fmt.Errorf("%w: checkpoint %d holds input state of channel %d, which task %s does not have",
				ErrRestore, r.id(), h.Channel, t.name)
		}
		data, err := read(h)
		if err != nil {
			return err
		}
		gi, local := t.channel(h.Channel)
		ci := gi.channels[local]
		ci.reader.FeedRaw(data)
		restored = append(restored, ci)
	}
	for _, ci := range restored {
		t.cur = ci
		for t.cur != nil {
			if _, err := t.processInput(); err != nil {
				return err
			}
		}
	}
	return nil
}
