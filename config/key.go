package config

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Key is a configuration key a package declares, with the type of its
// values: the package reads it from a Configuration with Get, which
// parses the value with the key's kind's parser and its checks. Declare
// keys in a var block of a file of their own (config_keys.go), with the
// constructor of their kind:
//
//	var keyInterval = config.Duration("execution.checkpointing.interval",
//		"Checkpoint interval; 0 or unset: no checkpoints.")
//	var keySlots = config.Int("taskmanager.numberOfTaskSlots", "Task slots a worker offers.").
//		Default(1).Check(config.Between(1, math.MaxInt32))
//
// Declaring a key makes every Configuration of the program take it (the
// file, SLUICE_CONF_*, -D, Set), check its values when they are set, and
// list it in the key reference; a key two packages declare panics.
type Key[T any] struct {
	info   *keyInfo
	parse  func(string) (T, error)
	format func(T) string
	checks []func(T) error
	def    T
}

// keyInfo is what the registry knows of a key, whatever its type.
type keyInfo struct {
	name       string
	deprecated []string
	doc        string
	kind       string
	def        string // the default as the reference shows it
	defProse   bool   // def is prose (DefaultText), not a value
	list       bool   // takes a list
	sensitive  bool
	pkg        string             // the declaring package's import path
	check      func(string) error // the value alone: parse and checks
}

// Name returns the key.
func (k *Key[T]) Name() string { return k.info.name }

// Names returns the key and its deprecated names.
func (k *Key[T]) Names() []string { return append([]string{k.info.name}, k.info.deprecated...) }

// DeprecatedKeys adds Flink's deprecated names of the key, which a
// Configuration takes as the key itself.
func (k *Key[T]) DeprecatedKeys(names ...string) *Key[T] {
	register(k.info, names...)
	k.info.deprecated = append(k.info.deprecated, names...)
	return k
}

// Default sets what Get returns when the key is not set, and what the
// reference shows (in the kind's syntax).
func (k *Key[T]) Default(v T) *Key[T] {
	k.def = v
	k.info.def, k.info.defProse = k.format(v), false
	return k
}

// DefaultText sets what the reference shows as the default, for one a
// package computes ("the system's temporary directory", "unbounded");
// Get returns the zero value when the key is not set.
func (k *Key[T]) DefaultText(text string) *Key[T] {
	k.info.def, k.info.defProse = text, true
	return k
}

// Check adds a check of the parsed value: an error refuses it, saying
// why (the error is shown after the key, its value and where it came
// from). Checks run when a value is set and when it is read.
func (k *Key[T]) Check(check func(T) error) *Key[T] {
	k.checks = append(k.checks, check)
	return k
}

// Sensitive marks the key's values as secrets: errors and
// Configuration.String show them as ******.
func (k *Key[T]) Sensitive() *Key[T] {
	k.info.sensitive = true
	return k
}

// Parse parses a value of the key as a Configuration does, with the
// key's checks: for a package's own Set method or flags. The error says
// what is wrong with the value, without the key.
func (k *Key[T]) Parse(value string) (T, error) {
	v, err := k.parse(value)
	if err != nil {
		var zero T
		return zero, err
	}
	for _, c := range k.checks {
		if err := c(v); err != nil {
			return v, err
		}
	}
	return v, nil
}

// Get returns the key's value in c, and whether it is set; the default
// (Default, else the zero value) when it is not. The error is an *Error
// naming the key, the value and where it came from. A nil c has no key
// set.
func (k *Key[T]) Get(c *Configuration) (v T, set bool, err error) {
	ent, ok := c.effective(k.info.name)
	if !ok {
		return k.def, false, nil
	}
	v, err = k.Parse(ent.value)
	if err != nil {
		return v, true, ent.error(err)
	}
	return v, true, nil
}

// ---- Declaring keys of each kind ----

