package docscheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Anchors as GitHub makes them, and links found outside code only.
func TestParseDoc(t *testing.T) {
	for heading, want := range map[string]string{
		"Avro, Protobuf and JSON Schema with a Schema Registry": "avro-protobuf-and-json-schema-with-a-schema-registry",
		"Sluice for Flink users":                                "sluice-for-flink-users",
		"`source/kafka`":                                        "sourcekafka",
		"The life of a job":                                     "the-life-of-a-job",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
	d := ParseDoc("docs/x.md", "# A\n## A\n[ok](y.md#b) `[not](a link)`\n<!-- code: f.go#r -->\n```go\n[no](link)\n```\n")
	if !d.Anchors["a"] || !d.Anchors["a-1"] {
		t.Errorf("anchors %v, want a and a-1", d.Anchors)
	}
	if len(d.Links) != 1 || d.Links[0].Target != "y.md#b" {
		t.Errorf("links %v, want only y.md#b", d.Links)
	}
	if len(d.Blocks) != 1 || d.Blocks[0].Region != "f.go#r" || d.Blocks[0].Code != "[no](link)\n" {
		t.Errorf("blocks %+v", d.Blocks)
	}
}

// A region is the lines between its markers, dedented, nested markers
// left out; a missing end is an error.
func TestRegion(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nfunc f() {\n\t// [start outer]\n\ta := 1\n\t// [start inner]\n\tb := a\n\t// [end inner]\n\t_ = b\n\t// [end outer]\n\t// [start open]\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Region(dir, "p.go", "outer")
	if want := "a := 1\nb := a\n_ = b\n"; err != nil || got != want {
		t.Errorf("outer: %q, %v; want %q", got, err, want)
	}
	if _, err := Region(dir, "p.go", "open"); err == nil || !strings.Contains(err.Error(), "end open") {
		t.Errorf("open region: %v, want an error naming its end", err)
	}
	if _, err := Region(dir, "p.go", "none"); err == nil {
		t.Error("missing region: no error")
	}
}
