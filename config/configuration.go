package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Configuration is a program's options by their Flink keys, from a file
// in Flink's config.yaml shape, the environment and -D key=value
// arguments: a flat map of keys to string values in three layers, each
// value with where it came from. Every key is one a linked package
// declares (see Key), checked when it is set; the packages read their
// keys from it with Key.Get.
type Configuration struct {
	layers [numLayers]map[string]entry // by canonical key
	// fileErr and envErr are what Flags could not read; Err reports
	// them.
	fileErr, envErr error
}

// Layer is where a value comes from, by precedence: a package that
// ranks sources of its own between them reads the layers apart (Only).
type Layer uint8

// The layers, by precedence: the file, then the environment, then -D
// and Set.
const (
	LayerFile Layer = iota
	LayerEnv
	LayerDynamic
	numLayers
)

type entry struct {
	key    string // as written: the canonical key or a deprecated one
	value  string
	list   bool // the value was a YAML list
	source string
	layer  Layer
}

// New returns an empty configuration.
func New() *Configuration {
	c := &Configuration{}
	for i := range c.layers {
		c.layers[i] = map[string]entry{}
	}
	return c
}

// Load reads a file in Flink's config.yaml shape. Every unknown key and
// bad value is refused, together, each error naming the file and line.
func Load(path string) (*Configuration, error) {
	c := New()
	if err := c.LoadFile(path); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadFile reads a file in Flink's config.yaml shape into c, over the
// values of a file read before.
func (c *Configuration) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: configuration file: %w", ErrInvalidOption, err)
	}
	return c.loadYAML(LayerFile, data, path, func(line int) string {
		if line == 0 {
			return path
		}
		return fmt.Sprintf("%s:%d", path, line)
	})
}

// Set sets a key as a -D argument does, over the file's and the
// environment's values; the error says why a key or value is refused.
func (c *Configuration) Set(key, value string) error {
	return c.put(entry{key: key, value: value, source: "Set", layer: LayerDynamic})
}

// SetUnchecked stores a value as a file's line does, without checking
// the key or the value: for tests of the code that reads keys, which
// must name the key and source of a value it refuses.
func (c *Configuration) SetUnchecked(key, value, source string) {
	if ent, ok := lookupCanonical(key); ok {
		key = ent
	}
	c.layers[LayerFile][key] = entry{key: key, value: value, source: source, layer: LayerFile}
}

// Only returns a configuration with c's values of the given layers: the
// cluster's SLUICE_* variables rank between the file and the
// environment's keys.
func (c *Configuration) Only(layers ...Layer) *Configuration {
	o := New()
	if c == nil {
		return o
	}
	for _, l := range layers {
		for k, ent := range c.layers[l] {
			o.layers[l][k] = ent
		}
	}
	return o
}

// Get returns the value of a key (or of its deprecated name) as written,
// from the layer with the highest precedence that has it.
func (c *Configuration) Get(key string) (string, bool) {
	ent, ok := c.effective(key)
	return ent.value, ok
}

// Source says where the value Get returns came from: "file:line", an
// environment variable, "-D" or "Set"; empty when the key is not set.
func (c *Configuration) Source(key string) string {
	ent, _ := c.effective(key)
	return ent.source
}

// Keys returns the keys that are set, canonical (a deprecated name as
// its key), sorted.
func (c *Configuration) Keys() []string {
	if c == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, l := range c.layers {
		for k := range l {
			seen[k] = true
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// String lists the effective values, one "key: value (source)" a line,
// secrets as ******: for a log line at startup.
func (c *Configuration) String() string {
	var b strings.Builder
	for _, k := range c.Keys() {
		ent, _ := c.effective(k)
		fmt.Fprintf(&b, "%s: %s (%s)\n", k, mask(k, ent.value), ent.source)
	}
	return b.String()
}

// Err returns what Flags could not read from $SLUICE_CONFIG_FILE and the
// environment.
func (c *Configuration) Err() error {
	if c == nil {
		return nil
	}
	return errors.Join(c.fileErr, c.envErr)
}

// Validate returns what Err returns, the keys set that no linked package
// declares (stored unchecked, or before a package that declared them was
// left out of the program), and what the checks of whole configurations
// refuse (RegisterCheck: keys that go together, files that values name).
// What an Environment refuses of it besides (options that refuse a
// combination of values) is sluice.NewEnvironment(sluice.WithConfiguration(c)).Err().
func (c *Configuration) Validate() error {
	errs := []error{c.Err()}
	for _, k := range c.Keys() {
		if lookup(k) == nil {
			ent, _ := c.effective(k)
			_, err := checkEntry(ent)
			errs = append(errs, err)
		}
	}
	registry.RLock()
	checks := slices.Clone(registry.checks)
	registry.RUnlock()
	for _, check := range checks {
		errs = append(errs, check(c))
	}
	return errors.Join(errs...)
}

// KeyError returns err as the *Error of key's value (its value and
// source) when key is set, else as an *Error naming the key: for a
// package that refuses a value for a reason its key's checks do not
// know (another key, what the value names). An err that is already an
// *Error is returned as it is.
func (c *Configuration) KeyError(key string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	if ent, ok := c.effective(key); ok {
		return ent.error(err)
	}
	return &Error{Key: key, Err: err}
}

// Blame returns err, whose text names keys, as the *Error of the set key
// it names (the longest that it does), else of fallback: for a check
// across keys (restart-strategy.exponential-delay.max-backoff below its
// initial-backoff), blamed on the key the user must change.
func (c *Configuration) Blame(err error, fallback string) error {
	if err == nil {
		return nil
	}
	keys := c.Keys()
	slices.SortStableFunc(keys, func(a, b string) int { return len(b) - len(a) })
	for _, k := range keys {
		if strings.Contains(err.Error(), k) {
			return c.KeyError(k, err)
		}
	}
	if _, ok := c.effective(fallback); ok {
		return c.KeyError(fallback, err)
	}
	return fmt.Errorf("%w: %w", ErrInvalidOption, err)
}

// lookupCanonical returns the canonical key of a declared key or
// deprecated name.
func lookupCanonical(key string) (string, bool) {
	if k := lookup(key); k != nil {
		return k.name, true
	}
	return "", false
}

func (c *Configuration) effective(key string) (entry, bool) {
	if c == nil {
		return entry{}, false
	}
	if canon, ok := lookupCanonical(key); ok {
		key = canon
	}
	for l := numLayers - 1; ; l-- {
		if ent, ok := c.layers[l][key]; ok {
			return ent, true
		}
		if l == 0 {
			return entry{}, false
		}
	}
}

// put checks an entry's key and value and stores it in its layer.
func (c *Configuration) put(ent entry) error {
	canon, err := checkEntry(ent)
	if err != nil {
		return err
	}
	if c.layers[ent.layer] == nil {
		c.layers[ent.layer] = map[string]entry{}
	}
	c.layers[ent.layer][canon] = ent
	return nil
}

// checkEntry returns the canonical key of an entry whose key is declared
// and whose value is good on its own.
func checkEntry(ent entry) (string, error) {
	k := lookup(ent.key)
	if k == nil {
		return "", ent.error(unknownKey(ent.key))
	}
	if ent.list && !k.list {
		return "", ent.error(errors.New("takes one value, not a list"))
	}
	if err := k.check(ent.value); err != nil {
		return "", ent.error(err)
	}
	return k.name, nil
}
