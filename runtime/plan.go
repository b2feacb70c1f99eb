package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/runtime/scaling"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// Partitioner says how an edge distributes records over the consuming
// subtasks.
type Partitioner int

const (
	// PartitionDefault is forward when both ends have the same parallelism,
	// rebalance otherwise (Flink's default).
	PartitionDefault Partitioner = iota
	// PartitionForward sends subtask i's records to subtask i; both ends
	// must have the same parallelism.
	PartitionForward
	// PartitionRebalance sends records round robin.
	PartitionRebalance
	// PartitionHash sends a record to the subtask owning its key group.
	PartitionHash
	// PartitionBroadcast sends every record to every subtask.
	PartitionBroadcast
)

func (p Partitioner) String() string {
	switch p {
	case PartitionDefault:
		return "DEFAULT"
	case PartitionForward:
		return "FORWARD"
	case PartitionRebalance:
		return "REBALANCE"
	case PartitionHash:
		return "HASH"
	case PartitionBroadcast:
		return "BROADCAST"
	}
	return fmt.Sprintf("Partitioner(%d)", int(p))
}

// SourceDriver is the type-erased source operator of one source subtask
// (operators.Source), as the task loop drives it.
type SourceDriver interface {
	PollNext() (source.Status, error)
	Available() <-chan struct{}
	Close() error
}

// SourceContext is handed to a source node's builder (the source
// operator's context: operators.SourceContext).
type SourceContext = operators.SourceContext

// Node is one operator of a Plan. The typed parts are closures made by the
// generic API, so the runtime itself never sees a record's type.
type Node struct {
	ID              int
	Name            string
	UID             string
	Parallelism     int // 0: the job's default
	MaxParallelism  int // 0: the job's default
	DisableChaining bool
	// Keyed nodes get a keyed state backend for their key-group range.
	Keyed bool
	// Queryable are the keyed states of a keyed node that answer queries
	// against the running job (Job.QueryState).
	Queryable []QueryableState
	// KeyCodec is, for a keyed node, the codec.Codec[K] (as any) of its
	// key: what the keyed backend's keys are encoded with (tools that
	// read keyed state by key, such as package sluicetest, use it).
	KeyCodec any
	Inputs   []*Edge

	// Out describes the node's output type; nil for sinks.
	Out TypeInfo

	// BuildSource makes the driver of a source subtask; out is the node's
	// operators.Output[T] as any.
	BuildSource func(sc *SourceContext, out any) (SourceDriver, error)
	// Partitions, for a source whose records come in a fixed number of
	// splits (source.Partitioned: a Kafka source's partitions), says how
	// many there are now: the reactive mode runs the source at no more
	// parallelism. Nil for other sources.
	Partitions func(ctx context.Context) (int, error)
	// Build makes an operator instance; out is its operators.Output[T] as
	// any (nil for sinks); inputs are its operators.Input[Ti] as any, one
	// per input index.
	Build func(out any) (op operators.Operator, inputs []any, err error)
	// BuildWithSides replaces Build for an operator with side outputs:
	// sides[i] is the operators.Output of Sides[i].
	BuildWithSides func(out any, sides []any) (op operators.Operator, inputs []any, err error)

	// Sides are the side outputs of this operator (Flink's OutputTag):
	// nodes with an output type of their own and no operator, which run in
	// their parent's chain. SideOf is the parent of a side output node.
	Sides  []*Node
	SideOf *Node
}

// IsSide reports whether the node is a side output of another.
func (n *Node) IsSide() bool { return n.SideOf != nil }

// AddSide adds a side output of parent with output type out.
func (p *Plan) AddSide(parent *Node, name string, out TypeInfo) *Node {
	sn := p.Add(&Node{Name: name, UID: parent.UID + "/" + name, Out: out, SideOf: parent,
		Parallelism: parent.Parallelism, MaxParallelism: parent.MaxParallelism, DisableChaining: parent.DisableChaining})
	parent.Sides = append(parent.Sides, sn)
	return sn
}

// IsSource reports whether the node is a source.
func (n *Node) IsSource() bool { return n.BuildSource != nil }

