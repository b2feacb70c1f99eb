package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// EnvPrefix is the prefix of the environment variables that set one key
// each: SLUICE_CONF_ and the key in upper case with '.' and '-' as '_'
// (SLUICE_CONF_EXECUTION_CHECKPOINTING_INTERVAL).
const EnvPrefix = "SLUICE_CONF_"

// EnvProperties is the environment variable that holds configuration in
// the file's shape, as Flink's FLINK_PROPERTIES.
const EnvProperties = "SLUICE_PROPERTIES"

// EnvConfigFile is the environment variable Flags reads the
// configuration file's path from (overridden by -config).
const EnvConfigFile = "SLUICE_CONFIG_FILE"

// FromEnv reads $SLUICE_PROPERTIES and the SLUICE_CONF_* variables into
// c, over the file's values; a SLUICE_CONF_ variable that is no key's is
// refused.
func (c *Configuration) FromEnv() error {
	var errs []error
	if v := os.Getenv(EnvProperties); strings.TrimSpace(v) != "" {
		errs = append(errs, c.loadYAML(LayerEnv, []byte(v), "$"+EnvProperties, func(line int) string {
			if line == 0 {
				return "$" + EnvProperties
			}
			return fmt.Sprintf("$%s line %d", EnvProperties, line)
		}))
	}
	vars := os.Environ()
	slices.Sort(vars)
	keys := envKeys()
	for _, kv := range vars {
		name, value, _ := strings.Cut(kv, "=")
		suffix, ok := strings.CutPrefix(name, EnvPrefix)
		if !ok {
			continue
		}
		key, known := keys[suffix]
		if !known {
			err := fmt.Errorf("%w: no key's variable (%s and the key in upper case, '.' and '-' as '_')", ErrUnknownKey, EnvPrefix)
			if near := nearestKey(strings.ToLower(strings.ReplaceAll(suffix, "_", "."))); near != "" {
				err = fmt.Errorf("%w; did you mean %s%s?", err, EnvPrefix, EnvSuffix(near))
			}
			errs = append(errs, &Error{Key: "$" + name, Err: err})
			continue
		}
		errs = append(errs, c.put(entry{key: key, value: value, source: "$" + name, layer: LayerEnv}))
	}
	return errors.Join(errs...)
}

// envKeys maps the SLUICE_CONF_ suffix of every declared key and
// deprecated name to it.
func envKeys() map[string]string {
	m := map[string]string{}
	for _, n := range names() {
		m[EnvSuffix(n)] = n
	}
	return m
}

// EnvSuffix is a key's SLUICE_CONF_ variable without the prefix.
func EnvSuffix(key string) string {
	return strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}
