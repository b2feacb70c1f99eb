package datadriven

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	src := `# leading comment
echo a=1 b=(x,y) flag
some input
----
a=1 b=[x y] flag=true
some input

# second
echo
----

`
	cases, trailing, err := parse("f", src)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || len(trailing) != 0 {
		t.Fatalf("got %d cases, trailing %q", len(cases), trailing)
	}
	d := cases[0].d
	if d.Cmd != "echo" || d.Input != "some input" || d.Expected != "a=1 b=[x y] flag=true\nsome input" {
		t.Fatalf("case 0: %+v", d)
	}
	if got := d.Vals("b"); strings.Join(got, "|") != "x|y" {
		t.Fatalf("b = %v", got)
	}
	if !d.Bool(t, "flag", false) || d.Int(t, "a", 0) != 1 {
		t.Fatal("flag or a wrong")
	}
	if cases[1].d.Expected != "" || cases[1].d.Pos != "f:9" {
		t.Fatalf("case 1: %+v", cases[1].d)
	}
}

func TestParseErrors(t *testing.T) {
	for _, src := range []string{"cmd\nno separator\n", "cmd a=(x,y\n----\n"} {
		if _, _, err := parse("f", src); err == nil {
			t.Errorf("parse(%q) succeeded", src)
		}
	}
}

func TestRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "case")
	if err := os.WriteFile(path, []byte("# c\necho x\n----\nstale\n\necho y\n----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	*rewrite = true
	defer func() { *rewrite = false }()
	RunTest(t, path, func(t *testing.T, d *TestData) string { return d.Args[0].Key })
	got, _ := os.ReadFile(path)
	if want := "# c\necho x\n----\nx\n\necho y\n----\ny\n"; string(got) != want {
		t.Fatalf("rewritten:\n%q\nwant\n%q", got, want)
	}
	*rewrite = false
	RunTest(t, path, func(t *testing.T, d *TestData) string { return d.Args[0].Key })
}
