// Package storagetest owns the contract of storage.Backend as a table of
// behaviours every implementation must have: the POSIX backend passes it
// today, an object-store backend (S3) must pass it too. Run it from a
// backend's tests:
//
//	func TestContract(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) storage.Backend { return newBackend(t) })
//	}
//
// Each Case returns an error instead of failing a *testing.T, so that the
// suite's own tests can check that a broken backend fails it.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// Case is one behaviour of the contract, run against an empty backend.
type Case struct {
	Name string
	Run  func(ctx context.Context, b storage.Backend) error
}

// Run runs every case against a fresh, empty backend from newBackend.
func Run(t *testing.T, newBackend func(t *testing.T) storage.Backend) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Run(t.Context(), newBackend(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Cases returns the contract's behaviours.
func Cases() []Case {
	return []Case{
		{"put-get-stat", putGetStat},
		{"missing-key-is-not-exist", missingKey},
		{"put-if-absent-refuses-an-existing-key", putIfAbsent},
		{"list-returns-exactly-the-keys-under-a-prefix", listPrefix},
		{"delete-batch-is-idempotent", deleteBatch},
		{"delete-batch-of-many-keys", deleteMany},
		{"partial-write-never-visible-under-its-key", partialWrite},
		{"invalid-keys-are-refused", invalidKeys},
	}
}

func get(ctx context.Context, b storage.Backend, key string) ([]byte, int64, error) {
	o, err := b.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	defer o.Close()
	data, err := io.ReadAll(o)
	return data, o.Size(), err
}

// expect checks that key holds want, through Get and Stat.
func expect(ctx context.Context, b storage.Backend, key string, want []byte) error {
	data, size, err := get(ctx, b, key)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	if !bytes.Equal(data, want) || size != int64(len(want)) {
		return fmt.Errorf("get %s: %q (size %d), want %q", key, data, size, want)
	}
	info, err := b.Stat(ctx, key)
	if err != nil || info.Size != int64(len(want)) || info.Key != key {
		return fmt.Errorf("stat %s: %+v, %v; want size %d", key, info, err, len(want))
	}
	return nil
}

func absent(ctx context.Context, b storage.Backend, key string) error {
	if _, err := b.Stat(ctx, key); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("stat %s: %v, want fs.ErrNotExist", key, err)
	}
	if _, _, err := get(ctx, b, key); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("get %s: %v, want fs.ErrNotExist", key, err)
	}
	return nil
}

// list returns the sorted object keys under prefix, markers left out.
func list(ctx context.Context, b storage.Backend, prefix string) ([]string, map[string]int64, error) {
	var keys []string
	sizes := map[string]int64{}
	for o, err := range b.List(ctx, prefix) {
		if err != nil {
			return nil, nil, fmt.Errorf("list %q: %w", prefix, err)
		}
		if o.IsMarker() {
			continue
		}
		keys = append(keys, o.Key)
		sizes[o.Key] = o.Size
	}
	sort.Strings(keys)
	return keys, sizes, nil
}

func putGetStat(ctx context.Context, b storage.Backend) error {
	if err := b.Put(ctx, "chk-1/_metadata", []byte("first")); err != nil {
		return err
	}
	if err := expect(ctx, b, "chk-1/_metadata", []byte("first")); err != nil {
		return err
	}
	// Put replaces.
	if err := b.Put(ctx, "chk-1/_metadata", []byte("second, longer")); err != nil {
		return err
	}
	if err := expect(ctx, b, "chk-1/_metadata", []byte("second, longer")); err != nil {
		return err
	}
	// An empty object is an object, and a deep key needs no directories.
	if err := b.Put(ctx, "a/b/c/empty", nil); err != nil {
		return err
	}
	return expect(ctx, b, "a/b/c/empty", nil)
}

func missingKey(ctx context.Context, b storage.Backend) error {
	if err := absent(ctx, b, "chk-9/_metadata"); err != nil {
		return err
	}
	// A prefix of objects is not an object.
	if err := b.Put(ctx, "dir/file", []byte("x")); err != nil {
		return err
	}
	return absent(ctx, b, "dir")
}

