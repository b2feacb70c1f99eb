package s3

import (
	"crypto/sha256"
	"strings"
)

// keyMap maps the backend's keys (relative to its root) to object keys,
// injecting entropy when the root holds the entropy marker.
//
// Without entropy an object's key is root + "/" + key. With it, the root is
// cut at the marker into before and after: a data file's object key is
// before + E + after + key, where E is EntropyLength characters derived
// from the key (so that Get, Stat and DeleteBatch need no lookup); the
// objects that are addressed by listing (every _metadata, the job's own
// files: job-result, .lock) and directory markers go to the root with the
// marker removed. The entropy of a file in a checkpoint's directory is
// that of the directory (a discard lists it with one prefix); the entropy
// of a shared file is its own (the shared directory is the one that grows).
type keyMap struct {
	plain   string // the root with the marker removed, "" or ending in "/"
	before  string // the root up to the marker
	after   string // the root after the marker, as written
	n       int    // entropy length
	entropy bool
}

func newKeyMap(root, marker string, n int) keyMap {
	if marker == "" || !strings.Contains(root, marker) {
		return keyMap{plain: dirPrefix(root)}
	}
	before, after, _ := strings.Cut(root, marker)
	return keyMap{plain: dirPrefix(before + "/" + after), before: before, after: after, n: n, entropy: true}
}

// root returns the object-key prefix of the data files with entropy e.
func (m keyMap) root(e string) string { return dirPrefix(m.before + e + m.after) }

// dirPrefix turns a path into a key prefix: "" stays "", else it ends in
// exactly one "/".
func dirPrefix(p string) string {
	p = strings.Trim(p, "/")
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	if p == "" {
		return ""
	}
	return p + "/"
}

// plainKey reports whether key is stored without entropy.
func plainKey(key string) bool {
	if strings.HasSuffix(key, "/") || !strings.Contains(key, "/") {
		return true
	}
	return key == metadataName || strings.HasSuffix(key, "/"+metadataName)
}

const metadataName = "_metadata"

// seed is what a key's entropy is derived from: a shared file's own key,
// else its first path element (its checkpoint's directory).
func seed(key string) string {
	if strings.HasPrefix(key, sharedDir) {
		return key
	}
	d, _, _ := strings.Cut(key, "/")
	return d
}

const sharedDir = "shared/"

const entropyAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// entropyOf derives n characters from the seed, and from the root after
// the marker (so that two jobs' chk-1 differ).
func (m keyMap) entropyOf(s string) string {
	sum := sha256.Sum256([]byte(m.after + s))
	out := make([]byte, m.n)
	for i := range out {
		out[i] = entropyAlphabet[int(sum[i])%len(entropyAlphabet)]
	}
	return string(out)
}

// object returns the object key of key.
func (m keyMap) object(key string) string {
	if !m.entropy || plainKey(key) {
		return m.plain + key
	}
	return m.root(m.entropyOf(seed(key))) + key
}

// listPrefixes returns the object-key prefixes to list for the key prefix
// p: the plain one, and with entropy the one of p's checkpoint directory
// when p is inside one, else the root up to the marker, whose objects
// keyOf filters.
func (m keyMap) listPrefixes(p string) []string {
	if !m.entropy {
		return []string{m.plain + p}
	}
	if d, _, ok := strings.Cut(p, "/"); ok && d+"/" != sharedDir {
		return []string{m.plain + p, m.root(m.entropyOf(d)) + p}
	}
	return []string{m.plain + p, m.before}
}

// keyOf returns the key of an object found by listing the i-th prefix of
// listPrefixes(p), and whether it is one of ours under p.
func (m keyMap) keyOf(object string, i int, p string) (string, bool) {
	if i == 0 {
		k, ok := strings.CutPrefix(object, m.plain)
		return k, ok && strings.HasPrefix(k, p) && (!m.entropy || plainKey(k))
	}
	rest, ok := strings.CutPrefix(object, m.before)
	if !ok || len(rest) < m.n {
		return "", false
	}
	e := rest[:m.n]
	k, ok := strings.CutPrefix(object, m.root(e))
	if !ok || !strings.HasPrefix(k, p) || plainKey(k) || m.entropyOf(seed(k)) != e {
		return "", false
	}
	return k, true
}
