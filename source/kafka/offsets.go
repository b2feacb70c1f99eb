package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafkaclient"
)

// retry is the Retry of one of the reader's Kafka calls through its admin
// client: until ctx ends (the set-up timeout).
func (r *Reader[T]) retry(call string) kafkaclient.Retry {
	return kafkaclient.Retry{Call: call, Client: r.admCl, Key: -1, Log: r.log}
}

// listOwned lists the subscribed partitions that this subtask reads,
// retrying what Kafka calls retriable (leaders moving, a broker
// restarting) until ctx ends.
func (r *Reader[T]) listOwned(ctx context.Context) (out []topicPartition, err error) {
	err = r.retry("Metadata of "+r.cfg.sub.String()).Do(ctx, func(ctx context.Context) (err error) {
		out, err = r.listOwnedOnce(ctx)
		return err
	})
	return out, err
}

func (r *Reader[T]) listOwnedOnce(ctx context.Context) ([]topicPartition, error) {
	var (
		tds kadm.TopicDetails
		err error
	)
	if r.cfg.sub.pattern != nil {
		tds, err = r.adm.ListTopics(ctx)
	} else {
		tds, err = r.adm.ListTopics(ctx, r.cfg.sub.topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var out []topicPartition
	for _, td := range tds.Sorted() {
		if !r.cfg.sub.matches(td.Topic) {
			continue
		}
		if errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			// Retriable to Kafka (metadata spreading), but a topic
			// that is not there is most likely misnamed: fail now.
			return nil, kafkaclient.Permanent(fmt.Errorf("topic %s: %w", td.Topic, td.Err))
		}
		if td.Err != nil {
			return nil, fmt.Errorf("topic %s: %w", td.Topic, td.Err)
		}
		for _, pd := range td.Partitions.Sorted() {
			if OwnerOf(td.Topic, pd.Partition, r.parallelism) == r.subtask {
				out = append(out, topicPartition{td.Topic, pd.Partition})
			}
		}
	}
	return out, nil
}

// resolve finds the starting offset of each partition under start, and
// its stopping offset when bounded, retrying what Kafka calls retriable
// (a partition without a leader for a moment, a coordinator loading, a
// broker restarting) until ctx ends.
func (r *Reader[T]) resolve(ctx context.Context, tps []topicPartition, start StartingOffsets, bounded bool) (out []SplitState, err error) {
	if len(tps) == 0 {
		return nil, nil
	}
	err = r.retry(fmt.Sprintf("ListOffsets of %d partitions", len(tps))).Do(ctx, func(ctx context.Context) (err error) {
		out, err = r.resolveOnce(ctx, tps, start, bounded)
		return err
	})
	return out, err
}

func (r *Reader[T]) resolveOnce(ctx context.Context, tps []topicPartition, start StartingOffsets, bounded bool) ([]SplitState, error) {
	var topics []string
	for _, tp := range tps {
		if !slices.Contains(topics, tp.topic) {
			topics = append(topics, tp.topic)
		}
	}
	lookup := func(what string, lo kadm.ListedOffsets, err error, tp topicPartition) (int64, error) {
		if err != nil {
			return 0, fmt.Errorf("list %s offsets: %w", what, err)
		}
		o, ok := lo.Lookup(tp.topic, tp.partition)
		if !ok {
			return 0, fmt.Errorf("list %s offsets: no answer for %s/%d", what, tp.topic, tp.partition)
		}
		if o.Err != nil {
			return 0, fmt.Errorf("list %s offset of %s/%d: %w", what, tp.topic, tp.partition, o.Err)
		}
		return o.Offset, nil
	}
	// The end: the last stable offset under read_committed.
	listEnd := func() (kadm.ListedOffsets, error) {
		if r.cfg.readUncomm {
			return r.adm.ListEndOffsets(ctx, topics...)
		}
		return r.adm.ListCommittedOffsets(ctx, topics...)
	}

	var committed kadm.OffsetResponses
	if start.kind == startCommitted {
		var err error
		if committed, err = r.adm.FetchOffsets(ctx, r.cfg.group); errors.Is(err, kerr.GroupIDNotFound) {
			committed, err = nil, nil // a group never committed: every partition falls back
		}
		if err != nil {
			return nil, fmt.Errorf("fetch committed offsets of group %s: %w", r.cfg.group, err)
		}
	}
	var (
		cache = map[string]kadm.ListedOffsets{}
		errs  = map[string]error{}
	)
	list := func(what string, fn func() (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
		if lo, ok := cache[what]; ok || errs[what] != nil {
			return lo, errs[what]
		}
		lo, err := fn()
		cache[what], errs[what] = lo, err
		return lo, err
	}
	var offsetFor func(tp topicPartition, s StartingOffsets) (int64, error)
	offsetFor = func(tp topicPartition, s StartingOffsets) (int64, error) {
		switch s.kind {
		case startEarliest:
			lo, err := list("earliest", func() (kadm.ListedOffsets, error) { return r.adm.ListStartOffsets(ctx, topics...) })
			return lookup("start", lo, err, tp)
		case startLatest:
			lo, err := list("latest", listEnd)
			return lookup("end", lo, err, tp)
		case startTimestamp:
			lo, err := list("timestamp", func() (kadm.ListedOffsets, error) {
				return r.adm.ListOffsetsAfterMilli(ctx, s.millis, topics...)
			})
			return lookup("timestamp", lo, err, tp)
		case startCommitted:
			if o, ok := committed.Lookup(tp.topic, tp.partition); ok && o.Err == nil && o.At >= 0 {
				return o.At, nil
			} else if ok && o.Err != nil {
				return 0, fmt.Errorf("committed offset of %s/%d in group %s: %w", tp.topic, tp.partition, r.cfg.group, o.Err)
			}
			return offsetFor(tp, *s.fallback)
		case startSpecific:
			if o, ok := s.offsets[tp.topic][tp.partition]; ok {
				return o, nil
			}
			return offsetFor(tp, *s.fallback)
		}
		return 0, fmt.Errorf("unknown starting offsets %v", s)
	}
	out := make([]SplitState, 0, len(tps))
	for _, tp := range tps {
		off, err := offsetFor(tp, start)
		if err != nil {
			return nil, err
		}
		st := SplitState{Topic: tp.topic, Partition: tp.partition, Offset: off, StoppingOffset: NoStoppingOffset}
		if bounded {
			lo, err := list("latest", listEnd)
			if st.StoppingOffset, err = lookup("end", lo, err, tp); err != nil {
				return nil, err
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// addPartitions adds splits to the reader and starts consuming those not
// finished. Task goroutine (or start).
func (r *Reader[T]) addPartitions(splits []SplitState) {
	consume := map[string]map[int32]kgo.Offset{}
	r.mu.Lock()
	for _, st := range splits {
		tp := topicPartition{st.Topic, st.Partition}
		if _, ok := r.parts[tp]; ok {
			continue
		}
		p := &partition{tp: tp, stop: st.StoppingOffset}
		p.next.Store(st.Offset)
		p.hwm.Store(-1)
		p.lso.Store(-1)
		p.committed.Store(-1)
		p.finished = p.stop >= 0 && st.Offset >= p.stop
		p.done.Store(p.finished)
		r.parts[tp] = p
		r.order = append(r.order, p)
		p.index = len(r.outputs)
		r.outputs = append(r.outputs, nil)
		if !p.finished {
			r.outputs[p.index] = r.splitOutput(p)
		}
		if !p.finished {
			if consume[tp.topic] == nil {
				consume[tp.topic] = map[int32]kgo.Offset{}
			}
			consume[tp.topic][tp.partition] = kgo.NewOffset().At(st.Offset)
		}
		r.log.Info("kafka source: assigned partition", "topic", st.Topic, "partition", st.Partition,
			"offset", st.Offset, "stopping_offset", st.StoppingOffset, "finished", p.finished)
	}
	slices.SortFunc(r.order, func(a, b *partition) int {
		if c := strings.Compare(a.tp.topic, b.tp.topic); c != 0 {
			return c
		}
		return int(a.tp.partition - b.tp.partition)
	})
	r.mu.Unlock()
	if len(consume) == 0 {
		return
	}
	if r.consumer != nil {
		r.consumer.AddConsumePartitions(consume)
		return
	}
	isolation := kgo.ReadCommitted()
	if r.cfg.readUncomm {
		isolation = kgo.ReadUncommitted()
	}
	extra := []kgo.Opt{
		kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(isolation),
		kgo.KeepControlRecords(),
	}
	if r.cfg.reuse {
		// The decoder keeps nothing of the records: the reader
		// recycles each one it is done with (see recycle).
		extra = append(extra, kgo.WithPools(&recordPool{}))
	}
	cl, err := kgo.NewClient(append(slices.Clip(r.buf.client), r.client.OptsFor("source-consumer", extra...)...)...)
	if err != nil {
		r.deliver(item{err: fmt.Errorf("new consumer: %w", err)})
		return
	}
	r.consumer = cl
	r.wg.Go(r.fetch)
}

// discover lists the subscribed partitions at every interval and hands
// the new ones this subtask owns to the task goroutine, starting at their
// earliest offset.
func (r *Reader[T]) discover(known map[topicPartition]bool) {
	t := time.NewTicker(r.cfg.discovery)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(r.ctx, setupTimeout)
		owned, err := r.listOwned(ctx)
		var fresh []topicPartition
		for _, tp := range owned {
			if !known[tp] {
				fresh = append(fresh, tp)
			}
		}
		var splits []SplitState
		if err == nil {
			splits, err = r.resolve(ctx, fresh, Earliest(), false)
		}
		cancel()
		if err != nil {
			if r.ctx.Err() == nil {
				r.log.Warn("kafka source: partition discovery failed, trying again at the next interval", "err", err)
			}
			continue
		}
		if len(splits) == 0 {
			continue
		}
		for _, st := range splits {
			known[topicPartition{st.Topic, st.Partition}] = true
		}
		r.log.Info("kafka source: discovered partitions", "count", len(splits))
		if !r.deliver(item{newParts: splits}) {
			return
		}
	}
}

// SnapshotState returns the next offset of every assigned partition, one
// entry each, so that a restore can give each partition to its owner
// under the new parallelism. Dead-letter copies of skipped records are
// acknowledged first.
func (r *Reader[T]) SnapshotState(checkpointID int64) ([][]byte, error) {
	if err := r.flushDeadLetters(r.ctx); err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(r.order))
	sts := make([]SplitState, 0, len(r.order))
	for _, p := range r.order {
		st := SplitState{Topic: p.tp.topic, Partition: p.tp.partition, Offset: p.next.Load(), StoppingOffset: p.stop}
		sts = append(sts, st)
		out = append(out, st.Encode())
	}
	if r.cfg.group != "" {
		r.snapshots[checkpointID] = sts
	}
	return out, nil
}

// NotifyCheckpointComplete commits the offsets of checkpoint id to the
// group, if one is set, in the background: they serve lag monitoring only,
// and a failed commit is logged.
func (r *Reader[T]) NotifyCheckpointComplete(id int64) error {
	sts, ok := r.snapshots[id]
	for cid := range r.snapshots {
		if cid <= id {
			delete(r.snapshots, cid)
		}
	}
	if !ok || r.cfg.group == "" || len(sts) == 0 || r.closed {
		return nil
	}
	if !r.committing.CompareAndSwap(false, true) {
		r.log.Debug("kafka source: an offset commit is still running, skipping the commit of checkpoint", "checkpoint", id)
		return nil
	}
	offsets := kadm.Offsets{}
	for _, st := range sts {
		offsets.Add(kadm.Offset{Topic: st.Topic, Partition: st.Partition, At: st.Offset, LeaderEpoch: -1})
	}
	r.wg.Go(func() {
		defer r.committing.Store(false)
		ctx, cancel := context.WithTimeout(r.ctx, setupTimeout)
		defer cancel()
		err := r.retry("OffsetCommit of group "+r.cfg.group).Do(ctx, func(ctx context.Context) error {
			resp, err := r.adm.CommitOffsets(ctx, r.cfg.group, offsets)
			if err == nil {
				err = resp.Error()
			}
			return err
		})
		if err != nil {
			if r.ctx.Err() == nil {
				r.log.Warn("kafka source: committing offsets to the group failed (lag monitoring only)",
					"group", r.cfg.group, "checkpoint", id, "err", err)
			}
			return
		}
		r.mu.Lock()
		for _, st := range sts {
			if p := r.parts[topicPartition{st.Topic, st.Partition}]; p != nil {
				p.committed.Store(st.Offset)
			}
		}
		r.mu.Unlock()
	})
	return nil
}

// NotifyCheckpointAborted forgets the offsets of checkpoint id.
func (r *Reader[T]) NotifyCheckpointAborted(id int64) error {
	delete(r.snapshots, id)
	return nil
}
