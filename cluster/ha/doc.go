// Package ha owns the high-availability services of a job's coordinator
// as package cluster uses them (Flink's JobManager high availability):
// the Services and Leadership interfaces, their configuration (Config and
// the high-availability.* keys), their errors, and the registry their
// implementation plugs into. The implementation is on etcd, in package
// cluster/ha/etcd, which a program imports when it runs with HA; this
// package and package cluster link no etcd client, gRPC or zap, and
// refuse etcd endpoints in a program that did not import it
// (ErrNotLinked, naming the key and the import), as database/sql refuses
// a driver that is not linked.
//
// # The contract
//
// A coordinator and its standbys campaign for the job (Services.Campaign);
// the one elected leads until it resigns or its leadership is lost
// (Leadership.Lost). Each leadership has an epoch, greater than every
// earlier leader's of the job. Every write of a leader is fenced: the
// store refuses it (ErrFenced) once another candidate can have been
// elected, whatever the writer believes, so that a former leader — paused
// past its lease, another coordinator elected meanwhile — can never
// overwrite what a newer one wrote. Workers find, and follow, the current
// coordinator with Leader and WatchLeader.
//
// PublishCheckpoint moves the checkpoint pointer forward only: an id that
// is not greater than the stored one is refused (ErrStalePointer).
//
// # The exactly-once rule
//
// A checkpoint completes in this order, and no step is taken before the
// previous one succeeded:
//
//  1. every task has acknowledged the checkpoint;
//  2. its _metadata is written, put-if-absent (a checkpoint id is never
//     written twice, whoever writes it);
//  3. the pointer is moved to it by the fenced compare-and-swap
//     (PublishCheckpoint);
//  4. only then are the tasks notified that it is complete, and sinks
//     commit their transactions.
//
// A coordinator that loses its leadership between 2 and 3 fails step 3
// with ErrFenced and never notifies: its sinks' transactions stay
// uncommitted and are aborted by the new leader's restore, which starts
// from the pointer — the newest checkpoint a leader completed. The job
// result and the scaling state are published the same way (fenced).
package ha
