package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"strings"
)

// Backend is the object store checkpoint storage is built on: flat keys,
// whole objects, no rename, no directories. Its shape is S3's, so that an
// object store implements it directly; NewPOSIX implements it on a
// directory.
//
// Keys are slash-separated paths relative to the backend's root
// ("chk-7/_metadata", "shared/rocksdb-0-1a2b"): no leading or trailing
// slash, no empty, "." or ".." element, no backslash or NUL (ValidKey).
// List may also return directory markers, keys that end in "/" (S3 tools
// create them for folders; the POSIX backend reports an empty directory
// so): they hold no data, and callers skip them except to learn that the
// prefix exists.
//
// A missing object is an error wrapping fs.ErrNotExist. Every error names
// the key (as Path gives it). Implementations are safe for concurrent use.
type Backend interface {
	// Path names key for errors, logs and users: a file path, a URL.
	Path(key string) string

	// Put stores data under key, replacing an object already there. The
	// object is durable when Put returns, and visible whole or not at all.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent stores data under key unless an object exists there, in
	// which case it fails with an error wrapping ErrObjectExists and the
	// object is left as it was (S3: a PUT with If-None-Match: *). It is the
	// commit point of a checkpoint: durable when it returns. When it fails
	// otherwise, the object may or may not have been stored (a failure
	// after the publish, a lost answer): the caller discards the key.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Create starts a streamed object (state files, which may be large:
	// S3 uploads them in parts). Nothing is visible under key until
	// Commit; Abort drops what was written.
	Create(ctx context.Context, key string) (ObjectWriter, error)

	// Get opens the object at key for reading.
	Get(ctx context.Context, key string) (Object, error)
	// Stat returns the size of the object at key.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List yields every object whose key starts with prefix (a string
	// prefix, as S3's: "chk-1" matches "chk-10/_metadata"), in no
	// particular order, and stops at the first error it yields. Objects
	// put or deleted while the listing runs may or may not be yielded.
	List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error]
	// DeleteBatch deletes the objects at keys, in as many requests as the
	// store needs (S3 deletes at most 1000 keys per request). A key with
	// no object is not an error, so deleting is idempotent. When some keys
	// cannot be deleted the error is a *DeleteError listing them; the
	// others are deleted.
	DeleteBatch(ctx context.Context, keys []string) error
}

// ObjectWriter is an object being written by Backend.Create. It is used by
// one goroutine.
type ObjectWriter interface {
	io.Writer
	// Commit publishes what was written under the writer's key. On a
	// Syncer backend the object's name is durable only once the directory
	// it is in has been synced; on others it is durable when Commit
	// returns. When Commit fails nothing is published.
	Commit() error
	// Abort drops the object; nothing is published. Abort after Commit
	// does nothing.
	Abort()
}

// Object is an object opened by Backend.Get.
type Object interface {
	io.ReadCloser
	// Size is the object's size in bytes.
	Size() int64
}

// ObjectInfo describes an object.
type ObjectInfo struct {
	Key  string
	Size int64
}

// IsMarker reports whether the entry is a directory marker (a key ending
// in "/"), not an object with data.
func (o ObjectInfo) IsMarker() bool { return strings.HasSuffix(o.Key, "/") }

// Syncer is implemented by backends whose streamed objects are not durable
// on their own (POSIX: a renamed file's directory entry needs the
// directory's fsync). Sync makes durable the names of the objects
// committed directly under prefix ("" for the root, else a key prefix
// ending in "/"). Object stores need not implement it.
type Syncer interface {
	Sync(ctx context.Context, prefix string) error
}

// DeferredSyncer is implemented by backends on which making an object
// durable costs a round trip of its own (POSIX: an fsync per file). A
// checkpoint's state streams are published without it (CreateDeferred:
// Commit renames but does not fsync), and the checkpoint's commit makes
// them durable all at once, in parallel with its own writes, before the
// _metadata that references them is published (PutIfAbsentAfterSync):
// its private files, and the shared files written for it (their handles'
// DurableAt), which later checkpoints may reference but only once it
// completed. The tasks' acknowledgements then wait for no
// fsync, and a checkpoint pays one batch of parallel fsyncs instead of one
// fsync per file, one after the other.
type DeferredSyncer interface {
	// CreateDeferred is Create, except that the committed object is not
	// durable until PutIfAbsentAfterSync names it.
	CreateDeferred(ctx context.Context, key string) (ObjectWriter, error)
	// PutIfAbsentAfterSync is PutIfAbsent of data under key, published
	// only once the objects (keys committed by CreateDeferred writers) and
	// the directories of dirs (key prefixes ending in "/", "" for the
	// root; a missing one holds nothing) are durable. When it returns nil,
	// all of them and key are durable.
	PutIfAbsentAfterSync(ctx context.Context, key string, data []byte, objects, dirs []string) error
}

