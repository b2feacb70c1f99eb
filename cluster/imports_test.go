package cluster_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/importcheck"
)

// Package cluster links no etcd client, gRPC, zap or AWS SDK: the HA
// services (cluster/ha/etcd) and S3 checkpoints (checkpoint/storage/s3)
// plug in when a program imports them, and the control plane is plain
// TCP, so that a worker without HA or S3 is a smaller binary
// (docs/performance.md, "A cluster worker's binary").
func TestClusterLinksNoPlugIn(t *testing.T) {
	importcheck.NoneOf(t, ".", importcheck.Heavy...)
	importcheck.NoneOf(t, "ha", importcheck.Heavy...)
	importcheck.NoneOf(t, "control", importcheck.Heavy...)
}
