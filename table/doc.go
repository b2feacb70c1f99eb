// Package table owns tables on the DataStream API: a table is a changelog
// of upserts and deletes per key (Change), from a compacted Kafka topic
// (package table/kafkatable), from any stream, or out of a join; an
// operator that consumes a table keeps it in keyed state (heap or
// RocksDB, checkpointed and rescaled like all keyed state), and a table's
// changes can go out to Kafka again as an upsert changelog (the latest
// value per key, a tombstone for a delete; exactly once with the job's
// checkpoints).
//
// The joins, each as Kafka Streams or Flink defines it (docs/tables.md
// has the semantics in full):
//
//	StreamJoin, StreamLeftJoin        stream-table, processing time: the table's current value (KStream-KTable)
//	TemporalJoin, TemporalLeftJoin    stream-table, event time: the version valid at the record's
//	                                  timestamp (Flink's temporal join, a versioned table)
//	Join, LeftJoin, OuterJoin         table-table on the key, updates from both sides (KTable-KTable)
//	ForeignKeyJoin, ForeignKeyLeftJoin table-table on a foreign key of the left value
//	GlobalJoin, GlobalLeftJoin        stream-table where every subtask holds the whole table (GlobalKTable)
//
// Materialize keeps a table in an operator of its own and makes it
// queryable by name while the job runs (sluice.Job.QueryState, the REST
// API, api.Client.QueryState).
//
// The package builds on the root's keyed operators (Process,
// KeyedCoProcess, ProcessBroadcast): a join is a keyed co-process
// function with its state and timers, nothing the runtime treats apart.
package table
