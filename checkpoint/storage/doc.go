// Package storage owns checkpoint and savepoint files: the layout on disk,
// the state streams tasks write in the asynchronous part of a snapshot, the
// versioned and checksummed _metadata of a completed checkpoint (written
// atomically), the shared-file registry of incremental checkpoints, and
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
// Reads verify. No shared file that a _metadata on disk references is
// ever deleted (DiscardCheckpoint checks the disk, CollectSharedGarbage
// deletes only what none references).
//
// All file access goes through FS, so that tests inject faults (see the
// faultfs subpackage). Storage is safe for concurrent use; a StateStream
// is used by one goroutine.
package storage
