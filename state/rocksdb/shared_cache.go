package rocksdb

import (
	"sync"

	"github.com/linxGnu/grocksdb"
)

// sharedCache is the one block cache of the process's RocksDB backends
// under managed memory: made by the first backend that needs it, resized
// to the capacity of the latest budget, destroyed when the last backend
// using it closes.
type sharedCache struct {
	cache *grocksdb.Cache
	refs  int
}

var (
	sharedMu sync.Mutex
	shared   *sharedCache
)

// acquireSharedCache returns the process's cache, made or set to
// capacity bytes, with one more reference.
func acquireSharedCache(capacity int64) *sharedCache {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		shared = &sharedCache{cache: grocksdb.NewLRUCache(uint64(capacity))}
	} else if shared.cache.GetCapacity() != uint64(capacity) {
		shared.cache.SetCapacity(uint64(capacity))
	}
	shared.refs++
	return shared
}

// release drops a reference; the last destroys the cache.
func (c *sharedCache) release() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if c.refs--; c.refs == 0 {
		c.cache.Destroy()
		if shared == c {
			shared = nil
		}
	}
}
