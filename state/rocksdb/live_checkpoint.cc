// The live files of the database for a checkpoint (live_checkpoint.go).

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rocksdb/c.h"
#include "rocksdb/db.h"

// rocksdb_t as RocksDB's C API (db/c.cc, 7.8) defines it; c.h has no
// GetLiveFiles.
struct rocksdb_t {
	rocksdb::DB* rep;
};

static char* status_error(const rocksdb::Status& s) {
	return strdup(s.ToString().c_str());
}

extern "C" {

// sluice_live_files disables the database's file deletions, flushes its
// memtables and lists its live files (names from the database directory,
// each followed by a newline, in a malloc'd buffer) and the MANIFEST's
// valid size. On success the caller enables file deletions again once it
// has read the files; on an error (returned, malloc'd) they are enabled.
char* sluice_live_files(rocksdb_t* db, char** names, size_t* names_len, uint64_t* manifest_size) {
	rocksdb::Status s = db->rep->DisableFileDeletions();
	if (!s.ok()) {
		return status_error(s);
	}
	std::vector<std::string> files;
	uint64_t size = 0;
	s = db->rep->GetLiveFiles(files, &size, true /* flush the memtables */);
	if (!s.ok()) {
		db->rep->EnableFileDeletions(false);
		return status_error(s);
	}
	std::string all;
	for (const auto& f : files) {
		all += f;
		all.push_back('\n');
	}
	char* out = static_cast<char*>(malloc(all.size() + 1));
	memcpy(out, all.data(), all.size());
	out[all.size()] = 0;
	*names = out;
	*names_len = all.size();
	*manifest_size = size;
	return nullptr;
}

} // extern "C"
