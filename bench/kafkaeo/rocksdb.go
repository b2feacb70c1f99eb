//go:build !norocksdb

package main

// The RocksDB backend (state.backend.type rocksdb) is linked unless the
// command is built with -tags norocksdb: then the program links no
// RocksDB (no librocksdb.so, no cgo state backend), as a user's program
// with the default heap backend does not, and its heap-backend job's
// memory is that program's (docs/performance.md).
import _ "github.com/sluicehq/sluice/state/rocksdb"
