// Package storage owns where checkpoints and savepoints are kept: the
// layout of a job's objects, the state streams tasks write in the
// asynchronous part of a snapshot, the commit of a checkpoint's _metadata
// (the data types and their encoding are package snapshot's), and
// recovery: loading the latest usable checkpoint and falling back to an
// older one when it is corrupt or partial; and the job's own files: its
// result (the job result store) and its lock.
//
// Layout, for a checkpoint directory <dir> and a job <job> (its id):
//
//	<dir>/<job>/.lock                   flock(2) of the running process, naming it
//	<dir>/<job>/job-result              how the job ended, written before any
//	                                    checkpoint is deleted (checksummed)
//	<dir>/<job>/chk-<n>/_metadata       written last, atomically: the commit point
//	<dir>/<job>/chk-<n>/<owner>-<rand>  state files owned by checkpoint n
//	<dir>/<job>/shared/<owner>-<rand>   shared files (incremental state) that
//	                                    several checkpoints may reference
//	<savepoint-dir>/savepoint-<job>-<rand>/_metadata and its files: self-contained
//
// Every file is checksummed (CRC32C): state files in their handle, which
// _metadata records; _metadata and job-result in a trailer of their own.
// Reads verify. No shared file that a _metadata in storage references is
// ever deleted (DiscardCheckpoint re-reads every _metadata,
// CollectSharedGarbage deletes only what none references).
//
// Storage works on a Backend, an object store's shape: keys relative to
// the job's root, Put, PutIfAbsent (the commit: a checkpoint is complete
// exactly when chk-<n>/_metadata exists, and it is never replaced),
// streamed Create, Get, Stat, List by prefix (recovery lists chk-*), and
// DeleteBatch (a discard deletes the _metadata first, then the rest).
// POSIX is the implementation on a directory, through FS so that tests
// inject faults (the faultfs subpackage); the lock is a capability of it
// (LockingBackend), as are directory syncs (Syncer) and directories
// (DirMaker). The storagetest subpackage is the contract every Backend
// passes. Storage is safe for concurrent use; a StateStream is used by
// one goroutine.
package storage
