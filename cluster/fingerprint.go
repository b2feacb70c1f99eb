package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	goruntime "runtime"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/runtime"
)

// planFingerprint is what a worker proves it shares with the coordinator:
// the job graph's fingerprint (its code) and the configuration every
// process must agree on, the checkpointing mode, interval and alignment
// and the kind of state backend, and the checkpoint storage's commit
// protocol (what the coordinator's commit makes durable for the workers'
// writers). A worker started with another one is refused like a worker
// of other code.
func planFingerprint(g *runtime.JobGraph, rcfg runtime.Config) string {
	cp := rcfg.Checkpoint
	backend := "heap"
	if rcfg.StateBackend != nil {
		backend = goruntime.FuncForPC(reflect.ValueOf(rcfg.StateBackend).Pointer()).Name()
	}
	shared := fmt.Sprintf("%s\nmode=%v interval=%v unaligned=%t aligned-timeout=%v\nbackend=%s\ncommit-protocol=%d\n",
		g.Fingerprint(), cp.Mode, cp.Interval, cp.Unaligned, cp.AlignedCheckpointTimeout, backend, storage.CommitProtocol)
	sum := sha256.Sum256([]byte(shared))
	return hex.EncodeToString(sum[:8])
}
