package control

import (
	"errors"

	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/runtime/network"
)

// Errors of the control plane; the errors returned wrap them.
var (
	// ErrInvalidConfig: a ServerConfig or ClientConfig that cannot work.
	ErrInvalidConfig = errors.New("invalid control plane configuration")
	// ErrRefused: the coordinator refused the worker's registration.
	ErrRefused = errors.New("registration refused")
	// ErrFingerprintMismatch: the worker built another job plan than the
	// coordinator's: it runs different code.
	ErrFingerprintMismatch = errors.New("job plan fingerprint mismatch")
	// ErrIdentityMismatch: the worker id is bound to another identity
	// (another certificate), or has a live session of another process.
	ErrIdentityMismatch = errors.New("worker id bound to another identity")
	// ErrStaleEpoch: the coordinator's leader epoch is older than one the
	// worker already followed: it is not the leader any more.
	ErrStaleEpoch = errors.New("coordinator of an older leader epoch")
	// ErrHeartbeatTimeout: nothing arrived from the other side for
	// heartbeat.timeout.
	ErrHeartbeatTimeout = errors.New("heartbeat timeout")
	// ErrDisconnected: the stream to the other side broke or was closed by
	// it.
	ErrDisconnected = errors.New("control stream ended")
	// ErrClosed: this side was closed (Server.Close, Client.Close).
	ErrClosed = errors.New("control plane closed")
	// ErrReplaced: the worker registered again on a new stream, which
	// replaces the old one.
	ErrReplaced = errors.New("worker registered again")
	// ErrUnknownWorker: no worker of that id is registered.
	ErrUnknownWorker = errors.New("no such worker registered")
	// ErrDeployFailed: the worker could not deploy its tasks (or carry
	// out a step of a failover region's restart).
	ErrDeployFailed = errors.New("deployment failed on the worker")
	// ErrRegionUnsupported: the worker restarts no failover regions (it
	// did not say so when it registered: older code, or a handler that is
	// no RegionHandler).
	ErrRegionUnsupported = errors.New("the worker restarts no failover regions")
)

// RemoteError is an error that crossed the control plane: the text of the
// sender's error and whether it suppressed restarts (an error of the
// runtime's or of a connector that implements SuppressRestarts() bool).
// It answers SuppressRestarts the same, so the runtime's restart decision
// is the one the sender's error asked for.
type RemoteError struct {
	Text     string
	Suppress bool
	// Sentinel is the error of wireSentinels the sender's error matched,
	// which errors.Is then matches here too; nil for none.
	Sentinel error
}

func (e *RemoteError) Error() string { return e.Text }

// Is matches the sentinel the sender's error matched.
func (e *RemoteError) Is(target error) bool { return e.Sentinel != nil && target == e.Sentinel }

// wireSentinels are the errors callers match with errors.Is across the
// control plane, by their text: a worker's deployment refused for want of
// network buffers fails the job with the same sentinel as in one process;
// a query a worker could not answer is refused with the same status.
var wireSentinels = []error{network.ErrInsufficientNetworkBuffers,
	runtime.ErrQueryUnavailable, runtime.ErrUnknownQueryableState, runtime.ErrQueryKey}

// SuppressRestarts reports whether the sender's error suppressed restarts.
func (e *RemoteError) SuppressRestarts() bool { return e.Suppress }

// wireError is an error on the wire; nil for no error.
type wireError struct {
	Text     string `json:"text"`
	Suppress bool   `json:"suppress_restarts,omitempty"`
	Sentinel string `json:"sentinel,omitempty"`
}

type restartSuppressor interface{ SuppressRestarts() bool }

// suppressesRestarts is the runtime's test: err, or an error it wraps,
// says the job must not restart.
func suppressesRestarts(err error) bool {
	var s restartSuppressor
	return errors.As(err, &s) && s.SuppressRestarts()
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Text: err.Error(), Suppress: suppressesRestarts(err)}
	for _, s := range wireSentinels {
		if errors.Is(err, s) {
			w.Sentinel = s.Error()
			break
		}
	}
	return w
}

func (w *wireError) err() error {
	if w == nil {
		return nil
	}
	e := &RemoteError{Text: w.Text, Suppress: w.Suppress}
	for _, s := range wireSentinels {
		if w.Sentinel == s.Error() {
			e.Sentinel = s
		}
	}
	return e
}
