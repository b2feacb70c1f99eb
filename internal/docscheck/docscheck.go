// Package docscheck keeps the documentation true; its test runs in
// `make test`. It reads the Markdown files of the repository and checks
// that every relative link resolves (the file, and the heading its
// #anchor names), that every Go block of the guides and the README is
// the region of a compiled file it says it is (a `<!-- code: path#name -->`
// line before the block; the region lies between `// [start name]` and
// `// [end name]` lines of that file), or else a whole Go file that
// compiles, that docs/troubleshooting.md explains every exported sentinel
// error, and that every user-facing package has a runnable Example. The
// configuration reference (docs/configuration.md) is checked by
// internal/configdoc's test.
package docscheck

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Doc is a Markdown file: its links, headings and code blocks.
type Doc struct {
	Path     string // slash-separated, relative to the repository
	Links    []Link
	Anchors  map[string]bool
	Blocks   []Block
	NumLines int
}

// Link is a link of a Doc.
type Link struct {
	Line   int
	Target string // as written: path, path#anchor or #anchor
}

// Block is a fenced code block of a Doc.
type Block struct {
	Line int    // of the opening fence
	Lang string // the fence's info string
	Code string // the lines between the fences, each ending in "\n"
	// Region is what the `<!-- code: ... -->` line before the block
	// names (file#region, relative to the repository), or "".
	Region string
}

