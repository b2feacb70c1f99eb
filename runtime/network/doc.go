// Package network owns the exchange of records between Tasks: fixed-size
// buffers and their bounded pools, result partitions and their
// subpartitions on the producing side, input gates and their channels on
// the consuming side, credit-based flow control between them, the framing
// of records, and the transport that carries channels between processes
// over TCP. In process and remote, the exchange behaves like Flink's
// credit-based exchange, so that memory is bounded and backpressure is
// real.
//
// # Partitions, gates and channels
//
// A producing Task owns a ResultPartition with one subpartition per
// consuming subtask; a consuming Task owns an InputGate with one input
// channel per producing subtask. Connect wires subpartition s of a
// partition to one channel of a gate, in process, before the job starts;
// Transport.ConnectRemote wires a channel to a subpartition published by
// another process's Transport.
//
// # Buffers and pools
//
// Every buffer has Config.BufferSize bytes (32 KiB by default) and comes
// from a bounded pool; buffers are allocated lazily and never more than the
// pool holds, so memory never grows with the input rate:
//
//   - a partition's output pool has
//     numSubpartitions*ExclusiveBuffersPerChannel plus
//     FloatingBuffersPerGate buffers;
//   - each input channel has ExclusiveBuffersPerChannel (2) exclusive buffers;
//   - each gate has FloatingBuffersPerGate (8) floating buffers that its
//     channels share; with a process BufferPool (Config.Pool) the gate
//     owns the first and borrows the others from the pool, which bounds
//     the buffers of every partition and gate of the process.
//
// The producer writes records into a buffer of its output pool. A buffer is
// finished and queued to its subpartition when it is full or when the Task
// flushes it (Flush, FlushAll: every buffer timeout, or after each record
// when the timeout is 0). When a record needs a new buffer and the output
// pool is dry, WriteRecord blocks until one is recycled: that is
// backpressure, and the time spent so is reported as BackPressuredNanos.
// Available tells the Task cheaply whether a buffer is free, so it can wait
// for its mailbox instead of blocking in the middle of a record.
//
// # Credit
//
// The two ends of a channel talk only through the messages of the credit
// protocol (credit.go), the same in process as over a network: a
// subpartition knows its channel as a downstream, a channel knows its
// subpartition as an upstream. Connect wires the two ends of one process to
// each other; a remote exchange puts a connection in between (below).
//
// A channel's credit is the buffers it has set aside and announced with an
// add-credit message: its exclusive buffers at first and each time one is
// recycled, plus floating buffers it takes from its gate. A data buffer at
// the head of a subpartition queue is sent only against credit: its bytes
// are copied into a consumer buffer (exclusive first, then floating) and
// the producer buffer goes back to the output pool. Every buffer and event
// sent carries the backlog behind it; when data is queued without credit
// and the consumer believes nothing is, the producer announces the backlog.
// As in Flink, a channel requires credit for the backlog plus as many
// buffers as it has exclusive ones, and takes floating buffers until it has
// that. One whose gate has no floating buffer left waits in the gate's FIFO
// queue; a recycled floating buffer goes to the channel that has waited
// longest and still requires it, so channels share the floating buffers
// fairly. An exclusive buffer recycled while the channel holds more than it
// requires takes the place of a floating one, which goes back to the gate.
//
// Messages are delivered synchronously on whichever goroutine sends them:
// the producer when it queues a buffer, the consumer when it recycles one.
// A consumer's message never blocks: if the subpartition's lock is taken,
// the goroutine holding it applies the message before letting go, and
// credit for a subpartition with no data waiting stays in its inbox until
// the producer needs it. In process there are no goroutines of the
// network's own.
//
// # Records
//
// A record is the caller's opaque bytes, framed as a uvarint length and the
// bytes; it may span several buffers. RecordReader reassembles the records
// of one channel, recycling each buffer once it is used up. Neither
// WriteRecord nor RecordReader.Next allocates or takes a lock per record;
// locks are taken once per buffer.
//
// # Events
//
// Events are the closed set of package event (barriers, watermarks,
// cancellation markers, end of data, end of partition), passed in process
// as Go values, and travel in the same queues as the data, in order;
// event.EndOfPartition, added by ResultPartition.Finish, is the only one the
// network looks at, and the gate delivers it once per channel. Events need no credit: an
// event at the head of a subpartition queue is transferred at once. An
// event never splits a record: the subpartition's partially filled buffer
// is finished and queued before the event.
//
// # Priority events
//
// A priority event (an unaligned checkpoint barrier) is put at the head of
// its queue and overtakes the data queued before it. On the producer side,
// AddPriorityEvent returns copies of the queued buffers it overtook: the
// output channel state of the checkpoint. It is then transferred at once,
// and on the consumer side it overtakes the buffers received but not yet
// polled; Poll delivers it before anything else, with copies of those
// buffers in BufferOrEvent.Overtaken (the part of the input channel state
// already in the gate). The overtaken buffers are still delivered and
// processed after the event: a priority event overtakes only data that ends
// up in channel state. PromoteEvent turns an already queued event (an
// aligned barrier whose checkpoint timed out) into a priority event, on
// either side, and returns the buffers it overtook.
//
// # Aligned checkpoints
//
// InputGate.Block makes Poll skip a channel whose barrier has arrived until
// Unblock; its data stays queued and holds its credit, so the producer of a
// blocked channel is backpressured.
//
// # Remote exchange
//
// A Transport listens on TCP (TLS optional) and carries, between
// processes, exactly the credit protocol's messages that Connect passes in
// process. The producing process publishes a partition under a
// PartitionID (Publish); the consuming process wires a gate's channel to
// a subpartition of it (ConnectRemote), which sends a partition request
// carrying the channel's exclusive buffers as initial credit. A request
// that arrives before Publish waits up to RequestTimeout, then fails the
// channel with ErrPartitionNotFound. Between two transports there is one
// connection per direction, dialled by the consuming side on first use;
// its channels are multiplexed on it by a channel id the consumer assigns.
//
// Each end keeps its in-process half: on the producer's side a
// subpartition's downstream encodes each message into the connection's
// send queue (never blocking: data is sent only against credit); on the
// consumer's side the connection's reader applies the frames to the
// channel, which sends credit back the same way. So flow control, floating
// buffers and backlog announcements work as in process, and memory stays
// within the pools on both sides plus, in the send queue, at most twice
// the credit (the batch being filled and the one being written).
//
// A priority event jumps the connection's send queue. It carries the
// number of messages its subpartition sent before it; the consumer
// applies it to the channel once it has applied those (they were sent
// against credit and are already on their way), so in the gate it
// overtakes exactly what it would overtake in process: its Overtaken
// copies and the producer's overtaken buffers are together all the data
// sent before it and not yet polled.
//
// A connection that breaks or cannot be made, Transport.Close, a
// producer's error (partition released, request refused) or a protocol
// error fails every channel on it that has not delivered EndOfPartition:
// InputGate.Err reports it, naming gate, channel, partition and address,
// and Poll delivers nothing more. A channel never resumes; a new attempt
// connects new channels. On the producer's side the subpartitions served
// on a broken connection are cancelled, as a released gate cancels them
// in process. Releasing a gate cancels its remote subpartitions;
// releasing a published partition fails its remote consumers with
// ErrReleased.
//
// Frames: a 4-byte big-endian length (of what follows), a version byte
// (1), a type byte, and the body, whose integers are minimal unsigned
// varints:
//
//	hello    "SLUICE"; the dialler's first frame
//	request  channel, subpartition, credit, buffer size, id length, id
//	credit   channel, n
//	cancel   channel
//	buffer   channel, seq, backlog, the buffer's bytes
//	event    channel, seq, backlog, flags (bit 0: priority), the event in
//	         package event's codec
//	backlog  channel, seq, backlog
//	error    channel (0: the connection, which then closes), code,
//	         message length, message
//
// seq numbers a channel's producer-to-consumer messages from 0. A reader
// checks a frame's length against the limit of its type (a buffer of the
// connection's largest buffer size; about 4 KiB for the others) before
// reading it, and a frame must be used up exactly by its fields: anything
// else is ErrProtocol, the connection is closed, and the peer is told why.
//
// # Goroutines
//
// A ResultPartition's writing methods are called by its producing Task's
// goroutine, and an InputGate's Poll, Block, Unblock and PromoteEvent by its
// consuming Task's goroutine. Buffer.Recycle, Available, Stats, Err and
// Release are safe from any goroutine. The network signals a Task through
// its wake channel (a non-blocking send) when a gate gets something to
// poll or fails, or an output pool that was dry gets a buffer back. A
// Transport runs an accept goroutine, and a reader and a writer goroutine
// per connection; its methods are safe from any goroutine.
package network
