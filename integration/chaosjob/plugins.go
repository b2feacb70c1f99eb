//go:build !lean

package main

// The plug-ins the chaos runs use: checkpoints on S3 (-checkpoints
// s3://...) and HA on etcd (--etcd, high-availability.etcd.*). Built
// with -tags lean the job links neither (no AWS SDK, etcd client, gRPC
// or zap),
// as a job whose checkpoints are on a shared file system and that runs
// without HA would be built: docs/performance.md measures its workers'
// memory against this build's.
import (
	// [start plugins]
	_ "github.com/sluicehq/sluice/checkpoint/storage/s3" // s3:// checkpoints
	_ "github.com/sluicehq/sluice/cluster/ha/etcd"       // --etcd, high-availability.etcd.*
	// [end plugins]
)
