package config

import (
	"errors"
	"fmt"
)

// Fields are the keys that set the fields of a package's configuration
// struct C (s3.Config, cluster.Config, rocksdb.Options): one table serves
// the package's reading of a Configuration (Configure) and its Set method
// (Set), so that both take the same keys with the same parsers.
//
//	var fields = config.Fields[Config]{
//		config.Field(keyRegion, func(c *Config, v string) { c.Region = v }),
//		config.Field(keyPartSize, func(c *Config, v int64) { c.PartSize = v }),
//	}
type Fields[C any] []FieldKey[C]

// FieldKey is one key of Fields and how it sets C.
type FieldKey[C any] struct {
	names []string
	get   func(c *C, conf *Configuration) (bool, error)
	set   func(c *C, value string) error
}

// Field makes the FieldKey of a key: apply sets C from its value.
func Field[C, T any](k *Key[T], apply func(c *C, v T)) FieldKey[C] {
	return FieldKey[C]{
		names: k.Names(),
		get: func(c *C, conf *Configuration) (bool, error) {
			v, ok, err := k.Get(conf)
			if ok && err == nil {
				apply(c, v)
			}
			return ok, err
		},
		set: func(c *C, value string) error {
			v, err := k.Parse(value)
			if err == nil {
				apply(c, v)
			}
			return err
		},
	}
}

// Configure sets c from the keys conf sets, in the table's order, and
// reports whether conf sets any; the error names every key whose value
// it refuses.
func (fs Fields[C]) Configure(c *C, conf *Configuration) (set bool, err error) {
	var errs []error
	for _, f := range fs {
		ok, err := f.get(c, conf)
		set = set || ok
		errs = append(errs, err)
	}
	return set, errors.Join(errs...)
}

// Set sets c from one key (or a deprecated name) and its value. The
// error of a key that is not one of fs wraps ErrUnknownKey; that of a
// value says key="value": why (the value ****** for a Sensitive key).
func (fs Fields[C]) Set(c *C, key, value string) error {
	for _, f := range fs {
		for _, n := range f.names {
			if n == key {
				if err := f.set(c, value); err != nil {
					return fmt.Errorf("%s=%q: %w", key, mask(key, value), err)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("%w %q", ErrUnknownKey, key)
}

// Takes reports whether key (or a deprecated name) is one of fs.
func (fs Fields[C]) Takes(key string) bool {
	for _, f := range fs {
		for _, n := range f.names {
			if n == key {
				return true
			}
		}
	}
	return false
}
