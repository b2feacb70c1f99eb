// Package importcheck lets a test assert which packages a package does
// not depend on, from `go list -deps` (the build's own view, test files
// excluded).
package importcheck

import (
	"os/exec"
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
