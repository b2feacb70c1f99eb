package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime"
)

// protocolVersion is the version of the frames (3: on a TCP connection
// of their own, conn.go; 2 and before were on gRPC, which a worker or
// coordinator of this version does not speak); both sides must speak
// the same. Version 2 carries every frame in chunks.
const protocolVersion = 3

// Bounds of what a peer can make the other side read.
const (
	// maxFrame bounds one encoded frame of a registered session (an
	// acknowledgement with inline state may be several MiB).
	maxFrame = 64 << 20
	// maxChunk bounds one message on the connection (conn.go): a frame
	// travels as chunks of at most this many bytes (and a flag byte), so
	// what the coordinator reads of a connection before
	// the session knows its peer is at most one chunk.
	maxChunk = 32 << 10
	// maxRegisterFrame bounds the first frame of a session, the
	// registration: one chunk of at most this many bytes.
	maxRegisterFrame = 4 << 10
	// maxIDLen bounds the identifiers of a registration (worker id, host,
	// data address, fingerprint, instance).
	maxIDLen = 256
	// maxUnregistered bounds the connections that have not registered
	// yet.
	maxUnregistered = 64
	// maxConnsPerPeer bounds the connections open at once from one IP
	// address (several workers may share a host).
	maxConnsPerPeer = 64
	// registerTimeout bounds a connection's authentication, and the wait
	// for its registration.
	registerTimeout = 10 * time.Second
)

// Chunk flags: the first byte of every message.
const (
	chunkLast byte = 0 // the frame's last (or only) chunk
	chunkMore byte = 1 // more chunks of the frame follow
)

// chunks splits an encoded frame into the messages that carry it.
func chunks(b []byte) []encoded {
	out := make([]encoded, 0, len(b)/maxChunk+1)
	for {
		n := min(len(b), maxChunk)
		flag := chunkMore
		if n == len(b) {
			flag = chunkLast
		}
		c := make(encoded, 1+n)
		c[0] = flag
		copy(c[1:], b[:n])
		out = append(out, c)
		b = b[n:]
		if flag == chunkLast {
			return out
		}
	}
}

// errFrameTooLarge is a frame past the receiver's limit; the session ends.
var errFrameTooLarge = errors.New("control: frame too large")

// readFrame reads the chunks of one frame from s and decodes it; the
// frame may be at most limit bytes.
func readFrame(s interface{ RecvMsg(any) error }, limit int) (*frame, error) {
	var buf []byte
	for {
		var chunk rawMsg
		if err := s.RecvMsg(&chunk); err != nil {
			return nil, err
		}
		if len(chunk) == 0 || chunk[0] > chunkMore {
			return nil, fmt.Errorf("%w: a message without a chunk flag", errMalformed)
		}
		if len(buf)+len(chunk)-1 > limit {
			return nil, fmt.Errorf("%w: more than %d bytes", errFrameTooLarge, limit)
		}
		if buf == nil && chunk[0] == chunkLast {
			buf = chunk[1:] // one chunk: no copy
		} else {
			buf = append(buf, chunk[1:]...)
		}
		if chunk[0] == chunkLast {
			break
		}
	}
	return decodeFrame(buf)
}

// errMalformed is a frame that is not one.
var errMalformed = errors.New("control: malformed frame")

// decodeFrame decodes one frame's JSON.
func decodeFrame(b []byte) (*frame, error) {
	f := new(frame)
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	return f, nil
}

// rawMsg is a message as its bytes.
type rawMsg []byte

// Deployment describes what one worker runs of one attempt of the job.
type Deployment struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	// Epoch is the coordinator's leader epoch; Server.Deploy sets it.
	Epoch int64 `json:"epoch"`
	// Tasks are the ids of the tasks this worker runs.
	Tasks []checkpoint.TaskID `json:"tasks"`
	// Placement is, for every task id of the job, the id of the worker
	// running it.
	Placement []string `json:"placement"`
	// Peers maps every worker id of Placement to its data-plane address.
	Peers map[string]string `json:"peers"`
	// RunID is the coordinator's run of the job (runtime.WorkerDeployment).
	RunID string `json:"run_id,omitempty"`
	// Restore is the checkpoint or savepoint directory to restore from, ""
	// for none; RestoreOwned says whether the run owns it.
	Restore      string `json:"restore,omitempty"`
	RestoreOwned bool   `json:"restore_owned,omitempty"`
	// Parallelism is every vertex's parallelism (by index) when the job
	// was rescaled (runtime.WorkerDeployment); empty for the plan's.
	Parallelism []int `json:"parallelism,omitempty"`
	// RegionFailover: the coordinator restarts a failed task's failover
	// region alone (runtime.WorkerDeployment); a worker that does not know
	// the field stops all its tasks at a failure, which the coordinator
	// then restarts whole.
	RegionFailover bool `json:"region_failover,omitempty"`
	// Extra is opaque to the control plane: what else the runtime needs.
	Extra []byte `json:"extra,omitempty"`
}