// FileLinker is implemented by backends that can publish a local file
// under a key without copying it (POSIX on a file system with link(2)).
// A state backend whose files are immutable once written (RocksDB's SST
// files) uploads them this way when the storage is on the same file
// system: the object is a second name of the local file, made durable,
// as CreateDeferred's objects are, by the checkpoint's commit, which
// fsyncs it under its key (the inode the local file shares). The local
// file must never be written again.
type FileLinker interface {
	// LinkDeferred makes key a second name of the local file src, never
	// replacing an object there. It fails when src cannot be linked
	// (another file system, no link(2)); the caller then copies it.
	LinkDeferred(ctx context.Context, key, src string) error
}

// DirMaker is implemented by backends with real directories. Storage makes
// a checkpoint's directory when it opens its location, so that a
// checkpoint that wrote nothing still shows (as a directory marker) and its
// id is never reused. Object stores need not implement it.
type DirMaker interface {
	MakeDir(ctx context.Context, prefix string) error
}

// LockingBackend is implemented by backends that can hold a lock object
// for one holder at a time (the POSIX backend, with flock(2), when its FS
// is a Locker). Lock takes the lock at key, writing holder into it, or
// fails with ErrJobLocked naming the holder found; an error wrapping
// errors.ErrUnsupported means this backend cannot lock after all.
type LockingBackend interface {
	Lock(key, holder string) (unlock func() error, err error)
}

var (
	// ErrObjectExists: PutIfAbsent found an object under its key. It wraps
	// fs.ErrExist.
	ErrObjectExists = fmt.Errorf("object already exists: %w", fs.ErrExist)
	// ErrInvalidKey: a key that is not a clean relative path (ValidKey).
	ErrInvalidKey = errors.New("invalid object key")
)

// ValidKey checks that key is a clean, slash-separated relative path.
// Directory markers (a trailing "/") are valid too.
func ValidKey(key string) error {
	k := strings.TrimSuffix(key, "/")
	if k == "" || strings.HasPrefix(k, "/") || strings.ContainsAny(k, "\\\x00") {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, e := range strings.Split(k, "/") {
		if e == "" || e == "." || e == ".." {
			return fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return nil
}

// DeleteError is the error of a DeleteBatch that left some keys.
type DeleteError struct {
	// Failed are the keys not deleted, each with its cause.
	Failed []KeyError
}

// KeyError is the failure of one key of a batch.
type KeyError struct {
	Key string
	Err error
}

func (e *DeleteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "delete %d objects failed", len(e.Failed))
	for i, f := range e.Failed {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Failed)-i)
			break
		}
		fmt.Fprintf(&b, "; %s: %v", f.Key, f.Err)
	}
	return b.String()
}

func (e *DeleteError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f.Err
	}
	return errs
}

// failedKeys returns the keys err (from DeleteBatch) says were not
// deleted; all of keys when err is not a *DeleteError.
func failedKeys(err error, keys []string) map[string]bool {
	out := map[string]bool{}
	if err == nil {
		return out
	}
	var de *DeleteError
	if !errors.As(err, &de) {
		for _, k := range keys {
			out[k] = true
		}
		return out
	}
	for _, f := range de.Failed {
		out[f.Key] = true
	}
	return out
}

// listKeys collects the keys of the objects under prefix, without
// directory markers unless markers is set.
func listKeys(ctx context.Context, b Backend, prefix string, markers bool) ([]string, error) {
	var keys []string
	for o, err := range b.List(ctx, prefix) {
		if err != nil {
			return keys, err
		}
		if markers || !o.IsMarker() {
			keys = append(keys, o.Key)
		}
	}
	return keys, nil
}