// declare makes and registers a key; the declaring package is found
// from the caller of its kind's constructor.
func declare[T any](name, doc, kind string, parse func(string) (T, error), format func(T) string) *Key[T] {
	k := &Key[T]{parse: parse, format: format}
	k.info = &keyInfo{name: name, doc: doc, kind: kind, pkg: callerPackage(2)}
	k.info.check = func(v string) error { _, err := k.Parse(v); return err }
	register(k.info, name)
	return k
}

// callerPackage is the import path of the package of the function skip
// frames up (0: callerPackage's caller), inlined calls counted as frames.
func callerPackage(skip int) string {
	pcs := make([]uintptr, skip+2)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	var f runtime.Frame
	for more := true; more && skip >= 0; skip-- {
		f, more = frames.Next()
	}
	fn := f.Function // path/to/pkg.init.func1
	slash := strings.LastIndexByte(fn, '/')
	if dot := strings.IndexByte(fn[slash+1:], '.'); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}

// String declares a key whose value is taken as written, trimmed.
func String(name, doc string) *Key[string] {
	return declare(name, doc, "string", ParseString, func(v string) string { return v })
}

// Bool declares a key of true or false.
func Bool(name, doc string) *Key[bool] {
	return declare(name, doc, "boolean", ParseBool, strconv.FormatBool)
}

// Int declares a key of a whole number.
func Int(name, doc string) *Key[int] {
	return declare(name, doc, "integer", ParseInt, strconv.Itoa)
}

// Float declares a key of a number.
func Float(name, doc string) *Key[float64] {
	return declare(name, doc, "number", ParseFloat, func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) })
}

// Duration declares a key of a duration in Flink's syntax (see
// ParseDuration).
func Duration(name, doc string) *Key[time.Duration] {
	return declare(name, doc, "duration", ParseDuration, FormatDuration)
}

// MemorySize declares a key of a memory size in Flink's syntax, in bytes
// (see ParseMemorySize).
func MemorySize(name, doc string) *Key[int64] {
	return declare(name, doc, "memory size", ParseMemorySize, FormatMemorySize)
}

// List declares a key that takes a list: a YAML list in a file, "[a, b]",
// "a;b" or "a,b" (see ParseList).
func List(name, doc string) *Key[[]string] {
	k := declare(name, doc, "list", ParseList, func(v []string) string { return strings.Join(v, ", ") })
	k.info.list = true
	return k
}

// Choice declares a key that takes one of values, in any case and with
// '-' as '_' (Flink's enumerations: EXACTLY_ONCE, exactly-once); Get
// returns it as values spell it.
func Choice(name, doc string, values ...string) *Key[string] {
	return declare(name, doc, strings.Join(values, ", "), func(v string) (string, error) { return ParseChoice(v, values...) },
		func(v string) string { return v })
}

// Enum declares a key whose values a package's parser reads into its own
// type (checkpoint.ParseMode), listing what it takes for the reference.
func Enum[T any](name, doc string, parse func(string) (T, error), values ...string) *Key[T] {
	return declare(name, doc, strings.Join(values, ", "), parse, func(v T) string { return fmt.Sprint(v) })
}

// Custom declares a key of a kind a package parses itself (ports "8081,
// 50100-50200", a host name), kind naming it in the reference.
func Custom[T any](name, doc, kind string, parse func(string) (T, error)) *Key[T] {
	return declare(name, doc, kind, parse, func(v T) string { return fmt.Sprint(v) })
}

// ---- Checks ----

// AtLeast refuses a value below least: "must be at least least".
func AtLeast[T cmp.Ordered](least T) func(T) error {
	return func(v T) error {
		if v < least {
			return fmt.Errorf("must be at least %v", least)
		}
		return nil
	}
}

// Between refuses a value outside [lo, hi].
func Between[T cmp.Ordered](lo, hi T) func(T) error {
	return func(v T) error {
		switch {
		case v < lo:
			return fmt.Errorf("must be at least %v", lo)
		case v > hi:
			return fmt.Errorf("must be at most %v", hi)
		}
		return nil
	}
}

