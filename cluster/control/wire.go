package control

import (
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime"
)

// protocolVersion is the version of the frames; both sides must speak
// the same.
const protocolVersion = 1

// maxFrame bounds one encoded frame (an acknowledgement with inline state
// may pass gRPC's default of 4 MiB).
const maxFrame = 64 << 20

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
)

// registerReply answers register.
type registerReply struct {
	Accepted bool   `json:"accepted"`
	Code     string `json:"code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Epoch, JobID, Fingerprint: the coordinator's.
	Epoch             int64  `json:"epoch"`
	JobID             string `json:"job_id"`
	Fingerprint       string `json:"fingerprint"`
	HeartbeatInterval int64  `json:"heartbeat_interval"`
	HeartbeatTimeout  int64  `json:"heartbeat_timeout"`
}

// deployReply is the worker's answer to a Deploy frame of the same Seq.
type deployReply struct {
	Err *wireError `json:"err,omitempty"`
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
	// Seq pairs a Deploy with its DeployReply, a Query with its
	// QueryReply.
	Seq uint64 `json:"seq,omitempty"`

	Register      *register      `json:"register,omitempty"`
	RegisterReply *registerReply `json:"register_reply,omitempty"`
	Heartbeat     bool           `json:"heartbeat,omitempty"`
	Deploy        *Deployment    `json:"deploy,omitempty"`
	DeployReply   *deployReply   `json:"deploy_reply,omitempty"`
	Cancel        *cancelMsg     `json:"cancel,omitempty"`

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
}

// metricsMsg carries a worker's task figures (runtime.TaskMetrics).
type metricsMsg struct {
	Tasks []runtime.TaskMetrics `json:"tasks"`
}

// kind names the frame's payload, for logs.
func (f *frame) kind() string {
	switch {
	case f.Register != nil:
		return "register"
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

// codecName is the gRPC content subtype of the frames.
const codecName = "sluice-control-json"

// jsonCodec carries frames as JSON. Both ends force it, so no protobuf is
// involved.
type jsonCodec struct{}

func (jsonCodec) Name() string { return codecName }

func (jsonCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(encoded); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("control codec: %w", err)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (jsonCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if err := json.Unmarshal(data.Materialize(), v); err != nil {
		return fmt.Errorf("control codec: %w", err)
	}
	return nil
}

func init() { encoding.RegisterCodecV2(jsonCodec{}) }

// The service, written by hand (no protoc): one bidirectional streaming
// method.
const (
	serviceName   = "sluice.control.v1.Control"
	sessionMethod = "/" + serviceName + "/Session"
)

// sessionService is what the service's handler is registered on.
type sessionService interface {
	session(stream grpc.ServerStream) error
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*sessionService)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Session",
		Handler:       func(srv any, stream grpc.ServerStream) error { return srv.(sessionService).session(stream) },
		ServerStreams: true,
		ClientStreams: true,
	}},
	Metadata: "cluster/control",
}
