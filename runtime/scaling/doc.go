// Package scaling owns the decisions about a running job's parallelism,
// as a deterministic state machine beside the job's lifecycle machine
// (Flink's adaptive scheduler): the resource requirements a user sets per
// vertex (lower and upper bounds, Flink's PUT
// /jobs/:jobid/resource-requirements), the autoscaler's, the task slots
// the workers offer and each vertex's limits (max parallelism, a Kafka
// source's partition count) go in with the clock; the parallelism of
// every vertex and when to rescale come out (Rescale, Log). It does no
// I/O and starts no goroutine: the runtime carries a Rescale out by
// stopping the job at a checkpoint (checkpoint.Coordinator.TriggerStop)
// and restarting it from that checkpoint at the new parallelism, the key
// groups redistributed; scenario files in testdata/ pin every decision.
//
// # What parallelism
//
// Target gives each vertex the most its bounds, its max parallelism and
// the slots allow (with slot sharing a job needs as many slots as its
// highest parallelism); vertices joined by a forward edge that is not
// chained keep one parallelism (the lowest of theirs). Without explicit
// requirements a vertex keeps the parallelism it has in the default mode,
// and in the reactive mode (scheduler-mode: reactive) asks for its max
// parallelism, bounded by its Limit (a Kafka source's partition count,
// SetLimits). A lower bound the slots cannot meet is an error naming the
// vertex (ErrNotEnoughSlots).
//
// The autoscaler's decisions (Autoscale) are kept beside the
// requirements set explicitly (Require), never in their place: a vertex
// the autoscaler decided runs at its decision clamped into its explicit
// bounds (1 to its max parallelism without), so a user's range bounds
// every decision, including those made before it was set.
//
// # When
//
// New requirements are carried out at once, one rescale at a time (those
// that arrive while one is in flight are carried out after it). In the
// reactive mode a change of the slots is carried out once they have been
// stable for the stabilization timeout (so is a change of a source's
// partitions), and no sooner than the cooldown
// after the last rescale (Flink's
// jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout
// and .cooldown-after-rescaling). A failure restarts the job at the
// parallelism the slots there are allow (Failover): a worker that left
// scales the job down.
package scaling
