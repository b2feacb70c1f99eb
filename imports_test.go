package sluice_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/importcheck"
)

// The root package links no S3, cluster or Kafka client: they plug in
// when a program imports them (plugins.go).
func TestRootLinksNoPlugIn(t *testing.T) {
	importcheck.NoneOf(t, ".", append(importcheck.Heavy, "github.com/twmb/franz-go")...)
}
