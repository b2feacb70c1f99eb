// Package snapshot owns what a checkpoint or savepoint is, as data: its
// metadata (per operator and subtask, the handles of every piece of state,
// the sinks' committables, the task figures), the handles themselves, their
// validation, the versioned and checksummed encoding of _metadata, and the
// shared-file registry that counts which checkpoints reference which
// shared file.
//
// It does no I/O. The deterministic checkpoint core (package checkpoint)
// builds and reads these values without touching storage; package
// checkpoint/storage writes them to, and reads them from, a backend
// (a POSIX directory today, an object store next).
//
// The name is the concept: a snapshot is the state a checkpoint or a
// savepoint captured; its metadata is what makes it restorable.
package snapshot
