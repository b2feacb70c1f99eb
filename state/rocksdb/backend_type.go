package rocksdb

import (
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/state"
)

// The "rocksdb" value of state.backend.type, for configuration files: a
// program that imports this package can choose RocksDB by configuration,
// with the state.backend.rocksdb.* keys.
func init() {
	state.RegisterBackendType("rocksdb", func(c *config.Configuration, localDir string) (state.BackendFactory, error) {
		var o Options
		if err := o.Configure(c); err != nil {
			return nil, err
		}
		dir := o.Dir
		if dir == "" {
			dir = localDir
		}
		o.Dir = ""
		return Factory(dir, o), nil
	})
}
