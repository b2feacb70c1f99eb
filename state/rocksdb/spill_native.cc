// A write buffer's SST file, written and ingested in one call (spill_native.go).

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rocksdb/c.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/sst_file_writer.h"

// The C API's wrappers as RocksDB's C API (db/c.cc, 7.8) defines them;
// c.h declares them only.
struct rocksdb_t {
	rocksdb::DB* rep;
};
struct rocksdb_column_family_handle_t {
	rocksdb::ColumnFamilyHandle* rep;
};
struct rocksdb_options_t {
	rocksdb::Options rep;
};

namespace {

char* spill_error(const char* what, const rocksdb::Status& s) {
	std::string msg = std::string(what) + ": " + s.ToString();
	return strdup(msg.c_str());
}

// le32 reads a little-endian uint32 (the write buffer's entry header).
uint32_t le32(const unsigned char* p) {
	return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

} // namespace

extern "C" {

// sluice_spill writes the n entries of a write buffer's arena at offs (in
// key order; write_buffer.go's layout: klen, vcap, vlen with the dead bit
// for a deletion, key, value) into a new SST file at path, with opts (the
// column family's table options and compression, as grocksdb's
// SSTFileWriter without a column family), and has db ingest it into cf,
// moving the file. It returns an error (malloc'd) or NULL; on an error the
// file may be left at path.
char* sluice_spill(rocksdb_t* db, rocksdb_column_family_handle_t* cf, const rocksdb_options_t* opts,
		const char* path, const char* arena, const uint64_t* offs, size_t n) {
	const unsigned char* a = reinterpret_cast<const unsigned char*>(arena);
	// The page cache keeps the file: the ingestion reads it back at
	// once, reads and compactions later (grocksdb's writer dropped it,
	// starting the writeback of every file at its end).
	rocksdb::SstFileWriter w(rocksdb::EnvOptions(), opts->rep, nullptr, false /* invalidate_page_cache */);
	rocksdb::Status s = w.Open(path);
	if (!s.ok()) {
		return spill_error("open", s);
	}
	for (size_t i = 0; i < n; i++) {
		const unsigned char* e = a + offs[i];
		uint32_t klen = le32(e);
		uint32_t vlen = le32(e + 8);
		rocksdb::Slice key(reinterpret_cast<const char*>(e + 12), klen);
		if (vlen & 0x80000000u) {
			s = w.Delete(key);
		} else {
			s = w.Put(key, rocksdb::Slice(reinterpret_cast<const char*>(e + 12 + klen), vlen));
		}
		if (!s.ok()) {
			return spill_error("write", s);
		}
	}
	s = w.Finish();
	if (!s.ok()) {
		return spill_error("finish", s);
	}
	rocksdb::IngestExternalFileOptions io;
	io.move_files = true;
	s = db->rep->IngestExternalFile(cf->rep, {std::string(path)}, io);
	if (!s.ok()) {
		return spill_error("ingest", s);
	}
	return nullptr;
}

} // extern "C"