// register is the first frame of a session, from the worker.
type register struct {
	Protocol    int    `json:"protocol"`
	WorkerID    string `json:"worker_id"`
	Slots       int    `json:"slots"`
	DataAddr    string `json:"data_addr"`
	Fingerprint string `json:"fingerprint"`
	Host        string `json:"host"`
	// MinEpoch is the newest leader epoch the worker followed.
	MinEpoch int64 `json:"min_epoch,omitempty"`
	// Features are what the worker can do beyond the protocol's version
	// (a coordinator of the same version without them, or a worker
	// without them, simply does not use them): featureRegionRestart.
	Features []string `json:"features,omitempty"`
	// Instance is random per worker process: a worker id is taken over
	// only by the same process (its new session), never by another one
	// while the session lives.
	Instance string `json:"instance"`
	// The worker's heartbeat settings, nanoseconds, for a warning when
	// they do not fit the coordinator's.
	HeartbeatInterval int64 `json:"heartbeat_interval"`
	HeartbeatTimeout  int64 `json:"heartbeat_timeout"`
}

// Refusal codes of registerReply.
const (
	refusedFingerprint = "fingerprint"
	refusedProtocol    = "protocol"
	refusedEpoch       = "epoch"
	refusedInvalid     = "invalid"
	refusedClosed      = "closed"
	refusedIdentity    = "identity"
)

// registerReply answers register. A refusal carries the code and the
// reason only (and the coordinator's fingerprint when it is the reason).
type registerReply struct {
	Accepted bool   `json:"accepted"`
	Code     string `json:"code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Epoch, JobID, Fingerprint: the coordinator's.
	Epoch             int64  `json:"epoch,omitempty"`
	JobID             string `json:"job_id,omitempty"`
	Fingerprint       string `json:"fingerprint,omitempty"`
	HeartbeatInterval int64  `json:"heartbeat_interval,omitempty"`
	HeartbeatTimeout  int64  `json:"heartbeat_timeout,omitempty"`
}

// deployReply is the worker's answer to a Deploy frame of the same Seq,
// and to a Region frame.
type deployReply struct {
	Err *wireError `json:"err,omitempty"`
}

// featureRegionRestart: the worker takes Region frames (its handler is a
// RegionHandler).
const featureRegionRestart = "region-restart"

// Steps of a failover region's restart (regionMsg.Step).
const (
	regionStop   = "stop"
	regionDeploy = "deploy"
	regionStart  = "start"
)

// regionMsg is one step of a failover region's restart on a worker
// (runtime.RegionRestarter): stop, deploy or start the worker's tasks
// Tasks names, answered by a RegionReply of the same Seq.
type regionMsg struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	Step    string `json:"step"`
	// Tasks name the tasks in the executions to stop (stop), or in their
	// new executions (deploy, start).
	Tasks []runtime.TaskRef `json:"tasks"`
	// Deploy only: runtime.RegionDeployment's.
	RunID           string `json:"run_id,omitempty"`
	OperatorAttempt int    `json:"operator_attempt,omitempty"`
	Restore         string `json:"restore,omitempty"`
	RestoreOwned    bool   `json:"restore_owned,omitempty"`
}

// cancelMsg cancels the worker's tasks of an attempt.
type cancelMsg struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	Epoch   int64  `json:"epoch"`
}

// savepointDir tells the workers where savepoint ID goes.
type savepointDir struct {
	ID  int64  `json:"id"`
	Dir string `json:"dir"`
}

// declineMsg is runtime.DeclineCheckpoint with its error as text.
type declineMsg struct {
	From         runtime.TaskRef   `json:"from"`
	CheckpointID int64             `json:"checkpoint_id"`
	Reason       checkpoint.Reason `json:"reason"`
	Err          *wireError        `json:"err,omitempty"`
}

// taskEventMsg is runtime.TaskEvent with its error as text.
type taskEventMsg struct {
	From runtime.TaskRef       `json:"from"`
	Kind runtime.TaskEventKind `json:"kind"`
	Err  *wireError            `json:"err,omitempty"`
}

// queryMsg asks a worker for the value of a key in a queryable state of
// one of its tasks (runtime.QueryRouter); key is the encoded key.
type queryMsg struct {
	Task checkpoint.TaskID `json:"task"`
	Name string            `json:"name"`
	Key  []byte            `json:"key"`
}

// queryReply answers the queryMsg of the same Seq: the value as JSON, or
// the error.
type queryReply struct {
	Value []byte     `json:"value,omitempty"`
	Found bool       `json:"found,omitempty"`
	Err   *wireError `json:"err,omitempty"`
}

// frame is one message on the stream: the header (leader epoch, job,
// attempt) and exactly one payload.
type frame struct {
	Epoch   int64  `json:"epoch"`
	JobID   string `json:"job,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Seq pairs a Deploy with its DeployReply, a Region with its
	// RegionReply, a Query with its QueryReply.
	Seq uint64 `json:"seq,omitempty"`

	Register      *register      `json:"register,omitempty"`
	RegisterReply *registerReply `json:"register_reply,omitempty"`
	Heartbeat     bool           `json:"heartbeat,omitempty"`
	Deploy        *Deployment    `json:"deploy,omitempty"`
	DeployReply   *deployReply   `json:"deploy_reply,omitempty"`
	Cancel        *cancelMsg     `json:"cancel,omitempty"`
	Region        *regionMsg     `json:"region,omitempty"`
	RegionReply   *deployReply   `json:"region_reply,omitempty"`

	Trigger     *runtime.TriggerCheckpoint      `json:"trigger,omitempty"`
	Notify      *runtime.CheckpointNotification `json:"notify,omitempty"`
	AllowFinish *runtime.TaskRef                `json:"allow_finish,omitempty"`
	StopTask    *runtime.TaskRef                `json:"stop_task,omitempty"`
	Drain       *runtime.TaskRef                `json:"drain_event_time,omitempty"`
	Savepoint   *savepointDir                   `json:"savepoint_dir,omitempty"`

	Ack     *runtime.AcknowledgeCheckpoint `json:"ack,omitempty"`
	Decline *declineMsg                    `json:"decline,omitempty"`
	Event   *taskEventMsg                  `json:"event,omitempty"`
	// Metrics are the figures of the worker's tasks of the attempt.
	Metrics *metricsMsg `json:"metrics,omitempty"`

	Query      *queryMsg   `json:"query,omitempty"`
	QueryReply *queryReply `json:"query_reply,omitempty"`

	// End is the last frame of a side that ends the session (the
	// coordinator, as it refuses or drops a worker): why, in an
	// operator's words. The connection closes after it.
	End string `json:"end,omitempty"`
}

