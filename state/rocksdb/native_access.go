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

static char* sluice_put(rocksdb_t* db, const rocksdb_writeoptions_t* wo,
		rocksdb_column_family_handle_t* cf, const char* key, size_t klen, const char* val, size_t vlen) {
	char* err = NULL;
	rocksdb_put_cf(db, wo, cf, key, klen, val, vlen, &err);
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

// nativePut writes key of cf.
func nativePut(db *grocksdb.DB, wo *grocksdb.WriteOptions, cf *grocksdb.ColumnFamilyHandle, key, value []byte) error {
	if e := C.sluice_put(nativeDB(db), nativeWO(wo), nativeCF(cf), bytesPtr(key), C.size_t(len(key)), bytesPtr(value), C.size_t(len(value))); e != nil {
		return cError(e)
	}
	return nil
}

// cError turns and frees an error string RocksDB allocated.
func cError(e *C.char) error {
	msg := C.GoString(e)
	C.rocksdb_free(unsafe.Pointer(e))
	return errors.New(msg)
}
