package faultfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

func TestRulesSkipAndTimes(t *testing.T) {
	f := New(storage.OSFS{})
	dir := t.TempDir()
	f.Inject(Rule{Op: OpCreate, PathContains: "b", Skip: 1, Times: 1, Err: ErrPermission})
	create := func(name string) error {
		file, err := f.Create(filepath.Join(dir, name))
		if err == nil {
			file.Close()
		}
		return err
	}
	if err := create("a1"); err != nil {
		t.Fatalf("unmatched path failed: %v", err)
	}
	if err := create("b1"); err != nil {
		t.Fatalf("skipped operation failed: %v", err)
	}
	if err := create("b2"); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("second match: %v", err)
	}
	if err := create("b3"); err != nil {
		t.Fatalf("after Times: %v", err)
	}
	if got := f.Injected(); len(got) != 1 {
		t.Fatalf("injected %v", got)
	}
}

func TestDiskFullWritesWhatFits(t *testing.T) {
	f := New(storage.OSFS{})
	path := filepath.Join(t.TempDir(), "x")
	file, err := f.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.DiskFull(5)
	if n, err := file.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("first write %d %v", n, err)
	}
	if n, err := file.Write([]byte("defg")); n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("crossing write %d %v", n, err)
	}
	file.Close()
	if data, _ := os.ReadFile(path); string(data) != "abcde" {
		t.Fatalf("file holds %q", data)
	}
}

func TestTornWrite(t *testing.T) {
	f := New(storage.OSFS{})
	path := filepath.Join(t.TempDir(), "x")
	f.Inject(Rule{Op: OpWrite, Torn: 2})
	file, _ := f.Create(path)
	if n, err := file.Write([]byte("hello")); n != 2 || !errors.Is(err, ErrInjected) {
		t.Fatalf("torn write %d %v", n, err)
	}
	file.Close()
	if data, _ := os.ReadFile(path); string(data) != "he" {
		t.Fatalf("file holds %q", data)
	}
}

// Link is how the POSIX backend commits a _metadata: OpRename rules fail
// it, and it never replaces an existing file.
func TestLinkFailsLikeRename(t *testing.T) {
	f := New(storage.OSFS{})
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "_metadata")
	if err := os.WriteFile(a, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.Inject(Rule{Op: OpRename, PathContains: "_metadata", Times: 1})
	if err := f.Link(a, b); !errors.Is(err, ErrInjected) {
		t.Fatalf("link under a rename rule: %v", err)
	}
	if err := f.Link(a, b); err != nil {
		t.Fatalf("link after the rule: %v", err)
	}
	if err := f.Link(a, b); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("link over an existing file: %v", err)
	}
}