// maxEndLen bounds the reason of an End frame.
const maxEndLen = 1 << 10

// metricsMsg carries a worker's task figures (runtime.TaskMetrics).
type metricsMsg struct {
	Tasks []runtime.TaskMetrics `json:"tasks"`
}

// kind names the frame's payload, for logs.
func (f *frame) kind() string {
	switch {
	case f.Register != nil:
		return "register"
	case f.End != "":
		return "end"
	case f.RegisterReply != nil:
		return "register-reply"
	case f.Heartbeat:
		return "heartbeat"
	case f.Deploy != nil:
		return "deploy"
	case f.DeployReply != nil:
		return "deploy-reply"
	case f.Cancel != nil:
		return "cancel"
	case f.Region != nil:
		return "region-" + f.Region.Step
	case f.RegionReply != nil:
		return "region-reply"
	case f.Trigger != nil:
		return "trigger-checkpoint"
	case f.Notify != nil:
		return "checkpoint-notification"
	case f.AllowFinish != nil:
		return "allow-finish"
	case f.StopTask != nil:
		return "stop-task"
	case f.Drain != nil:
		return "drain-event-time"
	case f.Savepoint != nil:
		return "savepoint-dir"
	case f.Ack != nil:
		return "acknowledge-checkpoint"
	case f.Decline != nil:
		return "decline-checkpoint"
	case f.Event != nil:
		return "task-event"
	case f.Metrics != nil:
		return "metrics"
	case f.Query != nil:
		return "query"
	case f.QueryReply != nil:
		return "query-reply"
	}
	return "empty"
}

// payloadRef is the job and attempt the payload itself names, which must
// be the header's.
func (f *frame) payloadRef() (job string, attempt int, ok bool) {
	switch {
	case f.Deploy != nil:
		return f.Deploy.JobID, f.Deploy.Attempt, true
	case f.Cancel != nil:
		return f.Cancel.JobID, f.Cancel.Attempt, true
	case f.Region != nil:
		return f.Region.JobID, f.Region.Attempt, true
	case f.Trigger != nil:
		return f.Trigger.To.JobID, f.Trigger.To.Attempt, true
	case f.Notify != nil:
		return f.Notify.To.JobID, f.Notify.To.Attempt, true
	case f.AllowFinish != nil:
		return f.AllowFinish.JobID, f.AllowFinish.Attempt, true
	case f.StopTask != nil:
		return f.StopTask.JobID, f.StopTask.Attempt, true
	case f.Drain != nil:
		return f.Drain.JobID, f.Drain.Attempt, true
	case f.Ack != nil:
		return f.Ack.From.JobID, f.Ack.From.Attempt, true
	case f.Decline != nil:
		return f.Decline.From.JobID, f.Decline.From.Attempt, true
	case f.Event != nil:
		return f.Event.From.JobID, f.Event.From.Attempt, true
	}
	return "", 0, false
}

// consistent reports whether the payload's job and attempt are the
// header's.
func (f *frame) consistent() bool {
	job, attempt, ok := f.payloadRef()
	return !ok || (job == f.JobID && attempt == f.Attempt)
}

// encoded is a frame already encoded on the sender's goroutine.
type encoded []byte

func encode(f *frame) (encoded, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("control: encode %s frame: %w", f.kind(), err)
	}
	return b, nil
}
