// Package etcd holds the high-availability services of a job's
// coordinator on etcd (package ha's Services and Leadership): Flink's
// JobManager high availability, with etcd doing the consensus (Sluice has
// none of its own). A program that runs a cluster with HA imports it,
// which registers it with package ha from its init function:
//
//	import _ "github.com/sluicehq/sluice/cluster/ha/etcd"
//
// Package cluster does not import it, so that a program without HA links
// no etcd client, gRPC or zap; with high-availability.etcd.endpoints set
// and this package not imported, a coordinator or worker is refused at
// start (ha.ErrNotLinked).
//
// A coordinator and its standbys campaign for the job; the one elected
// leads until it resigns or its lease is gone, and every write it makes
// to the job's HA state is fenced by its epoch, so that a former leader
// can never overwrite what a newer one wrote. Workers find, and follow,
// the current coordinator by reading or watching the election.
//
// # Keys
//
// Under Config.Prefix (high-availability.etcd.path.root, "/sluice"):
//
//	<prefix>/jobs/<job id>/leader/<lease id>  one key per candidate, bound to its
//	                                          lease, holding the candidate string
//	                                          (the coordinator's RPC address); the
//	                                          leader is the key created first
//	<prefix>/jobs/<job id>/checkpoint         the latest completed checkpoint:
//	                                          JSON {"id","path","run_id","epoch"}
//	<prefix>/jobs/<job id>/result             the job result, opaque bytes
//	<prefix>/jobs/<job id>/scaling            the job's scaling state, opaque bytes
//	                                          (runtime: the parallelism it runs at,
//	                                          the requirements, the autoscaler's
//	                                          decisions), for the next leader
//
// # Leadership and epochs
//
// Campaign is etcd's election recipe (client/v3/concurrency): each
// candidate puts its key under the job's leader prefix with a lease of its
// own (Config.SessionTTL, high-availability.etcd.lease-duration, 15 s),
// kept alive while the process runs; the key with the lowest create
// revision is the leader, and a candidate is elected once every key
// created before its own is gone. The leader's epoch is its key's create
// revision. etcd's revisions only grow and a key is elected only after
// all older ones are deleted, so epochs strictly increase from one leader
// to the next.
//
// A leadership is lost (Lost is closed) when its key is deleted (the lease
// revoked or expired on the server, or Resign), when the client gives up
// keeping its lease alive (no keep-alive answered within the lease
// duration), when a fenced write finds another leader, or when the
// Services are closed. A process that sees Lost must stop acting as the
// leader; but safety does not rest on it noticing in time.
//
// # Fencing
//
// Every write of a leader is one etcd transaction whose compare is the
// fence: the leader's own key still exists with create revision == epoch.
// While that holds no other candidate can have been elected (it would
// need the key gone), and once the key is gone it can never hold again (a
// new key has a new create revision, and the lease it was bound to is
// gone). So a paused former leader — its process stopped past the lease,
// another coordinator elected meanwhile — fails every write it attempts
// when it wakes up, whatever it believes: ErrFenced. The check is never
// short-circuited by what the process thinks of its own leadership: the
// server's answer decides.
//
// PublishCheckpoint moves the checkpoint pointer forward only: it reads
// the stored pointer under the fence, refuses an id that is not greater
// (ErrStalePointer), and writes with a compare-and-swap in one transaction
// with the fence — the fence, and the stored pointer's mod revision being
// the one whose id was found lower. If another write came in between, it
// reads again and decides again.
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
// from the pointer — the newest checkpoint a leader completed. A new
// leader reads LatestCheckpoint after it is elected, restores from it and
// numbers its checkpoints above it; an id that a former leader got as far
// as step 2 with is refused by put-if-absent, and that checkpoint is
// declined, not completed. The job result is published the same way
// (PublishResult, fenced) before any checkpoint is discarded, and so is
// the scaling state (PublishScaling) whenever it changes: with the
// autoscaler running, at every step of its control loop (its metrics
// window, bounded to 256 KiB).
//
// # etcd restarts
//
// etcd keeps leases across its own restart and renews them to their full
// duration when it is back. A leader whose etcd restarts within the lease
// duration keeps its leadership: its client resumes the keep-alives, its
// key and epoch stay, its fenced writes succeed again once etcd answers.
// When etcd stays away longer than the lease duration, the client gives
// up on the lease and the leadership is lost, even though the server
// brings the lease back when it restarts: that lease expires one lease
// duration (and an election timeout) after the restart, or at once when
// the former leader resigns, which is what it should do on Lost. Until
// then its key holds and so would its writes — safe, as no one else can
// be elected meanwhile, but a leader that saw Lost writes no more. Then a
// standby is elected, and the former leader's writes are fenced. A
// standby's campaign outlives an outage: it goes on with its lease, or a
// new one if the outage outlived the lease.
package etcd
