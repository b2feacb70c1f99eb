// Package rocksdb keeps a job's keyed state in RocksDB on local disk, for
// state larger than memory, with incremental checkpoints and local
// recovery (Flink's EmbeddedRocksDBStateBackend):
//
//	env := sluice.NewEnvironment(sluice.WithStateBackend(rocksdb.Factory(localDir, rocksdb.Options{})))
//
// or, from a configuration, state.backend.type: rocksdb with the
// state.backend.rocksdb.* keys (importing this package declares them).
// The zero Options are the defaults; Options.Set takes Flink's key names.
// ExampleFactory runs a job on it; docs/state.md compares it with the
// heap backend.
//
// The package owns the RocksDB keyed state backend (through
// github.com/linxGnu/grocksdb on the system's librocksdb) and its
// incremental checkpoints.
//
// A Backend is one subtask's keyed state: one RocksDB database in the
// subtask's working directory, one column family per state. An entry's key
// is
//
//	key group (2 bytes, big endian) | uvarint len(key) | key | uvarint len(ns) | ns | suffix
//
// with an empty suffix for value, reducing and aggregating states, the
// sequence number of an append for list states (a list is one entry per
// Add/AddAll/Update holding its length-prefixed elements, so appending reads
// nothing) and the map key for map states (a map is iterated over its
// prefix, value by value). The length prefixes make the prefix of a key and
// namespace unambiguous; the key group first makes a key-group range one
// contiguous byte range. The backend implements state.KeyedBackend through
// the state.Raw* stores, which the descriptors bind typed handles to.
//
// Snapshots come in two kinds:
//
//   - Full (Snapshot, Restore): the synchronous part writes the write
//     buffers into RocksDB and takes a RocksDB snapshot (or, with in-place
//     updates of Options.NativeMemtable, a local RocksDB checkpoint), the
//     asynchronous part writes the canonical keyed format of package state,
//     the one every backend reads. Savepoints use it, so they move between
//     backends and parallelisms.
//   - Incremental (SnapshotIncremental, RestoreIncremental), the default for
//     checkpoints: the synchronous part freezes the write buffers (new
//     writes go to new ones, reads see the frozen ones until they are in
//     RocksDB); a background job writes them into RocksDB, flushes the
//     memtables and takes a RocksDB checkpoint (hard links) in a local
//     directory while the task goes on; the asynchronous part waits for it,
//     then uploads the SST files that the last completed checkpoint did not
//     upload and references the others. Writes that go into RocksDB
//     directly (list and map states, a new state) wait for the job, so the
//     checkpoint holds the state at the barrier exactly. The runtime keeps the resulting IncrementalHandle (Encode)
//     and counts references to shared files, as Flink's shared state
//     registry. A restore at another parallelism cuts the overlapping old
//     databases to the owned key groups.
//   - Changelog (Options.Changelog, state.backend.changelog.enabled), a
//     form of incremental checkpoint as Flink's changelog state backend
//     (changelog.go): while every write since the last materialization went
//     through the write buffers, a checkpoint uploads what changed since the
//     last barrier as a segment (the entries the buffers mark as written
//     since, copied at the barrier, and those spilled into RocksDB since),
//     beside the files of that materialization (an earlier RocksDB
//     checkpoint) and the segments since. It freezes no buffer and writes
//     nothing into RocksDB: the buffers keep accumulating across barriers
//     and go into RocksDB when one fills and at a materialization. These
//     are taken in the background every MaterializeInterval, and by the
//     next checkpoint after any other write into RocksDB. A restore applies
//     the segments over the materialization in order.
//
// Defaults follow Flink's options (Options.Set takes their names) except
// where documented on Options: universal compaction, bloom filters, a 64 MiB
// block cache. Value-like states (value, reducing, aggregating) write into
// a write buffer in Go memory (write_buffer.go) that RocksDB receives as
// sorted SST files it ingests (spill.go): when a buffer fills, in the
// background; at every incremental checkpoint, in the background after
// the barrier; at a full snapshot, in its synchronous part. Reads look
// into the buffers first, then into a read cache of the entries the
// buffers put into RocksDB (a quarter of the write buffer's size, emptied
// when full; not for TTL states), then into RocksDB. List and map states write into RocksDB's
// memtables. TTL states get a compaction filter that drops expired
// entries. The point reads and writes of the hot path go to RocksDB's C
// API directly (native_access.go), without grocksdb's per-call copies.
//
// See Backend for what the runtime calls when.
package rocksdb
