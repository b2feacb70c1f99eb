package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// S3Location returns a fresh s3:// location (a prefix of its own) in the
// bucket of the S3 server that scripts/with-s3 started: it reads
// AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) and S3_BUCKET, the keys and
// region being in the environment too. Without a server the test is
// skipped, except under CI=true, where it fails: CI runs every test with
// one.
func S3Location(t testing.TB) string {
	t.Helper()
	bucket := os.Getenv("S3_BUCKET")
	if bucket == "" || (os.Getenv("AWS_ENDPOINT_URL_S3") == "" && os.Getenv("AWS_ENDPOINT_URL") == "") {
		if os.Getenv("CI") == "true" {
			t.Fatal("no S3 server: AWS_ENDPOINT_URL_S3 and S3_BUCKET are unset (CI runs the tests under scripts/with-s3)")
		}
		t.Skip("no S3 server: run the test under scripts/with-s3 (AWS_ENDPOINT_URL_S3 and S3_BUCKET are unset)")
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	if len(name) > 60 {
		name = name[:60]
	}
	return "s3://" + bucket + "/test-" + name + "-" + hex.EncodeToString(r[:])
}
