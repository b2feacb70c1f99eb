// Package datadriven runs the scenario tests of the deterministic state
// machines (the checkpoint coordinator, the barrier handlers, the job's
// life) written as text files, in the style of cockroachdb/datadriven
// (used by pebble and etcd raft), with only the standard library. A file
// holds a sequence of cases:
//
//	# comment
//	command key=value key=(a,b) flag
//	optional input lines
//	----
//	expected output lines
//
// A blank line ends the expected output. Run the tests with -rewrite to
// replace every expected output with the actual one.
package datadriven

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of data-driven test files")

// Arg is one argument of a command: key=value, key=(v1,v2) or a bare key.
type Arg struct {
	Key  string
	Vals []string
}

// TestData is one case of a file.
type TestData struct {
	// Pos is file:line of the command.
	Pos      string
	Cmd      string
	Args     []Arg
	Input    string
	Expected string
}

// Has reports whether the command has the argument key.
func (d *TestData) Has(key string) bool {
	_, ok := d.arg(key)
	return ok
}

func (d *TestData) arg(key string) (Arg, bool) {
	for _, a := range d.Args {
		if a.Key == key {
			return a, true
		}
	}
	return Arg{}, false
}

// Vals returns the values of key (nil when absent).
func (d *TestData) Vals(key string) []string {
	a, _ := d.arg(key)
	return a.Vals
}

// Str returns the value of key, or def when absent.
func (d *TestData) Str(t testing.TB, key, def string) string {
	a, ok := d.arg(key)
	if !ok {
		return def
	}
	if len(a.Vals) != 1 {
		d.Fatalf(t, "argument %s: want one value, have %v", key, a.Vals)
	}
	return a.Vals[0]
}

// Int returns the integer value of key, or def when absent.
func (d *TestData) Int(t testing.TB, key string, def int64) int64 {
	s := d.Str(t, key, "")
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "argument %s: %v", key, err)
	}
	return v
}

// Duration returns the duration value of key (Go syntax, or plain
// milliseconds), or def when absent.
func (d *TestData) Duration(t testing.TB, key string, def time.Duration) time.Duration {
	s := d.Str(t, key, "")
	if s == "" {
		return def
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(ms) * time.Millisecond
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "argument %s: %v", key, err)
	}
	return v
}

// Bool returns the value of key (a bare key is true), or def when absent.
func (d *TestData) Bool(t testing.TB, key string, def bool) bool {
	a, ok := d.arg(key)
	if !ok {
		return def
	}
	if len(a.Vals) == 0 {
		return true
	}
	v, err := strconv.ParseBool(a.Vals[0])
	if err != nil {
		d.Fatalf(t, "argument %s: %v", key, err)
	}
	return v
}

// Fatalf fails the test, naming the case.
func (d *TestData) Fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s: %s: %s", d.Pos, d.Cmd, fmt.Sprintf(format, args...))
}

type parsedCase struct {
	d        *TestData
	preamble []string // the lines from the end of the previous case to the "----"
}

// RunTest runs the cases of the file at path in order, comparing what f
// returns with the expected output.
func RunTest(t *testing.T, path string, f func(t *testing.T, d *TestData) string) {
	t.Helper()
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases, trailing, err := parse(path, string(content))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, c := range cases {
		actual := normalize(f(t, c.d))
		if t.Failed() && !*rewrite {
			return
		}
		if *rewrite {
			out.WriteString(strings.Join(c.preamble, "\n"))
			out.WriteString("\n")
			if actual != "" {
				out.WriteString(actual)
				out.WriteString("\n")
			}
			out.WriteString("\n")
			continue
		}
		if actual != c.d.Expected {
			t.Errorf("%s: %s\nexpected:\n%s\nactual:\n%s", c.d.Pos, c.d.Cmd, indent(c.d.Expected), indent(actual))
			return
		}
	}
	if *rewrite {
		s := strings.TrimRight(out.String(), "\n") + "\n"
		if len(trailing) > 0 {
			s += strings.Join(trailing, "\n")
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Walk runs f as a subtest for every file in dir.
func Walk(t *testing.T, dir string, f func(t *testing.T, path string)) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) { f(t, filepath.Join(dir, name)) })
	}
}

func normalize(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	if s == "" {
		return "  <empty>"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

func parse(path, content string) ([]parsedCase, []string, error) {
	lines := strings.Split(strings.TrimRight(content, "\n"), "\n")
	var cases []parsedCase
	i := 0
	for i < len(lines) {
		start := i
		for i < len(lines) && (strings.TrimSpace(lines[i]) == "" || strings.HasPrefix(strings.TrimSpace(lines[i]), "#")) {
			i++
		}
		if i == len(lines) {
			return cases, lines[start:], nil
		}
		d := &TestData{Pos: fmt.Sprintf("%s:%d", path, i+1)}
		var err error
		d.Cmd, d.Args, err = parseDirective(lines[i])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Pos, err)
		}
		i++
		var input []string
		for i < len(lines) && lines[i] != "----" {
			input = append(input, lines[i])
			i++
		}
		if i == len(lines) {
			return nil, nil, fmt.Errorf("%s: no ---- after the command", d.Pos)
		}
		d.Input = strings.Join(input, "\n")
		preamble := lines[start : i+1]
		i++
		var expected []string
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			expected = append(expected, lines[i])
			i++
		}
		d.Expected = normalize(strings.Join(expected, "\n"))
		if i < len(lines) {
			i++ // the blank line that ends the case
		}
		cases = append(cases, parsedCase{d: d, preamble: preamble})
	}
	return cases, nil, nil
}

func parseDirective(line string) (string, []Arg, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return "", nil, fmt.Errorf("empty command")
	}
	var args []Arg
	for _, f := range fields[1:] {
		key, val, ok := strings.Cut(f, "=")
		a := Arg{Key: key}
		if ok {
			if strings.HasPrefix(val, "(") {
				if !strings.HasSuffix(val, ")") {
					return "", nil, fmt.Errorf("argument %s: unterminated list", key)
				}
				inner := val[1 : len(val)-1]
				if inner != "" {
					a.Vals = strings.Split(inner, ",")
				} else {
					a.Vals = []string{}
				}
			} else {
				a.Vals = []string{val}
			}
		}
		args = append(args, a)
	}
	return fields[0], args, nil
}
