// Package autoscaler owns the decision of a job's per-vertex parallelism
// from its metrics: Flink's Kubernetes-operator autoscaler (its
// ScalingMetricEvaluator, JobVertexScaler and ScalingExecutor) as a
// deterministic state machine, the loop that drives it and the adapter
// that reads the figures the runtime has.
//
// The Machine takes snapshots of per-vertex figures (records in and out,
// each subtask's busy time, a source's pending records and partitions)
// with the time they were read, and returns an Evaluation: where it is
// (stabilizing after a start or a rescale, collecting the metrics
// window, waiting for a rescale to take effect) or, once a full window
// is collected, every vertex's figures and the parallelism they call
// for. It reads no clock and starts no goroutine: the scenario files
// under testdata drive it.
//
// Per vertex, as Flink does: the true processing rate is the input rate
// over the busy share of time; the target rate is, for a source, its
// input rate plus the growth of its backlog, and downstream the sum of
// its inputs' target rates times the edges' output ratios, so that a
// scale-up of a source carries along the graph in one decision; the
// capacity to provide is the target rate at the target utilization plus
// the rate that catches up the backlog (and what a restart adds to it)
// within job.autoscaler.catch-up.duration. The parallelism that gives it
// is bounded by the vertex's bounds (job.autoscaler.vertex.min/max-
// parallelism, its max parallelism, a source's partitions), aligned to a
// divisor of its key groups or partitions, limited per decision by the
// scale-up and scale-down factors; a scale-down waits for
// job.autoscaler.scale-down.interval and takes the largest parallelism
// recommended meanwhile, and nothing scales while every vertex that
// would change is within the utilization boundary: no flapping.
//
// The Driver reads a MetricsSource on a ticker, feeds the Machine,
// applies its decisions through a Rescaler and logs every decision with
// the figures that drove it; JobSource is the MetricsSource of a
// runtime.Job. Both interfaces are small so that the coordinator wires
// them with thin adapters.
//
// The machine's State (its window, its clocks, the rescale it waits for)
// outlives the process: the Driver keeps it, bounded (KeepState), in the
// job's scaling state, which a leader under HA stores in etcd, and the
// next leader's machine resumes it (Resume), the job's restart a gap in
// its window rather than a start over (testdata/leader_failover.txt).
package autoscaler
