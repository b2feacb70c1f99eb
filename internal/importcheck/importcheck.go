// Package importcheck lets a test assert which packages a package does
// not depend on, from `go list -deps` (the build's own view, test files
// excluded).
package importcheck

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Module is the module's import path.
const Module = "github.com/sluicehq/sluice"

// IsConnector reports whether path is a connector: a package below
// source/ or sink/ (the interface packages source and sink themselves
// are not).
func IsConnector(path string) bool {
	rest, ok := strings.CutPrefix(path, Module+"/")
	if !ok {
		return false
	}
	return strings.HasPrefix(rest, "source/") || strings.HasPrefix(rest, "sink/")
}

// Deps returns the import paths the package in dir depends on, itself
// included, as `go list -deps` prints them.
func Deps(t testing.TB, dir string) []string {
	t.Helper()
	return goList(t, dir, "-deps", "-f", "{{.ImportPath}}")
}

// Imports returns the import paths the package in dir imports itself
// (not those of its dependencies), as `go list -f {{.Imports}}` prints
// them.
func Imports(t testing.TB, dir string) []string {
	t.Helper()
	return goList(t, dir, "-f", `{{join .Imports " "}}`)
}

// goList runs `go list args .` in dir and returns the words it prints.
func goList(t testing.TB, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append(append([]string{"list"}, args...), ".")...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %s in %s: %v %s", strings.Join(args, " "), dir, err, msg)
	}
	return strings.Fields(string(out))
}

// NoConnectors fails t for every connector the package in dir depends
// on.
func NoConnectors(t *testing.T, dir string) {
	t.Helper()
	deps := Deps(t, dir)
	if len(deps) == 0 {
		t.Fatalf("go list -deps in %s listed nothing", dir)
	}
	for _, d := range deps {
		if IsConnector(d) {
			t.Errorf("%s depends on the connector %s: connectors plug into it, it must not import them", deps[len(deps)-1], d)
		}
	}
}

// Heavy are the module paths a program that runs in one process, with
// Kafka and the heap backend, must not link, nor package cluster and a
// cluster program without HA or S3: the AWS SDK (the S3 checkpoint
// storage), the etcd client, gRPC and zap (the etcd client's transport
// and logger). A program gets them by importing checkpoint/storage/s3 or
// cluster/ha/etcd.
var Heavy = []string{"github.com/aws/", "go.etcd.io/", "google.golang.org/grpc", "go.uber.org/zap"}

// Linked returns the packages the package in dir depends on whose path
// starts with one of prefixes, each with a package that imports it and
// is not one of them (where the program lets them in), sorted.
func Linked(t testing.TB, dir string, prefixes ...string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps in %s: %v", dir, err)
	}
	heavy := func(p string) bool {
		for _, h := range prefixes {
			if strings.HasPrefix(p, h) {
				return true
			}
		}
		return false
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 {
		t.Fatalf("go list -deps in %s listed %d packages", dir, len(lines))
	}
	var found []string
	for _, line := range lines {
		pkg, imports, _ := strings.Cut(line, ":")
		if heavy(pkg) {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if heavy(imp) {
				found = append(found, imp+" (imported by "+pkg+")")
			}
		}
	}
	slices.Sort(found)
	return found
}

// NoneOf fails t when the package in dir depends on a package whose path
// starts with one of prefixes, naming where the program lets it in.
func NoneOf(t *testing.T, dir string, prefixes ...string) {
	t.Helper()
	for _, l := range Linked(t, dir, prefixes...) {
		t.Errorf("%s links %s", dir, l)
	}
}
