package sluice

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// ConfigKey is a configuration key that a package above this one reads
// from a Configuration itself (the job runner's rest.*, metrics.* and
// log.* keys, package runner): RegisterConfigKey makes a Configuration
// know it, so that the file, the environment and -D take it and check its
// value when it is set; WithConfiguration leaves it alone.
type ConfigKey struct {
	// Key is the canonical key; Aliases are deprecated names of it.
	Key     string
	Aliases []string
	// List is true when the key takes a list ("[a, b]", "a;b", "a,b").
	List bool
	// Check refuses a value that cannot work, saying why (the error is
	// shown after the key, its value and where it came from); nil takes
	// every value.
	Check func(value string) error
}

var (
	registeredMu   sync.RWMutex
	registeredKeys = map[string]*confOption{} // key and aliases
)

// RegisterConfigKey makes a Configuration know keys that are not an
// Environment's (see ConfigKey); call it from an init function. A key
// that is already known is refused with a panic: two packages would read
// it.
func RegisterConfigKey(keys ...ConfigKey) {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	for _, k := range keys {
		check := k.Check
		o := &confOption{key: k.Key, aliases: k.Aliases, list: k.List,
			apply: func(_ *confApplier, _ confEntry, v string) error {
				if check == nil {
					return nil
				}
				return check(v)
			}}
		for _, name := range append([]string{k.Key}, k.Aliases...) {
			if name == "" || strings.TrimSpace(name) != name {
				panic(fmt.Sprintf("sluice: RegisterConfigKey: bad key %q", name))
			}
			if builtin, _ := lookupBuiltin(name); builtin != nil || registeredKeys[name] != nil {
				panic(fmt.Sprintf("sluice: RegisterConfigKey: key %s is already known", name))
			}
			registeredKeys[name] = o
		}
	}
}

// registeredOption returns the registered option of a key and its
// canonical key.
func registeredOption(key string) (*confOption, string) {
	registeredMu.RLock()
	defer registeredMu.RUnlock()
	if o := registeredKeys[key]; o != nil {
		return o, o.key
	}
	return nil, ""
}

// registeredNames returns the registered keys and aliases, sorted.
func registeredNames() []string {
	registeredMu.RLock()
	defer registeredMu.RUnlock()
	names := make([]string, 0, len(registeredKeys))
	for k := range registeredKeys {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