func putIfAbsent(ctx context.Context, b storage.Backend) error {
	if err := b.PutIfAbsent(ctx, "chk-2/_metadata", []byte("commit")); err != nil {
		return fmt.Errorf("put-if-absent of a new key: %w", err)
	}
	if err := expect(ctx, b, "chk-2/_metadata", []byte("commit")); err != nil {
		return err
	}
	err := b.PutIfAbsent(ctx, "chk-2/_metadata", []byte("overwrite"))
	if !errors.Is(err, storage.ErrObjectExists) || !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("put-if-absent of an existing key: %v, want ErrObjectExists", err)
	}
	if err := expect(ctx, b, "chk-2/_metadata", []byte("commit")); err != nil {
		return fmt.Errorf("after a refused put-if-absent: %w", err)
	}
	// An object put by Put counts as existing too.
	if err := b.Put(ctx, "job-result", []byte("r")); err != nil {
		return err
	}
	if err := b.PutIfAbsent(ctx, "job-result", []byte("s")); !errors.Is(err, storage.ErrObjectExists) {
		return fmt.Errorf("put-if-absent over a put object: %v, want ErrObjectExists", err)
	}
	// The refused attempts left nothing else behind.
	keys, _, err := list(ctx, b, "")
	if err != nil {
		return err
	}
	if want := []string{"chk-2/_metadata", "job-result"}; !slices.Equal(keys, want) {
		return fmt.Errorf("after put-if-absent: list = %q, want %q", keys, want)
	}
	return nil
}

func listPrefix(ctx context.Context, b storage.Backend) error {
	objects := map[string]string{
		"chk-1/_metadata":   "m1",
		"chk-1/op-0-aa":     "state",
		"chk-10/_metadata":  "m10",
		"chk-2/op-1-bb":     "s2",
		"chk-1x":            "beside",
		"shared/rocksdb-0":  "sst",
		"shared/rocksdb-00": "sst2",
		"job-result":        "r",
	}
	for k, v := range objects {
		if err := b.Put(ctx, k, []byte(v)); err != nil {
			return err
		}
	}
	all := slices.Sorted(maps.Keys(objects))
	under := func(prefix string) []string {
		var out []string
		for _, k := range all {
			if strings.HasPrefix(k, prefix) {
				out = append(out, k)
			}
		}
		return out
	}
	for _, prefix := range []string{"", "chk-", "chk-1", "chk-1/", "chk-10/", "chk-1/_", "shared/", "shared/rocksdb-0", "job-result", "nothing/", "zzz"} {
		keys, sizes, err := list(ctx, b, prefix)
		if err != nil {
			return err
		}
		if want := under(prefix); !slices.Equal(keys, want) {
			return fmt.Errorf("list %q = %q, want %q", prefix, keys, want)
		}
		for _, k := range keys {
			if sizes[k] != int64(len(objects[k])) {
				return fmt.Errorf("list %q: %s has size %d, want %d", prefix, k, sizes[k], len(objects[k]))
			}
		}
	}
	// A listing stops when the caller stops.
	n := 0
	for _, err := range b.List(ctx, "") {
		if err != nil {
			return err
		}
		n++
		break
	}
	if n != 1 {
		return fmt.Errorf("a stopped listing yielded %d", n)
	}
	return nil
}

func deleteBatch(ctx context.Context, b storage.Backend) error {
	for _, k := range []string{"chk-3/_metadata", "chk-3/a", "chk-3/b", "chk-4/_metadata", "shared/x"} {
		if err := b.Put(ctx, k, []byte(k)); err != nil {
			return err
		}
	}
	batch := []string{"chk-3/_metadata", "chk-3/a", "chk-3/b", "chk-3/never-written", "shared/x"}
	for round := 1; round <= 2; round++ {
		if err := b.DeleteBatch(ctx, batch); err != nil {
			return fmt.Errorf("delete round %d: %w", round, err)
		}
		for _, k := range batch {
			if err := absent(ctx, b, k); err != nil {
				return fmt.Errorf("after delete round %d: %w", round, err)
			}
		}
		keys, _, err := list(ctx, b, "")
		if err != nil {
			return err
		}
		if want := []string{"chk-4/_metadata"}; !slices.Equal(keys, want) {
			return fmt.Errorf("after delete round %d: list = %q, want %q", round, keys, want)
		}
	}
	if err := b.DeleteBatch(ctx, nil); err != nil {
		return fmt.Errorf("empty batch: %w", err)
	}
	// A deleted key can be written again, even with put-if-absent.
	if err := b.PutIfAbsent(ctx, "chk-3/_metadata", []byte("again")); err != nil {
		return fmt.Errorf("put-if-absent after delete: %w", err)
	}
	return expect(ctx, b, "chk-3/_metadata", []byte("again"))
}