// Edge connects the output of From to input InputIndex of To.
type Edge struct {
	From, To    *Node
	Partitioner Partitioner
	InputIndex  int
	// KeyHash is, for PartitionHash, a func(v T, scratch []byte) (uint32,
	// []byte) giving the hash of the key of a record of From's output type
	// T (state.HashKey of the encoded key, encoded into scratch, which it
	// returns for reuse); the key group is hash mod the consumer's max
	// parallelism.
	KeyHash any
}

// Plan is the logical dataflow built by the API.
type Plan struct {
	Nodes []*Node
}

// Add appends a node and gives it its ID.
func (p *Plan) Add(n *Node) *Node {
	n.ID = len(p.Nodes)
	p.Nodes = append(p.Nodes, n)
	return n
}

// Connect adds an edge from one node to an input of another.
func (p *Plan) Connect(from, to *Node, part Partitioner, inputIndex int, keyHash any) *Edge {
	e := &Edge{From: from, To: to, Partitioner: part, InputIndex: inputIndex, KeyHash: keyHash}
	to.Inputs = append(to.Inputs, e)
	return e
}

// Config holds the job-wide settings.
type Config struct {
	JobName        string
	Parallelism    int
	MaxParallelism int
	Network        network.Config
	// BufferTimeout is how long a partly filled buffer may wait before it
	// is flushed; 0 flushes after every record.
	BufferTimeout time.Duration
	// Chaining enables operator chaining.
	Chaining bool
	// AutoWatermarkInterval is how often sources emit periodic watermarks.
	AutoWatermarkInterval time.Duration
	Logger                *slog.Logger

	// Checkpoint configures checkpointing; off unless Interval is set.
	Checkpoint checkpoint.Config
	// Restart is the restart strategy after a failure.
	Restart checkpoint.RestartConfig
	// RestartSet tells whether Restart was chosen; otherwise Flink's default
	// applies (exponential-delay with checkpointing, none without).
	RestartSet bool
	// RestoreFrom is a checkpoint or savepoint directory (the one holding
	// _metadata) to start from; empty to resume from the latest usable
	// completed checkpoint of the job's directory when there is one (the
	// default), or to start from no state when there is none.
	RestoreFrom string
	// StateBackend makes the keyed state backend of one keyed operator
	// subtask; nil means the heap backend.
	StateBackend StateBackendFactory
	// CheckpointListeners are called with the statistics of every
	// checkpoint and savepoint that completes or fails, on the
	// coordinator's goroutine: they must return quickly.
	CheckpointListeners []func(checkpoint.Stats)
	// RestoreListeners are called once per attempt that restored state,
	// and once per failover region's restart that did (its attempt's
	// number), with what it restored and how long that took.
	RestoreListeners []func(RestoreInfo)
	// CheckpointFS is the filesystem checkpoints are written to; nil is
	// the operating system's. Tests inject faults through it.
	CheckpointFS storage.FS
	// CheckpointSchemes open checkpoint, savepoint and restore locations
	// given as URLs of their scheme before the registered openers
	// (storage.RegisterScheme): the job's own S3 settings.
	CheckpointSchemes map[string]storage.OpenFunc
	// Executor, when set, runs every attempt's tasks in other processes
	// (the workers of a job on several hosts); this process is then the
	// coordinator only. Checkpointing must be on.
	Executor Executor
	// PublishCheckpoint, when set, is called with each completed
	// checkpoint once its _metadata is written and before any task is
	// told it completed (before sinks commit): HA moves the job's pointer
	// to it, fenced by the leader's epoch. An error fails the checkpoint;
	// one that suppresses restarts (a lost leadership) ends the job here.
	PublishCheckpoint func(id int64, dir string) error
	// PublishedCheckpoint, when set, reads the job's latest checkpoint as
	// the HA store has it (the etcd pointer), at the start of a run: a
	// coordinator taking over a job with no recorded result resumes from
	// it, checked against storage (package lifecycle). ok is false when
	// no checkpoint was published.
	PublishedCheckpoint func() (id int64, path string, ok bool, err error)
	// PublishResult, when set, is called with the job's result before it
	// is recorded and the retention policy applies: HA writes it to etcd,
	// fenced. An error records nothing and deletes nothing (the job ends
	// here as if suspended: another coordinator leads it).
	PublishResult func(res *storage.JobResult) error
	// PublishScaling, when set, is called with the job's ScalingState each
	// time it changes (a rescale's first checkpoint, requirements set, an
	// autoscaler's decision): HA writes it to etcd, fenced, so that a
	// coordinator taking over resumes at that parallelism, not the plan's.
	// An error is logged.
	PublishScaling func(ScalingState) error
	// PublishedScaling, when set, reads the ScalingState the last leader
	// published, at the start of a run that resumes from a checkpoint; ok
	// is false when none was.
	PublishedScaling func() (st ScalingState, ok bool, err error)
	// SkipLock runs without the job directory's lock: HA's leader
	// election keeps one coordinator per job instead (a paused former
	// leader would otherwise hold the lock its successor needs).
	SkipLock bool
	// Unlock, with SkipLock, is called where the lock would be released:
	// once the job ended and its result is recorded, before Wait returns
	// (or when Execute fails). HA resigns the leadership there, so that a
	// standby takes over at once.
	Unlock func() error
	// InlineThreshold is state.storage.fs.memory-threshold: state streams
	// up to this many bytes are kept in _metadata. Nil is
	// storage.DefaultInlineThreshold (20 KiB).
	InlineThreshold *int

	// JobID names the job's directory under the checkpoint directory and
	// its result; stable across restarts of one deployment. Empty: derived
	// from JobName (see JobIDOf).
	JobID string
	// FreshStart starts the run from no state (or from RestoreFrom, when
	// given) whatever the job's directory holds: its completed checkpoints (which it would resume
	// from), a recorded result (finished, cancelled, failed), the HA
	// store's pointer. They stay where they are, never restored by this
	// run; a log line says so.
	FreshStart bool
	// ClaimMode says who owns the snapshot RestoreFrom points to
	// (execution.state-recovery.claim-mode, default NO_CLAIM).
	ClaimMode ClaimMode
	// AllowFallbackPastCommitted lets a restore skip a corrupt completed
	// checkpoint whose transactions may have been committed (their output
	// is then written again); without it such a restore fails with
	// ErrFallbackPastCommitted naming the checkpoint and the file.
	AllowFallbackPastCommitted bool
	// Scaling configures how the job's parallelism changes while it runs
	// (scheduler-mode, the adaptive scheduler's timing): package scaling.
	Scaling scaling.Config
	// CancellationTimeout bounds how long a cancelled or failed-over
	// attempt waits for its tasks to exit (task.cancellation.timeout,
	// default 180 s; 0 waits for ever, as Flink's 0 turns the watchdog off). Past it the job fails with
	// ErrTaskCancellationTimeout, naming the tasks, without a restart.
	CancellationTimeout time.Duration
	// Failover says what restarts when a task fails
	// (jobmanager.execution.failover-strategy): its failover region
	// (FailoverRegion, the zero value and default) or the whole job.
	Failover FailoverStrategy
}

// DefaultCancellationTimeout is Flink's task.cancellation.timeout.
const DefaultCancellationTimeout = 180 * time.Second

// StateBackendFactory makes the keyed state backend of one subtask of a
// keyed operator (state.HeapBackendFactory, or the RocksDB backend's).
type StateBackendFactory = state.BackendFactory

// StateBackendOptions say which subtask a keyed backend serves.
type StateBackendOptions = state.BackendOptions

// HeapStateBackend is the default StateBackendFactory.
var HeapStateBackend StateBackendFactory = state.HeapBackendFactory

// DefaultConfig returns Flink's defaults: parallelism 1, max parallelism
// 128, 32 KiB buffers, 100 ms buffer timeout, chaining on, 200 ms
// watermark interval.
func DefaultConfig() Config {
	return Config{
		JobName:               "sluice job",
		Parallelism:           1,
		MaxParallelism:        128,
		Network:               network.DefaultConfig(),
		BufferTimeout:         100 * time.Millisecond,
		Chaining:              true,
		AutoWatermarkInterval: 200 * time.Millisecond,
		CancellationTimeout:   DefaultCancellationTimeout,
	}
}
