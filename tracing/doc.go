// Package tracing owns the OpenTelemetry traces of Sluice jobs: a trace per
// checkpoint (a "Checkpoint" span stamped with its real trigger and end
// times, with a "Subtask" child span per subtask from the barrier's
// arrival to the acknowledgement), a "JobInitialization" trace per restore
// (with its state-restore and channel-state-replay phases) and a
// "JobStart" span per job. Spans are built from the checkpoint and restore
// listeners after the fact, with the figures the coordinator collected, as
// Flink's trace reporter does.
//
// Export is configured by the standard OTEL_* environment variables
// (ProviderFromEnv); without them nothing is exported.
package tracing
