// Package control owns the control plane between a job's coordinator
// process and its worker processes (Flink's JobMaster and TaskManagers):
// one TCP connection per worker, the session, dialled by the worker to
// the coordinator and authenticated by peerauth (mutual TLS or a shared
// secret) before its first byte, carrying length-prefixed messages both
// ways (conn.go). It links no gRPC: a program without HA links none.
//
// A session opens with the worker's Register (worker id, slots, data-plane
// address, the fingerprint of the job plan it built from its code, host)
// and the coordinator's answer: accepted, with the coordinator's leader
// epoch and job id, or refused with a reason (a plan fingerprint that is
// not the coordinator's fails Dial with ErrFingerprintMismatch). Then:
//
//	coordinator -> worker   Deploy (a Deployment), Cancel, and the runtime's
//	                        TaskGateway messages: TriggerCheckpoint,
//	                        CheckpointNotification, AllowFinish
//	worker -> coordinator   the deployment's answer, and the runtime's
//	                        CoordinatorGateway messages: AcknowledgeCheckpoint,
//	                        DeclineCheckpoint, TaskEvent
//	both ways               Heartbeat, every heartbeat.interval
//
// Every message carries the job id, the attempt and the coordinator's
// leader epoch. A receiver drops, logging at debug level, a message of
// another epoch than the session's, of another job, or of an attempt that
// is not current (the coordinator's current attempt is the newest it
// deployed; a worker's is the newest deployed to it); a sender refuses
// such a gateway message with runtime.ErrStaleMessage. Errors inside
// messages travel as their text and whether they suppress restarts, and
// are rebuilt as a *RemoteError answering the same.
//
// Liveness: each side sends a heartbeat every HeartbeatInterval (Flink's
// heartbeat.interval, 10 s) and ends the session when nothing arrived
// for HeartbeatTimeout (heartbeat.timeout, 50 s): the coordinator then
// reports the worker lost (CoordinatorHandler.WorkerLost), the worker
// the coordinator (Client.Lost), as they do when the stream breaks.
//
// Ordering: the messages of one side are handed to the other side's
// handler in the order they were sent, one at a time, on one goroutine
// per receiver (per Client; per Server for all its workers), and a
// worker's WorkerRegistered comes before its messages, its WorkerLost
// after them. Handlers must return quickly: a handler that blocks delays
// every later message (not the heartbeats: they are read apart). Put the
// work on a goroutine or mailbox of your own, as the runtime's gateways
// do. Sending never waits for the network: messages are encoded on the
// caller's goroutine and queued for the stream.
package control
