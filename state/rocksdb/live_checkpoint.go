package rocksdb

/*
#include <stdint.h>
#include <stdlib.h>
#include "rocksdb/c.h"

char* sluice_live_files(rocksdb_t* db, char** names, size_t* names_len, uint64_t* manifest_size);
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/state"
)

// An incremental checkpoint without local recovery (Options.LocalRecovery
// off) takes no RocksDB checkpoint: no local directory of hard links, no
// copies of the MANIFEST and CURRENT, nothing to delete after. Its
// background job disables the database's file deletions, flushes the
// memtables and lists the live files (DB::GetLiveFiles, as RocksDB's own
// checkpoint does); it reads the small files into memory (the MANIFEST up
// to the size RocksDB reported, the OPTIONS file, a CURRENT naming that
// MANIFEST), and the upload reads the SST files straight from the
// database directory, where they stay until the snapshot is released
// (file deletions enabled again). The uploaded files are those RocksDB's
// checkpoint would hold, and restore the same way.

// liveFiles runs on a checkpoint's background job: it lists the files of
// the database for checkpoint id, file deletions disabled until
// enableDeletions(db, gen) with the returned generation.
func (b *Backend) liveFiles(id int64) ([]localFile, uint64, error) {
	if b.closing.Load() {
		return nil, 0, fmt.Errorf("rocksdb incremental checkpoint %d: %w", id, state.ErrClosed)
	}
	if b.testHookCheckpoint != nil {
		b.testHookCheckpoint(id, true)
	}
	b.mu.Lock()
	gen := b.dbGen
	b.mu.Unlock()
	var names *C.char
	var n C.size_t
	var manifestSize C.uint64_t
	if e := C.sluice_live_files(nativeDB(b.db), &names, &n, &manifestSize); e != nil {
		return nil, 0, fmt.Errorf("rocksdb incremental checkpoint %d: live files: %w", id, cError(e))
	}
	list := C.GoStringN(names, C.int(n))
	C.free(unsafe.Pointer(names))
	files, err := readLive(b.dbDir, strings.Fields(list), int64(manifestSize))
	if err != nil {
		b.enableDeletions(b.db, gen)
		return nil, 0, fmt.Errorf("rocksdb incremental checkpoint %d: %w", id, err)
	}
	return files, gen, nil
}

// readLive makes the files of a checkpoint from the live files of the
// database in dir (names as GetLiveFiles gives them): the MANIFEST's
// first manifestSize bytes, the OPTIONS file and CURRENT in memory, the
// size of the others (SST files, immutable).
func readLive(dir string, names []string, manifestSize int64) ([]localFile, error) {
	var files []localFile
	manifest := ""
	for _, name := range names {
		name = strings.TrimPrefix(name, "/")
		if !plainName(name) {
			return nil, fmt.Errorf("live file %q", name)
		}
		path := filepath.Join(dir, name)
		switch {
		case name == "CURRENT":
			continue // made below
		case strings.HasPrefix(name, "MANIFEST-"):
			data, err := readPrefix(path, manifestSize)
			if err != nil {
				return nil, err
			}
			manifest = name
			files = append(files, localFile{name: name, size: manifestSize, data: data})
		case strings.HasPrefix(name, "OPTIONS-"):
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			files = append(files, localFile{name: name, size: int64(len(data)), data: data})
		default:
			fi, err := os.Stat(path)
			if err != nil {
				return nil, err
			}
			files = append(files, localFile{name: name, size: fi.Size()})
		}
	}
	if manifest == "" {
		return nil, fmt.Errorf("no MANIFEST among the live files %q", names)
	}
	current := []byte(manifest + "\n")
	files = append(files, localFile{name: "CURRENT", size: int64(len(current)), data: current})
	slices.SortFunc(files, func(a, b localFile) int { return strings.Compare(a.name, b.name) })
	return files, nil
}

// readPrefix reads the first n bytes of the file path.
func readPrefix(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, n)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	return data, nil
}

// enableDeletions enables the file deletions of db again that liveFiles
// disabled, unless db was closed meanwhile (closeDB changes the
// generation first).
func (b *Backend) enableDeletions(db *grocksdb.DB, gen uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || gen != b.dbGen {
		return
	}
	if err := db.EnableFileDeletions(false); err != nil {
		b.log.Warn("rocksdb backend: enable file deletions after a checkpoint", "err", err)
	}
}
