package rocksdb

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// TestWriteBufferModel runs random puts and deletes of keys of many
// lengths, values growing and shrinking, against a map: every get agrees,
// and sorted lists every key once, in byte order, with its latest value.
func TestWriteBufferModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	type val struct {
		v    []byte
		dead bool
	}
	w := newWriteBuffer()
	model := map[string]val{}
	key := func() []byte {
		// Shared prefixes longer than the 8 sorted on first.
		return fmt.Appendf(nil, "%s%d", bytes.Repeat([]byte{'k'}, rng.IntN(12)), rng.IntN(3000))
	}
	for i := range 50000 {
		k := key()
		switch rng.IntN(10) {
		case 0:
			w.del(k)
			model[string(k)] = val{dead: true}
		case 1, 2, 3:
			v, dead, ok := w.get(k)
			m, mok := model[string(k)]
			if ok != mok || dead != m.dead || !bytes.Equal(v, m.v) {
				t.Fatalf("op %d: get %q = %q dead=%v found=%v, want %q dead=%v found=%v", i, k, v, dead, ok, m.v, m.dead, mok)
			}
		default:
			v := bytes.Repeat([]byte{byte(i)}, rng.IntN(40))
			w.put(k, v)
			model[string(k)] = val{v: v}
		}
	}
	if w.n != len(model) {
		t.Fatalf("buffer holds %d entries, model %d", w.n, len(model))
	}
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	offs := w.sorted()
	if len(offs) != len(keys) {
		t.Fatalf("sorted gives %d entries, want %d", len(offs), len(keys))
	}
	for i, off := range offs {
		k, v, dead := w.entry(off)
		m := model[keys[i]]
		if string(k) != keys[i] || dead != m.dead || !bytes.Equal(v, m.v) {
			t.Fatalf("sorted entry %d = %q %q dead=%v, want %q %q dead=%v", i, k, v, dead, keys[i], m.v, m.dead)
		}
	}
	w.reset()
	if _, _, ok := w.get([]byte(keys[0])); ok || !w.empty() {
		t.Fatal("reset buffer still holds entries")
	}
	w.put([]byte("again"), []byte("1"))
	if v, dead, ok := w.get([]byte("again")); !ok || dead || string(v) != "1" || w.n != 1 {
		t.Fatalf("put after reset: get = %q %v %v, %d entries", v, dead, ok, w.n)
	}
}

// TestWriteBufferSpills: with the smallest write buffer, 20000 keys spill
// many times in the background, each spill held back until the next one
// is due (so reads find entries in the sealed buffer); every value,
// overwrite and deletion reads back before and after a checkpoint, which a
// restore reproduces, and the spill directory is left empty.
func TestWriteBufferSpills(t *testing.T) {
	b := newTestBackend(t, Options{WriteBufferSize: minWriteBufferSize})
	closeLater(t, b)
	release := make(chan struct{})
	b.testHookBeforeSpill = func() { <-release }
	b.testHookWaitSealed = func() { release <- struct{}{} }
	v, err := state.GetValueState(b, state.ValueStateDescriptor[string]{Name: "v"})
	check(t, err)
	const keys = 20000
	want := func(k int) (string, bool) {
		switch {
		case k%7 == 0:
			return "", false // deleted
		case k%3 == 0:
			return fmt.Sprint("long value of key ", k, " written second"), true
		}
		return fmt.Sprint(k), true
	}
	for k := range keys {
		setKey(b, keyName(k))
		check(t, v.Update(fmt.Sprint(k)))
	}
	for k := range keys {
		setKey(b, keyName(k))
		if k%7 == 0 {
			check(t, v.Clear())
		} else if s, ok := want(k); ok && k%3 == 0 {
			check(t, v.Update(s))
		}
	}
	verify := func(b *Backend, v state.ValueState[string], when string) {
		t.Helper()
		for k := range keys {
			setKey(b, keyName(k))
			got, ok, err := v.Value()
			w, wok := want(k)
			if err != nil || ok != wok || got != w {
				t.Fatalf("%s: key %d = %q %v %v, want %q %v", when, k, got, ok, err, w, wok)
			}
		}
	}
	verify(b, v, "before the checkpoint")
	if n := b.spillSeq.Load(); n < 10 {
		t.Fatalf("%d spills, want many with a %d-byte write buffer", n, minWriteBufferSize)
	}
	// The checkpoint's background job waits for the spill held back last:
	// let every spill run from now on.
	b.testHookWaitSealed = nil
	close(release)
	stor := newDirStorage(t)
	h := checkpoint(t, b, 1, stor)
	verify(b, v, "after the checkpoint")
	if left, _ := filepath.Glob(filepath.Join(b.opts.Dir, spillDirName, "*")); len(left) != 0 {
		t.Fatalf("spill files left behind: %v", left)
	}
	r := newTestBackend(t, Options{})
	closeLater(t, r)
	check(t, r.RestoreIncremental([]*IncrementalHandle{h}, stor.download))
	rv, err := state.GetValueState(r, state.ValueStateDescriptor[string]{Name: "v"})
	check(t, err)
	verify(r, rv, "restored")
}

