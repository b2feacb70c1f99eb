package layers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sluicehq/sluice"

// layers maps each package (relative to the module, "" for the root; a
// trailing "/..." covers the packages below) to its layer. A package may
// import packages of lower layers only, never one of its own layer or
// above. It is the package table of docs/DESIGN.md: change both together.
var layers = []struct {
	pkg   string
	layer int
}{
	// Leaves that import nothing of ours, and the checkpoint files.
	{"config", 0}, // configuration keys and their values
	{"codec", 0},
	{"memory", 2},              // the process memory budget and its shares
	{"internal/datadriven", 0}, // the scenario-file driver of the state machines
	{"checkpoint/snapshot", 0},
	{"internal/binread", 0},
	{"internal/faultproxy", 0},
	{"internal/kafkaclient", 2},
	{"internal/importcheck", 0},
	{"internal/testutil", 0},
	{"internal/testcerts", 0}, // test certificates, made at test time
	{"internal/etcdtest", 1},  // a real etcd in tests, with TLS from testcerts
	// How the processes of a deployment authenticate each other (mTLS,
	// shared secret), for the control and data planes.
	{"peerauth", 0},
	{"internal/deploycheck", 0}, // the deployment files' test (Dockerfile, deploy/kubernetes)
	{"internal/docscheck", 0},   // the documentation's test (links, code from compiled files, sentinel errors)
	{"formats/registry", 5},     // Schema Registry client, wire format, generic serde
	{"formats/avro", 8},         // Avro serde
	{"formats/protobuf", 8},     // Protobuf serde
	{"formats/jsonschema", 8},   // JSON Schema serde
	{"checkpoint/storage", 10},
	{"checkpoint/storage/faultfs", 15},
	{"checkpoint/storage/storagetest", 15},
	{"checkpoint/storage/s3", 15},
	// High availability: the services' interface, keys and errors
	// (leader election, fenced pointers), and their implementation on
	// etcd, which a program imports when it uses HA (package cluster
	// does not: it links no etcd client, gRPC or zap).
	{"cluster/ha", 15},
	{"cluster/ha/etcd", 16},
	// Interfaces and the deterministic checkpoint core.
	{"sink", 20},
	{"source", 20},
	{"state", 20},
	{"checkpoint", 20},
	// Registration points connectors plug into.
	{"metrics/report", 25},
	{"inspect/decode", 25},
	// What the runtime drives: backends, operators, connectors, the
	// network.
	{"state/statetest", 30},
	{"state/rocksdb", 30},
	{"operators", 30},
	{"runtime/network/event", 25},
	{"runtime/network", 30},
	{"sink/kafka", 30},
	{"sink/filesink", 30},
	{"source/kafka", 30},
	// The job's life as a deterministic state machine.
	{"runtime/lifecycle", 30},
	{"runtime/scaling", 30},
	// The runtime.
	{"runtime", 40},
	// Deciding a running job's parallelism from its metrics.
	{"runtime/autoscaler", 42},
	// The control plane between a coordinator and its workers (TCP).
	{"cluster/control", 45},
	// The user API and what reads a running job.
	{"", 50},
	{"internal/backpressure", 50},
	// Tables on the user API: changelogs, joins, materialized tables.
	{"table", 52},
	// One job on several processes, plugged into the user API.
	{"cluster", 55},
	// Tables from and to Kafka (compacted topics), Views.
	{"table/kafkatable", 55},
	// Around the engine.
	{"api", 60},
	{"tracing", 60},
	{"metrics", 60},
	{"inspect", 60},
	// The test kit users test their pipelines with: operator harnesses
	// and the job runner on the API; the Kafka clusters of tests. (The
	// dockerized one, sluicetest/kafkatest/kafkacontainer, is a module of
	// its own so that nothing in this one links testcontainers.)
	{"sluicetest", 61},
	{"sluicetest/kafkatest", 62},
	// The job runner, which wires api, metrics and tracing.
	{"runner", 65},
	// The CLI.
	{"cmd/...", 70},
	// Programs and tests of the whole, which may use anything.
	{"examples/...", anything},
	{"bench", anything},
	{"bench/...", anything},
	{"integration", anything},
	{"e2e", anything}, // the in-process tests of whole jobs
	{"integration/...", anything},
	{"internal/testjob", anything},
	{"internal/layers", anything},
	{"internal/configdoc", anything}, // the key reference's generator
}

// anything is the layer of programs and tests that may import any package.
const anything = 100

// connectors may be plugged into the packages around the engine, never
// imported by them: a new connector must not mean editing metrics or
// inspect.
// state/rocksdb is one too: it needs cgo, which the user API must not.
var connectors = []string{"sink/kafka", "sink/filesink", "source/kafka", "state/rocksdb"}

