// Package config owns a program's configuration: the keys, each declared
// by the package that reads it with the type of its values (Key), and
// the layered map of their values (Configuration) from a file in Flink's
// config.yaml shape, the environment and -D key=value arguments, each
// value with where it came from. It imports no other package of Sluice:
// every package may declare keys, a connector too.
//
//	conf := config.Flags(flag.CommandLine) // -config, -D; $SLUICE_CONFIG_FILE, $SLUICE_CONF_*, $SLUICE_PROPERTIES
//	flag.Parse()
//	interval, set, err := keyInterval.Get(conf)
//
// or, without flags: Load(path), then FromEnv and
// ParseDynamicProperties(os.Args[1:]). The root package's
// sluice.ConfigFlags, sluice.LoadConfiguration and sluice.Configuration
// are these.
//
// # The file
//
// Flink's config.yaml (Flink 1.19 and later, the only form of Flink 2):
// standard YAML whose nested mappings are flattened with dots, so that
// these are the same key, and may be mixed in one file:
//
//	execution:
//	  checkpointing:
//	    interval: 10 s
//	execution.checkpointing.interval: 10 s
//
// A key given twice (also once nested and once flat, or under a key and
// its deprecated name) is refused, as Flink refuses duplicate keys. A
// YAML list is a value "[a, b]" (Flink's string form of a list); the
// keys that take a list also accept "a;b" and "a,b". A null value (~ or
// nothing) leaves the key unset. Scalars are taken as written: 010 is
// "010", yes is "yes" (booleans are true or false).
//
// # Precedence
//
// As Flink: the file, then the environment, then -D (and Set) override.
// In the environment, $SLUICE_PROPERTIES holds YAML in the file's shape
// ("key: value" lines, as Flink's FLINK_PROPERTIES), and SLUICE_CONF_<KEY>
// sets one key: the key in upper case with '.' and '-' as '_'
// (SLUICE_CONF_EXECUTION_CHECKPOINTING_INTERVAL=10s,
// SLUICE_CONF_TASKMANAGER_NUMBEROFTASKSLOTS=4), overriding
// $SLUICE_PROPERTIES. A SLUICE_CONF_ variable that is no key's is
// refused.
//
// # Values
//
// One parser per kind of value, Flink's syntax, whichever package reads
// the key. Durations (ParseDuration): a number and an optional unit,
// "10 s", "1.5 s", "500ms", "1min", "2h", "1 d" (ns, us/µs, ms, s,
// min/m, h, d and their long forms); a number alone is milliseconds; Go's
// "1m30s" is accepted too. Memory sizes (ParseMemorySize): "64mb",
// "8 mb", "1gb", "4096" (bytes; k/kb, m/mb, g/gb, t/tb, binary
// multiples). Booleans: true or false. Enumerations in Flink's spelling,
// in any case, '-' as '_' (EXACTLY_ONCE, exactly-once). Lists: a YAML
// list, "[a, b]", "a;b" or "a,b".
//
// # Errors
//
// An unknown key, and a value that does not parse or is out of range, is
// an *Error naming the key, the value and where it came from (the file
// and line, the environment variable, -D), with the nearest declared key
// when the key is unknown, or the package that declares it when the
// program does not import that package. The values of keys that hold
// secrets (password, secret, token, jaas.config, ssl.keystore.key, ...)
// are shown as ******, as Flink does.
//
// # Keys
//
// docs/configuration.md lists every key the packages of the module
// declare, generated from the declarations (go generate ./config, which
// runs internal/configdoc); Declared describes the keys of the running
// program.
package config

//go:generate go run ../internal/configdoc -o ../docs/configuration.md
