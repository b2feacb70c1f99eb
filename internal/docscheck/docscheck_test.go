package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

// readRepo reads the repository's Markdown once per test.
func readRepo(t *testing.T) *Repo {
	t.Helper()
	r, err := ReadRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// guide reports whether a document is one a user reads: the README and
// docs/, whose Go blocks must come from compiled files.
func guide(p string) bool { return p == "README.md" || strings.HasPrefix(p, "docs/") }

// Every relative link of every Markdown file resolves: its file, and the
// heading its anchor names.
func TestLinksResolve(t *testing.T) {
	for _, bad := range readRepo(t).BrokenLinks() {
		t.Error(bad)
	}
}

// Every Go block of the README and docs/ is a region of a compiled file
// (`<!-- code: file#region -->` before it), word for word.
func TestGoBlocksComeFromCompiledFiles(t *testing.T) {
	r := readRepo(t)
	n := 0
	for _, p := range sortedKeys(r.Docs) {
		if !guide(p) {
			continue
		}
		for _, b := range r.Docs[p].Blocks {
			if b.Lang != "go" {
				continue
			}
			n++
			if b.Region == "" {
				t.Errorf("%s:%d: a Go block without a `<!-- code: file#region -->` line before it: take it from a compiled file (an example, a test or an Example function)", p, b.Line)
				continue
			}
			file, name, ok := strings.Cut(b.Region, "#")
			if !ok || !strings.HasSuffix(file, ".go") {
				t.Errorf("%s:%d: code marker %q: want file.go#region", p, b.Line, b.Region)
				continue
			}
			want, err := Region(root, file, name)
			if err != nil {
				t.Errorf("%s:%d: %v", p, b.Line, err)
				continue
			}
			if b.Code != want {
				t.Errorf("%s:%d: the block differs from %s, region %s; copy the region again:\n%s", p, b.Line, file, name, want)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go block found: is the repository where the test thinks?")
	}
}

// The README stays short: what Sluice is, the two commands, one job, the
// figures and the map of the guides.
func TestReadmeIsShort(t *testing.T) {
	d := readRepo(t).Docs["README.md"]
	if d == nil {
		t.Fatal("no README.md")
	}
	if d.NumLines > 220 {
		t.Errorf("README.md has %d lines; keep it under about 200 and move the rest into docs/", d.NumLines)
	}
}

// userPackage reports whether a directory holds a package whose sentinel
// errors a user of Sluice may meet: everything but internal code, the
// examples, benchmarks, integration tests and test fixtures.
func userPackage(dir string) bool {
	for _, p := range strings.Split(dir, "/") {
		switch p {
		case "internal", "examples", "bench", "integration", "testdata", "cmd", "deploy", "faultfs", "statetest", "testjob":
			return false
		}
	}
	return true
}

// docs/troubleshooting.md explains every exported sentinel error of the
// user's packages: a `### dir` section per package (`### sluice` for the
// root) names each of its errors.
func TestTroubleshootingNamesEverySentinel(t *testing.T) {
	sentinels, err := Sentinels(root, userPackage)
	if err != nil {
		t.Fatal(err)
	}
	if len(sentinels) < 50 {
		t.Fatalf("found %d sentinel errors: is the repository where the test thinks?", len(sentinels))
	}
	text, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := Sections(string(text), 3)
	for _, s := range sentinels {
		dir := s.Dir
		if dir == "" {
			dir = "sluice"
		}
		body, ok := sections["`"+dir+"`"]
		if !ok {
			t.Errorf("docs/troubleshooting.md has no section ### `%s` for %s", dir, s.Name)
			continue
		}
		if !regexp.MustCompile(`\b` + s.Name + `\b`).MatchString(body) {
			t.Errorf("docs/troubleshooting.md, section `%s`: %s is not explained", dir, s.Name)
		}
	}
	// And names no error that is gone.
	known := map[string]bool{}
	for _, s := range sentinels {
		known[s.Name] = true
	}
	for _, m := range regexp.MustCompile("\\*\\*`(Err[A-Z]\\w*)`\\*\\*").FindAllStringSubmatch(string(text), -1) {
		if !known[m[1]] {
			t.Errorf("docs/troubleshooting.md explains %s, which no package declares", m[1])
		}
	}
}

// The packages a user starts from each have a runnable Example, which
// `go test` runs and checks against its output.
func TestUserPackagesHaveExamples(t *testing.T) {
	for _, dir := range []string{".", "source/kafka", "sink/kafka", "codec", "state", "state/rocksdb", "sink/filesink", "runner"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if regexp.MustCompile(`(?m)^func Example\w*\(\)`).Match(b) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("package %s has no Example function", dir)
		}
	}
}