var noConnectorImports = []string{"api", "tracing", "metrics", "inspect", "runtime", "",
	"sluicetest", "sluicetest/kafkatest"}

// connectorExceptions are imports of a connector by a package of
// noConnectorImports that are still to be turned into registrations.
var connectorExceptions = map[string]bool{}

func layerOf(pkg string) (int, bool) {
	best, layer := -1, 0
	for _, l := range layers {
		p, sub := strings.CutSuffix(l.pkg, "/...")
		switch {
		case !sub && pkg == l.pkg:
			return l.layer, true
		case sub && (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > best:
			best, layer = len(p), l.layer
		}
	}
	return layer, best >= 0
}

type listed struct {
	ImportPath string
	Imports    []string
}

func goList(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: not the module", len(pkgs))
	}
	return pkgs
}

func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// TestImportsPointDown fails on a package that imports one of its own
// layer or above, and on a package missing from the table.
func TestImportsPointDown(t *testing.T) {
	var bad []string
	for _, p := range goList(t) {
		from, _ := rel(p.ImportPath)
		lf, ok := layerOf(from)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is not in the package table (internal/layers and docs/DESIGN.md)", p.ImportPath))
			continue
		}
		for _, imp := range p.Imports {
			to, ours := rel(imp)
			if !ours {
				continue
			}
			lt, ok := layerOf(to)
			if ok && lt >= lf && lf != anything {
				bad = append(bad, fmt.Sprintf("%q (layer %d) imports %q (layer %d): imports point down the table", from, lf, to, lt))
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// TestNoConnectorImports fails when the runtime, the API or a package
// around the engine imports a connector instead of letting it register.
func TestNoConnectorImports(t *testing.T) {
	for _, p := range goList(t) {
		from, _ := rel(p.ImportPath)
		if !contains(noConnectorImports, from) {
			continue
		}
		for _, imp := range p.Imports {
			to, ours := rel(imp)
			if ours && contains(connectors, to) && !connectorExceptions[from+" -> "+to] {
				t.Errorf("%q imports the connector %q: make the connector register with it instead", from, to)
			}
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// The table itself: layerOf resolves exact entries before subtrees, and
// the longest subtree wins, so a test of the test.
func TestLayerOf(t *testing.T) {
	for pkg, want := range map[string]int{
		"": 50, "checkpoint": 20, "checkpoint/storage": 10, "checkpoint/storage/faultfs": 15,
		"runtime": 40, "runtime/network": 30, "cmd/sluice": 70, "examples/wordcount": anything,
	} {
		if got, ok := layerOf(pkg); !ok || got != want {
			t.Errorf("layerOf(%q) = %d, %v; want %d", pkg, got, ok, want)
		}
	}
	if _, ok := layerOf("nowhere"); ok {
		t.Error("an unknown package has a layer")
	}
}

// docs/DESIGN.md's table of packages and layers is this one: every
// package of one is in the other, in the same layer.
func TestDesignTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	const header = "| layer | packages | own |"
	text := string(doc)
	i := strings.Index(text, header)
	if i < 0 {
		t.Fatalf("docs/DESIGN.md has no %q table", header)
	}
	inDoc := map[string]int{}
	quoted := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(text[i:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("docs/DESIGN.md: a row without its cells: %q", line)
		}
		layer := anything
		if l := strings.TrimSpace(cells[1]); l != "any" {
			if layer, err = strconv.Atoi(l); err != nil {
				t.Fatalf("docs/DESIGN.md: layer %q: %v", l, err)
			}
		}
		for _, m := range quoted.FindAllStringSubmatch(cells[2], -1) {
			pkg := m[1]
			if pkg == "sluice" {
				pkg = "" // the root
			}
			if prev, dup := inDoc[pkg]; dup {
				t.Errorf("docs/DESIGN.md lists %q twice (layers %d and %d)", m[1], prev, layer)
			}
			inDoc[pkg] = layer
		}
	}
	for _, l := range layers {
		got, ok := inDoc[l.pkg]
		switch {
		case !ok:
			t.Errorf("docs/DESIGN.md's table lacks %q (layer %d here)", l.pkg, l.layer)
		case got != l.layer:
			t.Errorf("docs/DESIGN.md has %q in layer %d, internal/layers in %d", l.pkg, got, l.layer)
		}
		delete(inDoc, l.pkg)
	}
	for pkg, layer := range inDoc {
		t.Errorf("docs/DESIGN.md has %q (layer %d), internal/layers does not", pkg, layer)
	}
}