// TestWriteBufferSpillFailure: when a write buffer cannot be written into
// RocksDB (here its directory is a file), writes and checkpoints of the
// state fail with an error naming the state and the file, and what was
// written stays readable.
func TestWriteBufferSpillFailure(t *testing.T) {
	b := newTestBackend(t, Options{WriteBufferSize: minWriteBufferSize})
	closeLater(t, b)
	check(t, os.WriteFile(filepath.Join(b.opts.Dir, spillDirName), nil, 0o644))
	v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "counts"})
	check(t, err)
	var werr error
	written := 0
	for k := 0; k < 100000 && werr == nil; k++ {
		setKey(b, keyName(k))
		if werr = v.Update(int64(k)); werr == nil {
			written++
		}
	}
	if werr == nil || !strings.Contains(werr.Error(), `"counts"`) || !strings.Contains(werr.Error(), spillDirName) {
		t.Fatalf("write after a failed spill: %v, want an error naming the state and the spill directory", werr)
	}
	if _, err := b.SnapshotIncremental(1); err == nil || !strings.Contains(err.Error(), `"counts"`) {
		t.Fatalf("checkpoint after a failed spill: %v, want an error naming the state", err)
	}
	for k := range written {
		setKey(b, keyName(k))
		if got, ok, err := v.Value(); err != nil || !ok || got != int64(k) {
			t.Fatalf("key %d after a failed spill = %d %v %v, want %d", k, got, ok, err, k)
		}
	}
}

// TestWriteBufferDirty: a tracking buffer's appendDirty holds each entry
// written since the last call once, with its latest value or deletion
// (overwritten in place, or moved to a longer entry), and nothing written
// before; the sort and the walk of the arena are not disturbed by the
// marks.
func TestWriteBufferDirty(t *testing.T) {
	w := newWriteBuffer()
	w.track = true
	dirty := func() map[string]string {
		t.Helper()
		got := map[string]string{}
		err := decodeSegment(w.appendDirty(slices.Clone(changelogMagic), "s"), func(name string, k, v []byte, dead bool) error {
			if _, dup := got[string(k)]; dup || name != "s" {
				return fmt.Errorf("state %q key %q listed twice or under another state", name, k)
			}
			got[string(k)] = string(v)
			if dead {
				got[string(k)] = "<deleted>"
			}
			return nil
		})
		check(t, err)
		return got
	}
	key := func(s string) []byte { return []byte("\x00\x01" + s) }
	w.put(key("a"), []byte("1"))
	w.put(key("b"), []byte("2"))
	w.put(key("c"), []byte("3"))
	w.put(key("a"), []byte("4"))        // in place
	w.put(key("b"), []byte("longer 5")) // a new entry, the old one stale
	w.del(key("c"))
	if got, want := dirty(), map[string]string{"\x00\x01a": "4", "\x00\x01b": "longer 5", "\x00\x01c": "<deleted>"}; !maps.Equal(got, want) {
		t.Fatalf("first segment %q, want %q", got, want)
	}
	if got := dirty(); len(got) != 0 {
		t.Fatalf("second segment with no writes since %q, want nothing", got)
	}
	w.put(key("b"), []byte("6"))
	w.put(key("d"), []byte("7"))
	if got, want := dirty(), map[string]string{"\x00\x01b": "6", "\x00\x01d": "7"}; !maps.Equal(got, want) {
		t.Fatalf("third segment %q, want %q", got, want)
	}
	var keys []string
	for _, off := range w.sorted() {
		k, _, _ := w.entry(off)
		keys = append(keys, string(k[2:]))
	}
	if !slices.Equal(keys, []string{"a", "b", "c", "d"}) {
		t.Fatalf("sorted keys %q, want a b c d", keys)
	}
	if v, dead, ok := w.get(key("b")); !ok || dead || string(v) != "6" {
		t.Fatalf("b = %q %v %v, want 6", v, dead, ok)
	}
}
