// Package checkpoint owns Sluice's fault tolerance core: the checkpoint
// options (with Flink's names and defaults), the barrier and cancel-marker
// events that travel with the data, the per-task barrier handlers (aligned,
// unaligned, aligned with timeout, at-least-once), the checkpoint
// coordinator, the restart strategies, and the per-checkpoint statistics.
//
// Everything here is a deterministic core: no goroutines, no clocks, no I/O.
// Callers feed events stamped with the current time and carry out the
// actions they get back, in order — the style of etcd's raft. The runtime
// owns the goroutines, the mailboxes, the timers and the network; the
// subpackage snapshot owns what a checkpoint is as data (metadata,
// handles, the shared-file registry), the core's only import there;
// subpackage storage owns where it is kept.
//
// A task drives one BarrierHandler per input gate:
//
//	for each polled item:
//	    buffer from channel c:  acts = h.OnBuffer(c, len)
//	    barrier from channel c: acts = h.Step(now, BarrierReceived{...})
//	    ...
//	    for _, a := range acts { execute(a) }
//
// The job master drives one Coordinator:
//
//	acts := coord.Tick(now)             // periodic triggers and timeouts
//	acts  = coord.Ack(now, task, id, states, figures)
//	acts  = coord.MetadataWritten(now, id, location, err)
//
// and reschedules its timer with coord.NextWakeup(). A call that ends a
// checkpoint triggers nothing: the next Tick does, due at once, so that a
// trigger's time is taken after the end's actions were carried out.
package checkpoint
