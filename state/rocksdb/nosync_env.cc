// The local database's file system without syncs (nosync_env.go).

#include <atomic>
#include <memory>
#include <string>

#include "rocksdb/c.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"

// rocksdb_env_t as RocksDB's C API (db/c.cc, 7.8) defines it: the C API
// takes an Env only in this wrapper, whose definition is not in c.h.
struct rocksdb_env_t {
	rocksdb::Env* rep;
	bool is_default;
};

namespace {

using rocksdb::DirFsyncOptions;
using rocksdb::FileOptions;
using rocksdb::FileSystem;
using rocksdb::FSDirectory;
using rocksdb::FSRandomRWFile;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;

std::atomic<unsigned long long> skipped{0};

IOStatus skip() {
	skipped.fetch_add(1, std::memory_order_relaxed);
	return IOStatus::OK();
}

class NoSyncWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
public:
	explicit NoSyncWritableFile(std::unique_ptr<FSWritableFile>&& t)
		: rocksdb::FSWritableFileOwnerWrapper(std::move(t)) {}
	IOStatus Sync(const IOOptions&, IODebugContext*) override { return skip(); }
	IOStatus Fsync(const IOOptions&, IODebugContext*) override { return skip(); }
	IOStatus RangeSync(uint64_t, uint64_t, const IOOptions&, IODebugContext*) override { return skip(); }
};

class NoSyncRandomRWFile : public rocksdb::FSRandomRWFileOwnerWrapper {
public:
	explicit NoSyncRandomRWFile(std::unique_ptr<FSRandomRWFile>&& t)
		: rocksdb::FSRandomRWFileOwnerWrapper(std::move(t)) {}
	IOStatus Sync(const IOOptions&, IODebugContext*) override { return skip(); }
	IOStatus Fsync(const IOOptions&, IODebugContext*) override { return skip(); }
};

class NoSyncDirectory : public rocksdb::FSDirectoryWrapper {
public:
	explicit NoSyncDirectory(std::unique_ptr<FSDirectory>&& t)
		: rocksdb::FSDirectoryWrapper(std::move(t)) {}
	IOStatus Fsync(const IOOptions&, IODebugContext*) override { return skip(); }
	IOStatus FsyncWithDirOptions(const IOOptions&, IODebugContext*, const DirFsyncOptions&) override {
		return skip();
	}
};

class NoSyncFileSystem : public rocksdb::FileSystemWrapper {
public:
	explicit NoSyncFileSystem(const std::shared_ptr<FileSystem>& t)
		: rocksdb::FileSystemWrapper(t) {}
	const char* Name() const override { return "SluiceNoSyncFileSystem"; }

	IOStatus NewWritableFile(const std::string& f, const FileOptions& o,
			std::unique_ptr<FSWritableFile>* r, IODebugContext* dbg) override {
		return wrap(target()->NewWritableFile(f, o, r, dbg), r);
	}
	IOStatus ReopenWritableFile(const std::string& f, const FileOptions& o,
			std::unique_ptr<FSWritableFile>* r, IODebugContext* dbg) override {
		return wrap(target()->ReopenWritableFile(f, o, r, dbg), r);
	}
	IOStatus ReuseWritableFile(const std::string& f, const std::string& old, const FileOptions& o,
			std::unique_ptr<FSWritableFile>* r, IODebugContext* dbg) override {
		return wrap(target()->ReuseWritableFile(f, old, o, r, dbg), r);
	}
	IOStatus NewRandomRWFile(const std::string& f, const FileOptions& o,
			std::unique_ptr<FSRandomRWFile>* r, IODebugContext* dbg) override {
		IOStatus s = target()->NewRandomRWFile(f, o, r, dbg);
		if (s.ok() && *r) {
			r->reset(new NoSyncRandomRWFile(std::move(*r)));
		}
		return s;
	}
	IOStatus NewDirectory(const std::string& name, const IOOptions& io,
			std::unique_ptr<FSDirectory>* r, IODebugContext* dbg) override {
		IOStatus s = target()->NewDirectory(name, io, r, dbg);
		if (s.ok() && *r) {
			r->reset(new NoSyncDirectory(std::move(*r)));
		}
		return s;
	}

private:
	static IOStatus wrap(IOStatus s, std::unique_ptr<FSWritableFile>* r) {
		if (s.ok() && *r) {
			r->reset(new NoSyncWritableFile(std::move(*r)));
		}
		return s;
	}
};

} // namespace

extern "C" {

// sluice_nosync_env returns the process's Env whose file system never
// syncs (RocksDB's default Env's threads, the default file system's
// files); it lives as long as the process.
rocksdb_env_t* sluice_nosync_env() {
	static rocksdb_env_t* env = [] {
		std::shared_ptr<FileSystem> fs = std::make_shared<NoSyncFileSystem>(FileSystem::Default());
		auto* e = new rocksdb_env_t;
		e->rep = rocksdb::NewCompositeEnv(fs).release();
		e->is_default = false;
		return e;
	}();
	return env;
}

// sluice_nosync_skipped is how many syncs the file system skipped.
unsigned long long sluice_nosync_skipped() {
	return skipped.load(std::memory_order_relaxed);
}

} // extern "C"