// Positive refuses a zero duration ("must be positive"); a negative one
// does not parse.
func Positive(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("must be positive")
	}
	return nil
}

// ---- The registry ----

var registry = struct {
	sync.RWMutex
	byName map[string]*keyInfo // keys and deprecated names
	hints  []hint
	checks []func(*Configuration) error
}{byName: map[string]*keyInfo{}}

type hint struct{ prefix, text string }

func register(k *keyInfo, names ...string) {
	registry.Lock()
	defer registry.Unlock()
	for _, n := range names {
		if n == "" || strings.TrimSpace(n) != n || strings.ContainsAny(n, " =") {
			panic(fmt.Sprintf("config: bad key %q", n))
		}
		if prev := registry.byName[n]; prev != nil {
			panic(fmt.Sprintf("config: key %s declared by %s and %s", n, prev.pkg, k.pkg))
		}
		registry.byName[n] = k
	}
}

// lookup returns the key of a name (the key or a deprecated name); nil
// when no linked package declares it.
func lookup(name string) *keyInfo {
	registry.RLock()
	defer registry.RUnlock()
	return registry.byName[name]
}

// names returns the declared keys and deprecated names, sorted.
func names() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.byName))
	for n := range registry.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Hint tells the error of an unknown key that starts with prefix (or is
// prefix, for one without a trailing '.') what declares it, when no
// declared key starts with prefix: the root package names the packages
// that declare keys when a program imports them ("the s3.* keys are
// read by .../checkpoint/storage/s3: import it").
func Hint(prefix, text string) {
	registry.Lock()
	defer registry.Unlock()
	registry.hints = append(registry.hints, hint{prefix, text})
}

func hintFor(key string) string {
	registry.RLock()
	defer registry.RUnlock()
	for _, h := range registry.hints {
		if key != h.prefix && !(strings.HasSuffix(h.prefix, ".") && strings.HasPrefix(key, h.prefix)) {
			continue
		}
		linked := false
		for n := range registry.byName {
			linked = linked || n == h.prefix || (strings.HasSuffix(h.prefix, ".") && strings.HasPrefix(n, h.prefix))
		}
		if !linked {
			return h.text
		}
	}
	return ""
}

// RegisterCheck adds a check of a whole configuration, for what no key's
// value alone says: keys that go together, the files values name (the
// Kafka client's trust stores). Configuration.Validate runs the checks,
// and so does the root package's WithConfiguration. Call it from an init
// function.
func RegisterCheck(check func(*Configuration) error) {
	registry.Lock()
	defer registry.Unlock()
	registry.checks = append(registry.checks, check)
}

// Description is what the key reference shows of a declared key.
type Description struct {
	Key        string
	Deprecated []string
	// Kind is "duration", "memory size", "boolean", "integer",
	// "number", "string", "list", the values of an enumeration, or a
	// package's own kind.
	Kind string
	// Default is the default in the kind's syntax, or prose
	// (DefaultProse) for one a package computes.
	Default      string
	DefaultProse bool
	Doc          string
	// Package is the import path of the package that declares the key.
	Package   string
	Sensitive bool
}

// Declared describes every key the program's packages declare, by
// package and key.
func Declared() []Description {
	registry.RLock()
	seen := map[*keyInfo]bool{}
	var out []Description
	for _, k := range registry.byName {
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, Description{Key: k.name, Deprecated: slices.Clone(k.deprecated), Kind: k.kind, Default: k.def,
			DefaultProse: k.defProse, Doc: k.doc, Package: k.pkg, Sensitive: k.sensitive || sensitiveName(k.name)})
	}
	registry.RUnlock()
	slices.SortFunc(out, func(a, b Description) int {
		return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Key, b.Key))
	})
	return out
}
