// Package state is what a function remembers: declare keyed state in
// your function's Open with a descriptor (name, codec, TTL) and read and
// write it for the current key in ProcessElement and OnTimer:
//
//	func (d *dedup) Open(ctx *sluice.OperatorContext) (err error) {
//		d.seen, err = state.GetValueState(ctx.KeyedState,
//			state.ValueStateDescriptor[bool]{Name: "seen", TTL: state.TTLConfig{TTL: time.Hour}})
//		return err
//	}
//
// GetValueState, GetListState, GetMapState, GetReducingState and
// GetAggregatingState make the handles (Example_kinds); TTLConfig expires
// entries as Flink's StateTtlConfig (ExampleTTLConfig). State is
// snapshotted with every checkpoint and redistributed by key group on a
// rescale. The heap backend, the default, keeps it in Go memory;
// package state/rocksdb keeps it on local disk. docs/state.md is the
// guide, with what a restore accepts when a state's type changes.
//
// The package owns the state API that user functions use, key groups
// (how keys map to subtasks, so state can be rescaled), and the pure-Go
// heap backend.
//
// Backends: KeyedBackend is byte-level (see the Raw*State interfaces and
// Descriptor.Bind), so the RocksDB backend implements it directly while the
// heap backend keeps decoded values behind it. Snapshots use the canonical
// key-group-framed format (KeyedSnapshotWriter / ReadKeyedSnapshot) that
// every backend restores, which is what makes rescaling and
// backend-independent savepoints work. The shared backend test suite is
// state/statetest.
package state
