package rocksdb

import "github.com/sluicehq/sluice/state"

// The "rocksdb" value of state.backend.type, for configuration files: a
// program that imports this package can choose RocksDB by configuration.
func init() {
	state.RegisterBackendType("rocksdb", func() state.BackendConfig { return &backendConfig{} })
}

type backendConfig struct{ o Options }

func (c *backendConfig) Set(key, value string) error { return c.o.Set(key, value) }

func (c *backendConfig) Factory(localDir string) state.BackendFactory {
	o := c.o
	dir := o.Dir
	if dir == "" {
		dir = localDir
	}
	o.Dir = ""
	return Factory(dir, o)
}

// Options are the options set so far.
func (c *backendConfig) Options() Options { return c.o }