var (
	fenceRe   = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([^`\\s]*)")
	headingRe = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkRe    = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLinkRe = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	anchorRe  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	markerRe  = regexp.MustCompile(`^\s*<!--\s*code:\s*(\S+)\s*-->\s*$`)
	codeSpan  = regexp.MustCompile("`+[^`]*`+")
	schemeRe  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// ParseDoc reads a Markdown text.
func ParseDoc(relPath, text string) *Doc {
	d := &Doc{Path: relPath, Anchors: map[string]bool{}}
	slugs := map[string]int{}
	lines := strings.Split(text, "\n")
	d.NumLines = len(lines)
	if strings.HasSuffix(text, "\n") {
		d.NumLines--
	}
	var fence string
	var cur *Block
	marker := ""
	for i, line := range lines {
		n := i + 1
		if cur != nil {
			if m := fenceRe.FindStringSubmatch(line); m != nil && strings.HasPrefix(m[1], fence) && strings.TrimSpace(line) == m[1] {
				d.Blocks = append(d.Blocks, *cur)
				cur = nil
				continue
			}
			cur.Code += line + "\n"
			continue
		}
		if m := fenceRe.FindStringSubmatch(line); m != nil {
			fence = m[1]
			cur = &Block{Line: n, Lang: m[2], Region: marker}
			marker = ""
			continue
		}
		if m := markerRe.FindStringSubmatch(line); m != nil {
			marker = m[1]
			continue
		}
		if strings.TrimSpace(line) != "" {
			marker = ""
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			s := Slug(m[2])
			if k := slugs[s]; k > 0 {
				d.Anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				d.Anchors[s] = true
			}
			slugs[s]++
		}
		for _, m := range anchorRe.FindAllStringSubmatch(line, -1) {
			d.Anchors[m[1]] = true
		}
		plain := codeSpan.ReplaceAllString(line, "")
		for _, m := range linkRe.FindAllStringSubmatch(plain, -1) {
			d.Links = append(d.Links, Link{Line: n, Target: m[1]})
		}
		if m := refLinkRe.FindStringSubmatch(plain); m != nil {
			d.Links = append(d.Links, Link{Line: n, Target: m[1]})
		}
	}
	if cur != nil {
		d.Blocks = append(d.Blocks, *cur) // unclosed: checked as written
	}
	return d
}

// Slug is the anchor GitHub gives a heading: lower case, its letters,
// digits, spaces, '-' and '_' kept (spaces as '-'), the rest dropped.
func Slug(heading string) string {
	heading = regexp.MustCompile(`<[^>]+>`).ReplaceAllString(heading, "")
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Repo is the repository's Markdown files, read once.
type Repo struct {
	Root string
	Docs map[string]*Doc // by relative path
}

// skipDir reports whether a directory holds no documentation of ours.
func skipDir(name string) bool {
	return name == ".git" || name == "node_modules" || name == "testdata" || name == "vendor" ||
		(strings.HasPrefix(name, ".") && name != ".") || strings.HasPrefix(name, "_")
}

// ReadRepo reads every Markdown file under root.
func ReadRepo(root string) (*Repo, error) {
	r := &Repo{Root: root, Docs: map[string]*Doc{}}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if p != root && skipDir(e.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(e.Name(), ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		r.Docs[rel] = ParseDoc(rel, string(b))
		return nil
	})
	return r, err
}

// BrokenLinks returns every relative link of the repository's documents
// whose file or anchor does not exist, as "file:line: target: why".
func (r *Repo) BrokenLinks() []string {
	var bad []string
	for _, p := range sortedKeys(r.Docs) {
		d := r.Docs[p]
		for _, l := range d.Links {
			if why := r.check(d, l.Target); why != "" {
				bad = append(bad, fmt.Sprintf("%s:%d: %s: %s", d.Path, l.Line, l.Target, why))
			}
		}
	}
	return bad
}

func (r *Repo) check(d *Doc, target string) string {
	if schemeRe.MatchString(target) || strings.HasPrefix(target, "//") {
		return "" // another site: not ours to check
	}
	file, anchor, _ := strings.Cut(target, "#")
	if file == "" {
		if !d.Anchors[anchor] {
			return fmt.Sprintf("no heading with anchor #%s here", anchor)
		}
		return ""
	}
	rel := path.Clean(path.Join(path.Dir(d.Path), file))
	if strings.HasPrefix(rel, "../") || rel == ".." {
		return "outside the repository"
	}
	if _, err := os.Stat(filepath.Join(r.Root, filepath.FromSlash(rel))); err != nil {
		return "no such file or directory"
	}
	if anchor == "" || !strings.HasSuffix(rel, ".md") {
		return ""
	}
	if t, ok := r.Docs[rel]; !ok || !t.Anchors[anchor] {
		return fmt.Sprintf("%s has no heading with anchor #%s", rel, anchor)
	}
	return ""
}

// Region returns the lines between `// [start name]` and `// [end name]`
// in the Go file at path (relative to root), without marker lines and with
// their common indentation removed.
func Region(root, file, name string) (string, error) {
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return "", err
	}
	defer f.Close()
	var lines []string
	state := 0 // 0 before, 1 inside, 2 after
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		marker := regionMarker(line)
		switch {
		case state == 0 && marker == "start "+name:
			state = 1
		case state == 1 && marker == "end "+name:
			state = 2
		case state == 1 && marker != "":
			// a region nested in this one: its markers are not shown
		case state == 1:
			lines = append(lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	switch state {
	case 0:
		return "", fmt.Errorf("%s has no line // [start %s]", file, name)
	case 1:
		return "", fmt.Errorf("%s has no line // [end %s]", file, name)
	}
	return dedent(lines), nil
}

var regionRe = regexp.MustCompile(`^\s*// \[((?:start|end) [\w.-]+)\]\s*$`)

func regionMarker(line string) string {
	if m := regionRe.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// dedent removes the leading whitespace every non-blank line shares.
func dedent(lines []string) string {
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		lead := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = lead, false
			continue
		}
		for !strings.HasPrefix(lead, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	var b strings.Builder
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString(strings.TrimPrefix(l, prefix) + "\n")
	}
	return b.String()
}

// Sentinel is an exported package-level error variable.
type Sentinel struct {
	Dir  string // the package's directory, relative to the repository ("" for the root)
	Name string
}

// Sentinels returns the exported error variables (Err...) of every
// package under root whose directory keep accepts.
func Sentinels(root string, keep func(dir string) bool) ([]Sentinel, error) {
	var out []Sentinel
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		} else if skipDir(e.Name()) {
			return filepath.SkipDir
		}
		if !keep(rel) {
			return nil
		}
		names, err := filepath.Glob(filepath.Join(p, "*.go"))
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			{
				for _, decl := range f.Decls {
					g, ok := decl.(*ast.GenDecl)
					if !ok || g.Tok != token.VAR {
						continue
					}
					for _, spec := range g.Specs {
						for _, n := range spec.(*ast.ValueSpec).Names {
							if strings.HasPrefix(n.Name, "Err") && n.IsExported() && len(n.Name) > 3 && unicode.IsUpper(rune(n.Name[3])) {
								out = append(out, Sentinel{Dir: rel, Name: n.Name})
							}
						}
					}
				}
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b Sentinel) int {
		if c := strings.Compare(a.Dir, b.Dir); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, err
}

// Sections splits a Markdown text at its headings of the given level
// (2 for "## "): the text of each, by its heading.
func Sections(text string, level int) map[string]string {
	out := map[string]string{}
	prefix := strings.Repeat("#", level) + " "
	head, inFence := "", false
	var body strings.Builder
	flush := func() {
		if head != "" {
			out[head] += body.String()
		}
		body.Reset()
	}
	for _, line := range strings.Split(text, "\n") {
		if fenceRe.MatchString(line) {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(line, "#") {
			hashes := len(line) - len(strings.TrimLeft(line, "#"))
			if hashes <= level {
				flush()
				head = ""
				if strings.HasPrefix(line, prefix) {
					head = strings.TrimSpace(strings.TrimPrefix(line, prefix))
				}
				continue
			}
		}
		body.WriteString(line + "\n")
	}
	flush()
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
