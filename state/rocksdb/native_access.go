package rocksdb

/*
#cgo LDFLAGS: -lrocksdb
#include <stdlib.h>
#include <string.h>
#include "rocksdb/c.h"

typedef struct {
	long long n; // value length; -1: not found; -2: error
	char* err;
} sluice_get_result;

// sluice_get reads key into buf when its value fits in cap bytes, and
// returns the value's length either way, so that a caller whose buffer is
// too small grows it and asks again. One call: no value copy in C memory
// for the caller to free, no Go allocation.
static sluice_get_result sluice_get(rocksdb_t* db, const rocksdb_readoptions_t* ro,
		rocksdb_column_family_handle_t* cf, const char* key, size_t klen, char* buf, size_t cap) {
	sluice_get_result r = {-1, NULL};
	rocksdb_pinnableslice_t* p = rocksdb_get_pinned_cf(db, ro, cf, key, klen, &r.err);
	if (r.err != NULL) {
		r.n = -2;
		return r;
	}
	if (p == NULL) {
		return r;
	}
	size_t vlen;
	const char* v = rocksdb_pinnableslice_value(p, &vlen);
	if (vlen <= cap && vlen > 0) {
		memcpy(buf, v, vlen);
	}
	r.n = (long long)vlen;
	rocksdb_pinnableslice_destroy(p);
	return r;
}

// sluice_write_one writes a put of key (del 0) or a deletion (del 1) into
// cf. With wb, through that batch, cleared first: DB::Put and DB::Delete
// build a write batch of their own on every call (an allocation, a copy
// and a free), which a batch kept from call to call, its memory reused,
// does not. Without wb (a value too large to keep the batch's memory for)
// it is DB::Put or DB::Delete.
static char* sluice_write_one(rocksdb_t* db, const rocksdb_writeoptions_t* wo, rocksdb_writebatch_t* wb,
		rocksdb_column_family_handle_t* cf, const char* key, size_t klen, const char* val, size_t vlen, int del) {
	char* err = NULL;
	if (wb == NULL) {
		if (del) {
			rocksdb_delete_cf(db, wo, cf, key, klen, &err);
		} else {
			rocksdb_put_cf(db, wo, cf, key, klen, val, vlen, &err);
		}
		return err;
	}
	rocksdb_writebatch_clear(wb);
	if (del) {
		rocksdb_writebatch_delete_cf(wb, cf, key, klen);
	} else {
		rocksdb_writebatch_put_cf(wb, cf, key, klen, val, vlen);
	}
	rocksdb_write(db, wo, wb, &err);
	return err;
}
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/linxGnu/grocksdb"
)

// The point reads and writes of the hot path call RocksDB's C API
// directly: grocksdb's GetCF and PutCF cost a C copy of every value, a
// second call to free it and four Go allocations per read-modify-write.
// They need grocksdb's C handles, which v1.7.14 (pinned in go.mod) keeps
// unexported as the first field of DB, ColumnFamilyHandle, ReadOptions and
// WriteOptions; TestNativeAccess checks that against grocksdb's own calls.

func nativeDB(db *grocksdb.DB) *C.rocksdb_t {
	return *(**C.rocksdb_t)(unsafe.Pointer(db))
}

func nativeCF(cf *grocksdb.ColumnFamilyHandle) *C.rocksdb_column_family_handle_t {
	return *(**C.rocksdb_column_family_handle_t)(unsafe.Pointer(cf))
}

func nativeRO(ro *grocksdb.ReadOptions) *C.rocksdb_readoptions_t {
	return *(**C.rocksdb_readoptions_t)(unsafe.Pointer(ro))
}

func nativeWO(wo *grocksdb.WriteOptions) *C.rocksdb_writeoptions_t {
	return *(**C.rocksdb_writeoptions_t)(unsafe.Pointer(wo))
}

// bytesPtr is the address of b's first byte, or nil for an empty b.
func bytesPtr(b []byte) *C.char {
	if len(b) == 0 {
		return nil
	}
	return (*C.char)(unsafe.Pointer(&b[0]))
}

// nativeGet reads key of cf into buf[:0] (grown as needed) and returns the
// value, or ok false if there is none.
func nativeGet(db *grocksdb.DB, ro *grocksdb.ReadOptions, cf *grocksdb.ColumnFamilyHandle, key, buf []byte) (val []byte, ok bool, err error) {
	for {
		buf = buf[:cap(buf)]
		r := C.sluice_get(nativeDB(db), nativeRO(ro), nativeCF(cf), bytesPtr(key), C.size_t(len(key)), bytesPtr(buf), C.size_t(len(buf)))
		switch {
		case r.n == -2:
			return buf[:0], false, cError(r.err)
		case r.n < 0:
			return buf[:0], false, nil
		case int(r.n) <= len(buf):
			return buf[:r.n], true, nil
		}
		buf = make([]byte, 0, int(r.n)+int(r.n)/4)
	}
}

// pointWriter writes single puts and deletions through one RocksDB write
// batch it keeps (sluice_write_one). It belongs to one goroutine at a
// time: the backend's, on the task goroutine.
type pointWriter struct {
	wb *C.rocksdb_writebatch_t
}

// maxKeptWrite is the largest put whose bytes pointWriter's batch keeps
// allocated after it: a larger one is written without the batch.
const maxKeptWrite = 64 << 10

func (w *pointWriter) write(db *grocksdb.DB, wo *grocksdb.WriteOptions, cf *grocksdb.ColumnFamilyHandle, key, value []byte, del bool) error {
	wb := w.wb
	if len(key)+len(value) > maxKeptWrite {
		wb = nil
	} else if wb == nil {
		w.wb = C.rocksdb_writebatch_create()
		wb = w.wb
	}
	var d C.int
	if del {
		d = 1
	}
	if e := C.sluice_write_one(nativeDB(db), nativeWO(wo), wb, nativeCF(cf), bytesPtr(key), C.size_t(len(key)), bytesPtr(value), C.size_t(len(value)), d); e != nil {
		return cError(e)
	}
	return nil
}

// put writes value as key's in cf.
func (w *pointWriter) put(db *grocksdb.DB, wo *grocksdb.WriteOptions, cf *grocksdb.ColumnFamilyHandle, key, value []byte) error {
	return w.write(db, wo, cf, key, value, false)
}

// del deletes key in cf.
func (w *pointWriter) del(db *grocksdb.DB, wo *grocksdb.WriteOptions, cf *grocksdb.ColumnFamilyHandle, key []byte) error {
	return w.write(db, wo, cf, key, nil, true)
}

// destroy frees the batch; the writer can be used again after.
func (w *pointWriter) destroy() {
	if w.wb != nil {
		C.rocksdb_writebatch_destroy(w.wb)
		w.wb = nil
	}
}

// cError turns and frees an error string RocksDB allocated.
func cError(e *C.char) error {
	msg := C.GoString(e)
	C.rocksdb_free(unsafe.Pointer(e))
	return errors.New(msg)
}
