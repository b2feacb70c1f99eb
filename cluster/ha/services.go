package ha

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

var (
	// ErrFenced is wrapped by the error of a fenced write that the store
	// refused because the writer is no longer the leader: its key is gone,
	// another candidate was (or will be) elected. The leadership is lost.
	ErrFenced = errors.New("fenced: no longer the leader")
	// ErrStalePointer is wrapped by the error of PublishCheckpoint when the
	// stored pointer is at or past the checkpoint published.
	ErrStalePointer = errors.New("checkpoint pointer is not newer than the stored one")
	// ErrNoLeader is returned by Leader when the job has no leader.
	ErrNoLeader = errors.New("no leader")
	// ErrLost is wrapped by the error of a lost leadership (Leadership.Err).
	ErrLost = errors.New("leadership lost")
	// ErrInvalidArgument is wrapped by the errors of malformed job ids,
	// candidates and pointers.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrBadPointer is wrapped by the error of a checkpoint key that holds
	// no valid pointer.
	ErrBadPointer = errors.New("not a checkpoint pointer")
	// ErrNotLinked is wrapped by Open's error, and package cluster's at
	// start, when HA is configured but the program does not import the
	// package of its services (EtcdPackage).
	ErrNotLinked = errors.New("high availability is configured, but this program does not link its services")
)

// EtcdPackage is the package of the etcd HA services, which a program
// imports to run with high-availability.etcd.endpoints set:
//
//	import _ "github.com/sluicehq/sluice/cluster/ha/etcd"
const EtcdPackage = "github.com/sluicehq/sluice/cluster/ha/etcd"

// Services are the HA services of the jobs of one process. Their methods
// are safe for concurrent use.
type Services interface {
	// Campaign makes candidate (the coordinator's RPC address, what Leader
	// reports to workers) a candidate for leading the job and blocks
	// until it is elected, or ctx is done (the candidacy is then
	// withdrawn).
	Campaign(ctx context.Context, jobID, candidate string) (Leadership, error)
	// Leader returns the job's current leader, or ErrNoLeader.
	Leader(ctx context.Context, jobID string) (candidate string, epoch int64, err error)
	// WatchLeader reports the job's leader: the current one first (the
	// zero LeaderInfo when there is none), then each change, until ctx is
	// done or the Services are closed, when the channel is closed. A
	// reader that falls behind misses intermediate leaders, never the
	// latest.
	WatchLeader(ctx context.Context, jobID string) <-chan LeaderInfo
	// LatestCheckpoint reads the job's checkpoint pointer; false when no
	// checkpoint was published.
	LatestCheckpoint(ctx context.Context, jobID string) (Pointer, bool, error)
	// Result reads the job's result; false when none was published (or
	// it was cleared).
	Result(ctx context.Context, jobID string) ([]byte, bool, error)
	// Scaling reads the job's scaling state (Leadership.PublishScaling);
	// false when none was published.
	Scaling(ctx context.Context, jobID string) ([]byte, bool, error)
	// Close ends the services; leaderships not resigned are lost.
	Close() error
}

// Leadership is a won election: the job's leader until it is lost. Every
// write is fenced by the epoch (see the package comment). Its methods are
// safe for concurrent use.
type Leadership interface {
	JobID() string
	Candidate() string
	// Epoch is the leadership's epoch: greater than every earlier
	// leader's of the job.
	Epoch() int64
	// Lost is closed once the leadership is lost; Err then says why
	// (wrapping ErrLost).
	Lost() <-chan struct{}
	Err() error
	// Resign gives the leadership up, so that a standby is elected
	// without waiting for the lease.
	Resign(ctx context.Context) error
	// PublishCheckpoint moves the job's pointer forward to p, fenced:
	// ErrFenced when another leader was elected, ErrStalePointer when the
	// stored pointer is at or past p.
	PublishCheckpoint(ctx context.Context, p Pointer) error
	// PublishResult and PublishScaling write the job's result and scaling
	// state, fenced; ClearResult deletes the result.
	PublishResult(ctx context.Context, data []byte) error
	PublishScaling(ctx context.Context, data []byte) error
	ClearResult(ctx context.Context) error
}

// LeaderInfo is a job's leader as workers see it: the candidate string it
// campaigned with and its epoch. The zero LeaderInfo is no leader.
type LeaderInfo struct {
	Candidate string
	Epoch     int64
}

// Pointer is the latest completed checkpoint of a job.
type Pointer struct {
	// ID is the checkpoint id, at least 1.
	ID int64
	// Path is its _metadata directory.
	Path string
	// RunID is the execution that completed it.
	RunID string
}

// Opener opens the Services of an implementation (RegisterType).
type Opener func(ctx context.Context, cfg Config) (Services, error)

var (
	typesMu sync.RWMutex
	types   = map[string]Opener{}
)

// RegisterType makes open the services of high-availability.type typ
// ("etcd"); the implementation's package calls it from its init
// function, as database/sql drivers register. It panics when typ is
// registered twice.
func RegisterType(typ string, open Opener) {
	typesMu.Lock()
	defer typesMu.Unlock()
	if _, dup := types[typ]; dup {
		panic("ha: RegisterType called twice for " + typ)
	}
	types[typ] = open
}

// Linked reports whether the services of high-availability.type typ are
// linked into this program (their package registered them).
func Linked(typ string) bool {
	typesMu.RLock()
	defer typesMu.RUnlock()
	_, ok := types[typ]
	return ok
}

// CheckLinked returns nil when the etcd services are linked, else an
// error wrapping ErrNotLinked that names the key that asked for them
// (and where, when not empty: the caller's flags and variables) and the
// import that links them.
func CheckLinked(where string) error {
	if Linked("etcd") {
		return nil
	}
	key := KeyEndpoints.Name()
	if where != "" {
		key += " (" + where + ")"
	}
	return fmt.Errorf("%w: %s is set; the etcd HA services come with import _ %q",
		ErrNotLinked, key, EtcdPackage)
}

// Open opens the etcd HA services of cfg (the only type there is), or
// fails with ErrNotLinked when the program does not import EtcdPackage.
func Open(ctx context.Context, cfg Config) (Services, error) {
	if err := CheckLinked(""); err != nil {
		return nil, err
	}
	typesMu.RLock()
	open := types["etcd"]
	typesMu.RUnlock()
	return open(ctx, cfg)
}
