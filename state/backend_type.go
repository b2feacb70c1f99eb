package state

import (
	"errors"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/config"
)

// ErrUnknownBackendOption: a state.backend.<type>.* key the backend does
// not know.
var ErrUnknownBackendOption = errors.New("unknown state backend option")

// BackendType makes the factory of a keyed state backend type that a
// configuration chooses (state.backend.type), from its own keys
// (state.backend.<type>.*), with localDir as its working directory when
// they set none.
type BackendType func(c *config.Configuration, localDir string) (BackendFactory, error)

var backendTypes = struct {
	sync.RWMutex
	m map[string]BackendType
}{m: map[string]BackendType{}}

// RegisterBackendType makes name (a value of state.backend.type) build
// its backend with newFactory; the backend's package registers it, so
// that a program that only reads its configuration links the backends it
// imports and no others (RocksDB needs cgo). package state/rocksdb
// registers "rocksdb".
func RegisterBackendType(name string, newFactory BackendType) {
	backendTypes.Lock()
	defer backendTypes.Unlock()
	backendTypes.m[name] = newFactory
}

// ConfiguredBackend returns the factory of the backend type name made
// from c, or false when no package registered the type (the program does
// not import it).
func ConfiguredBackend(name string, c *config.Configuration, localDir string) (BackendFactory, bool, error) {
	backendTypes.RLock()
	f := backendTypes.m[name]
	backendTypes.RUnlock()
	if f == nil {
		return nil, false, nil
	}
	bf, err := f(c, localDir)
	return bf, true, err
}

// BackendTypes lists the registered backend types, sorted.
func BackendTypes() []string {
	backendTypes.RLock()
	defer backendTypes.RUnlock()
	var out []string
	for n := range backendTypes.m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
