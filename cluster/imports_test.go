package cluster_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/importcheck"
)

// Package cluster links no etcd client, zap or AWS SDK: the HA services
// (cluster/ha/etcd) and S3 checkpoints (checkpoint/storage/s3) plug in
// when a program imports them, so that a worker without them is a
// smaller binary (docs/performance.md, "Where the memory goes").
func TestClusterLinksNoPlugIn(t *testing.T) {
	importcheck.NoneOf(t, ".", importcheck.PlugIns...)
	importcheck.NoneOf(t, "ha", importcheck.PlugIns...)
}
