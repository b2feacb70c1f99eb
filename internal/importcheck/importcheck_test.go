package importcheck

import (
	"slices"
	"testing"
)

func TestIsConnector(t *testing.T) {
	for path, want := range map[string]bool{
		Module + "/source/kafka":     true,
		Module + "/sink/kafka":       true,
		Module + "/sink/filesink":    true,
		Module + "/source":           false,
		Module + "/sink":             false,
		Module + "/sinkhole":         false,
		Module + "/metrics/report":   false,
		"example.com/x/source/kafka": false,
	} {
		if got := IsConnector(path); got != want {
			t.Errorf("IsConnector(%s) = %t, want %t", path, got, want)
		}
	}
}

// The check sees a connector where there is one: this package's own
// dependencies have none, source/kafka's list has itself.
func TestDepsSeesConnectors(t *testing.T) {
	found := false
	for _, d := range Deps(t, "../../source/kafka") {
		found = found || IsConnector(d)
	}
	if !found {
		t.Fatal("the deps of source/kafka contain no connector: the check could never fail")
	}
}

// Linked sees a heavy dependency where there is one: the S3 backend
// lets the AWS SDK in.
func TestLinkedSeesHeavyDependencies(t *testing.T) {
	found := Linked(t, "../../checkpoint/storage/s3", Heavy...)
	want := "github.com/aws/aws-sdk-go-v2/service/s3 (imported by " + Module + "/checkpoint/storage/s3)"
	if !slices.Contains(found, want) {
		t.Fatalf("Linked = %q, want it to hold %q: the check could never fail", found, want)
	}
}

// Linked sees the etcd client, gRPC and zap where the HA services let
// them in.
func TestLinkedSeesTheHAPlugIn(t *testing.T) {
	found := Linked(t, "../../cluster/ha/etcd", Heavy...)
	for _, want := range []string{
		"go.etcd.io/etcd/client/v3 (imported by " + Module + "/cluster/ha/etcd)",
		"go.uber.org/zap (imported by " + Module + "/cluster/ha/etcd)",
		"google.golang.org/grpc (imported by " + Module + "/cluster/ha/etcd)",
	} {
		if !slices.Contains(found, want) {
			t.Errorf("Linked = %q, want it to hold %q: the check could never fail", found, want)
		}
	}
}
