package rocksdb

/*
#cgo CXXFLAGS: -std=c++17 -O2
#include "rocksdb/c.h"

rocksdb_env_t* sluice_nosync_env();
unsigned long long sluice_nosync_skipped();
*/
import "C"

import (
	"unsafe"

	"github.com/linxGnu/grocksdb"
)

// The local database needs no durability of its own: the backend deletes
// every database it closes, a restore always builds the database from a
// checkpoint's files (downloaded, or a local copy whose every file is
// checked against the checkpoint's size and CRC32C before it is used),
// and the checkpoint storage's commit syncs what a checkpoint references
// before it is published. So the local database's file system skips every
// sync (nosync_env.cc): the SST file, MANIFEST and directory fsyncs of
// the memtable flush at each checkpoint, the copies and directory syncs
// of the local RocksDB checkpoint, those of compactions and ingestions.
// The data still reaches the disk by the kernel's writeback; nothing
// waits for it. (On the checkpoint's critical path at 20 K records/s with
// 100 ms checkpoints these were about ten syncs in a row, one of them now
// and then tens of milliseconds on a shared disk.)

// useNoSyncEnv makes the databases opened with opts use the file system
// without syncs.
func useNoSyncEnv(opts *grocksdb.Options) {
	C.rocksdb_options_set_env(nativeOpts(opts), C.sluice_nosync_env())
}

// nativeOpts is grocksdb's C handle of opts, its first field (as for
// the handles in native_access.go).
func nativeOpts(opts *grocksdb.Options) *C.rocksdb_options_t {
	return *(**C.rocksdb_options_t)(unsafe.Pointer(opts))
}

// skippedSyncs is how many syncs the file system without syncs skipped in
// this process (tests).
func skippedSyncs() uint64 { return uint64(C.sluice_nosync_skipped()) }
