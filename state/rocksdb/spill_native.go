package rocksdb

/*
#include <stdint.h>
#include <stdlib.h>
#include "rocksdb/c.h"

char* sluice_spill(rocksdb_t* db, rocksdb_column_family_handle_t* cf, const rocksdb_options_t* opts,
	const char* path, const char* arena, const uint64_t* offs, size_t n);
*/
import "C"

import (
	"unsafe"

	"github.com/linxGnu/grocksdb"
)

// A spill (spill.go) writes a frozen write buffer as an SST file and has
// RocksDB ingest it. Through grocksdb that is a cgo call for every entry
// (SSTFileWriter.Put), besides those that make and free the writer, its
// options and the ingestion's: at every checkpoint, for every entry of
// every value state. nativeSpill makes it one call (spill_native.cc),
// which reads the entries from the buffer's arena in the order sorted
// gave: no per-entry call, no copy of the entries into C memory. It takes
// the C handles of grocksdb's structs as native_access.go does
// (nativeOpts: nosync_env.go); TestNativeSpill checks them.

// nativeSpill writes the entries of w at offs (in key order) into a new
// SST file at path, with the table options and compression of opts, and
// has db ingest it into cf, moving the file.
func nativeSpill(db *grocksdb.DB, cf *grocksdb.ColumnFamilyHandle, opts *grocksdb.Options, path string, w *writeBuffer, offs []uint64) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var offp *C.uint64_t
	if len(offs) > 0 {
		offp = (*C.uint64_t)(unsafe.Pointer(&offs[0]))
	}
	if e := C.sluice_spill(nativeDB(db), nativeCF(cf), nativeOpts(opts), cpath, bytesPtr(w.arena), offp, C.size_t(len(offs))); e != nil {
		return cError(e)
	}
	return nil
}
