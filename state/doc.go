// Package state owns keyed and operator state: the state API that user
// functions use, key groups (how keys map to subtasks, so state can be
// rescaled), and the pure-Go heap backend.
//
// Backends: KeyedBackend is byte-level (see the Raw*State interfaces and
// Descriptor.Bind), so the RocksDB backend implements it directly while the
// heap backend keeps decoded values behind it. Snapshots use the canonical
// key-group-framed format (KeyedSnapshotWriter / ReadKeyedSnapshot) that
// every backend restores, which is what makes rescaling and
// backend-independent savepoints work. The shared backend test suite is
// state/statetest.
package state
