package sluice

import "github.com/sluicehq/sluice/config"

// The packages that plug into the root package when a program imports
// them, and the configuration keys they declare: an unknown key of one
// of them names the package to import when the program does not.
// The root package imports none of them (a word count links no AWS SDK,
// gRPC or etcd client): each registers itself from its init function.
//
//   - github.com/sluicehq/sluice/cluster: a job on several processes
//     (cluster.With, RegisterLaunchers) and its keys;
//   - github.com/sluicehq/sluice/checkpoint/storage/s3: s3://, s3a://,
//     s3p:// locations (storage.RegisterScheme) and the s3.* keys;
//   - github.com/sluicehq/sluice/state/rocksdb: state.backend.type
//     rocksdb (state.RegisterBackendType) and its keys;
//   - github.com/sluicehq/sluice/source/kafka, sink/kafka: the Kafka
//     client properties (kafka.properties.*) and their memory shares
//     (taskmanager.memory.kafka.*.fraction, memory.RegisterShare);
//   - github.com/sluicehq/sluice/runner: the job as a program, and its
//     rest.*, metrics.*, log.* and traces.* keys.
func init() {
	const importIt = "; the program does not import it"
	hint := func(text string, prefixes ...string) {
		for _, p := range prefixes {
			config.Hint(p, text+importIt)
		}
	}
	hint("a key of a job on several processes, read by github.com/sluicehq/sluice/cluster",
		"cluster.", "jobmanager.", "heartbeat.", "slot.request.timeout", "high-availability.", "high-availability",
		"taskmanager.host", "taskmanager.resource-id", "taskmanager.numberOfTaskSlots", "taskmanager.data.port",
		"security.ssl.internal.", "security.internal.")
	hint("the s3.* keys are read by github.com/sluicehq/sluice/checkpoint/storage/s3", "s3.")
	hint("the state.backend.rocksdb.* keys are read by github.com/sluicehq/sluice/state/rocksdb", "state.backend.rocksdb.")
	hint("the Kafka client properties are read by the Kafka connectors, github.com/sluicehq/sluice/source/kafka and sink/kafka",
		"kafka.properties.")
	hint("the Kafka connectors' memory shares are declared by github.com/sluicehq/sluice/source/kafka and sink/kafka",
		"taskmanager.memory.kafka.")
	hint("a key of the job runner, github.com/sluicehq/sluice/runner",
		"rest.", "metrics.reporter.", "log.", "traces.reporter.", "security.ssl.rest.", "execution.signal.action")
}
