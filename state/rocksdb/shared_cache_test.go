package rocksdb

import (
	"testing"

	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/state"
)

// Under managed memory (the default) every backend of the process uses
// one block cache sized from the budget, and its memtables and Go write
// buffers its share; unmanaged, a backend has its own cache of
// BlockCacheSize.
func TestManagedMemorySharesOneCache(t *testing.T) {
	b, err := memory.Config{ProcessSize: 1 << 30}.Budget()
	if err != nil {
		t.Fatal(err)
	}
	old := memory.Install(b)
	t.Cleanup(func() { memory.Install(old) })
	f := Factory(t.TempDir(), Options{})
	open := func(f state.BackendFactory, subtask int) *Backend {
		t.Helper()
		kb, err := f(state.BackendOptions{Job: "j", OperatorUID: "op", Subtask: subtask, Parallelism: 2, MaxParallelism: 128,
			KeyGroups: state.KeyGroupRange{Start: subtask * 64, End: subtask*64 + 63}})
		if err != nil {
			t.Fatal(err)
		}
		return kb.(*Backend)
	}
	a, c := open(f, 0), open(f, 1)
	want := b.RocksDBShare(2, 0)
	if a.nopts.cache != c.nopts.cache || a.nopts.shared == nil {
		t.Fatal("two managed backends of one process have caches of their own")
	}
	if got := a.nopts.cache.GetCapacity(); got != uint64(want.BlockCache) {
		t.Errorf("shared cache capacity %d, want the budget's %d", got, want.BlockCache)
	}
	if a.opts.WriteBufferSize != want.WriteBuffer || a.opts.dbWriteBuffer != want.DBWriteBuffer {
		t.Errorf("write buffer %d, db write buffer %d; want %d, %d", a.opts.WriteBufferSize, a.opts.dbWriteBuffer, want.WriteBuffer, want.DBWriteBuffer)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	sharedMu.Lock()
	refs := shared.refs
	sharedMu.Unlock()
	if refs != 1 {
		t.Errorf("after one close the cache has %d references, want 1", refs)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	sharedMu.Lock()
	gone := shared == nil
	sharedMu.Unlock()
	if !gone {
		t.Error("the shared cache outlived its last backend")
	}
	var uo Options
	if err := uo.Set("state.backend.rocksdb.memory.managed", "false"); err != nil {
		t.Fatal(err)
	}
	u := open(Factory(t.TempDir(), uo), 0)
	defer u.Close()
	if u.nopts.shared != nil || u.nopts.cache.GetCapacity() != DefaultBlockCacheSize || u.opts.WriteBufferSize != DefaultWriteBufferSize {
		t.Errorf("unmanaged backend: shared %v, cache %d, write buffer %d", u.nopts.shared != nil, u.nopts.cache.GetCapacity(), u.opts.WriteBufferSize)
	}
}
