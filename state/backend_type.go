package state

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// BackendConfig is a keyed state backend type configured by Flink-named
// options (state.backend.type and its state.backend.<type>.* keys), for
// configuration files: the backend's package registers it, so that a
// program that only reads its configuration links the backends it
// imports and no others (RocksDB needs cgo).
type BackendConfig interface {
	// Set applies one option by its full key; a key the backend does not
	// know is an error wrapping ErrUnknownBackendOption.
	Set(key, value string) error
	// Factory makes the backend factory, with localDir (when the
	// options set none) as its working directory.
	Factory(localDir string) BackendFactory
}

// ErrUnknownBackendOption: a state.backend.<type>.* key the backend does
// not know.
var ErrUnknownBackendOption = errors.New("unknown state backend option")

var backendTypes = struct {
	sync.RWMutex
	m map[string]func() BackendConfig
}{m: map[string]func() BackendConfig{}}

// RegisterBackendType makes name (a value of state.backend.type) build
// its backend with newConfig. package state/rocksdb registers "rocksdb".
func RegisterBackendType(name string, newConfig func() BackendConfig) {
	backendTypes.Lock()
	defer backendTypes.Unlock()
	backendTypes.m[name] = newConfig
}

// NewBackendConfig returns the configuration of the backend type name,
// or false when no package registered it (the program does not import
// it).
func NewBackendConfig(name string) (BackendConfig, bool) {
	backendTypes.RLock()
	defer backendTypes.RUnlock()
	f := backendTypes.m[name]
	if f == nil {
		return nil, false
	}
	return f(), true
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

// ParseMemorySize parses a memory size as Flink's MemorySize: a number
// followed by an optional unit (b, k/kb, m/mb, g/gb, t/tb, binary
// multiples, case-insensitive), e.g. "64mb", "8 mb", "4096".
func ParseMemorySize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("memory size %q: want a non-negative number with an optional unit", s)
	}
	var shift uint
	switch unit {
	case "", "b", "bytes":
	case "k", "kb", "kibibytes":
		shift = 10
	case "m", "mb", "mebibytes":
		shift = 20
	case "g", "gb", "gibibytes":
		shift = 30
	case "t", "tb", "tebibytes":
		shift = 40
	default:
		return 0, fmt.Errorf("memory size %q: unknown unit %q", s, unit)
	}
	if n > (1<<63-1)>>shift {
		return 0, fmt.Errorf("memory size %q overflows", s)
	}
	return n << shift, nil
}