// deleteMany deletes more keys than one S3 DeleteObjects request takes.
func deleteMany(ctx context.Context, b storage.Backend) error {
	var keys []string
	for i := range 1100 {
		k := fmt.Sprintf("shared/f-%04d", i)
		if err := b.Put(ctx, k, []byte{byte(i)}); err != nil {
			return err
		}
		keys = append(keys, k)
	}
	if err := b.DeleteBatch(ctx, keys); err != nil {
		return err
	}
	left, _, err := list(ctx, b, "shared/")
	if err != nil {
		return err
	}
	if len(left) != 0 {
		return fmt.Errorf("after deleting 1100 keys, %d are left (%s...)", len(left), left[0])
	}
	return nil
}

func partialWrite(ctx context.Context, b storage.Backend) error {
	const key = "chk-5/op-0-cc"
	w, err := b.Create(ctx, key)
	if err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte("p"), 64<<10)
	for range 4 {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	if err := absent(ctx, b, key); err != nil {
		return fmt.Errorf("while written: %w", err)
	}
	keys, _, err := list(ctx, b, "chk-5/")
	if err != nil {
		return err
	}
	if slices.Contains(keys, key) {
		return fmt.Errorf("while written: listed under its key")
	}
	if err := w.Commit(); err != nil {
		return err
	}
	if err := expect(ctx, b, key, bytes.Repeat(chunk, 4)); err != nil {
		return fmt.Errorf("after commit: %w", err)
	}
	w.Abort() // after Commit: nothing
	if err := expect(ctx, b, key, bytes.Repeat(chunk, 4)); err != nil {
		return fmt.Errorf("abort after commit: %w", err)
	}
	// An aborted object is never visible.
	w, err = b.Create(ctx, "chk-5/aborted")
	if err != nil {
		return err
	}
	if _, err := w.Write(chunk); err != nil {
		return err
	}
	w.Abort()
	if err := absent(ctx, b, "chk-5/aborted"); err != nil {
		return fmt.Errorf("after abort: %w", err)
	}
	// Rewriting an existing key serves the old object until the commit.
	if err := b.Put(ctx, "job-result", []byte("old")); err != nil {
		return err
	}
	w, err = b.Create(ctx, "job-result")
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte("new and longer")); err != nil {
		return err
	}
	if err := expect(ctx, b, "job-result", []byte("old")); err != nil {
		return fmt.Errorf("while rewritten: %w", err)
	}
	if err := w.Commit(); err != nil {
		return err
	}
	if err := expect(ctx, b, "job-result", []byte("new and longer")); err != nil {
		return fmt.Errorf("after rewrite: %w", err)
	}
	keys, _, err = list(ctx, b, "")
	if err != nil {
		return err
	}
	if want := []string{key, "job-result"}; !slices.Equal(keys, want) {
		return fmt.Errorf("after the writes: list = %q, want %q", keys, want)
	}
	return nil
}

func invalidKeys(ctx context.Context, b storage.Backend) error {
	for _, key := range []string{"", "/abs", "../escape", "a/../../b", "a//b", "./a", "a\\b", "nul\x00"} {
		if err := b.Put(ctx, key, []byte("x")); !errors.Is(err, storage.ErrInvalidKey) {
			return fmt.Errorf("put %q: %v, want ErrInvalidKey", key, err)
		}
		if err := b.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, storage.ErrInvalidKey) {
			return fmt.Errorf("put-if-absent %q: %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Create(ctx, key); !errors.Is(err, storage.ErrInvalidKey) {
			return fmt.Errorf("create %q: %v, want ErrInvalidKey", key, err)
		}
	}
	keys, _, err := list(ctx, b, "")
	if err != nil {
		return err
	}
	if len(keys) != 0 {
		return fmt.Errorf("invalid keys wrote %q", keys)
	}
	return nil
}
