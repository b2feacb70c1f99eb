package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// ParseDynamicProperties takes Flink's dynamic properties from args,
// -D key=value and -Dkey=value, into c over the file's and the
// environment's values (a later one over an earlier), and returns the
// other arguments. It stops at "--", which it leaves in the rest.
func (c *Configuration) ParseDynamicProperties(args []string) (rest []string, err error) {
	var errs []error
	for i := 0; i < len(args); i++ {
		a := args[i]
		var kv string
		switch {
		case a == "--":
			return append(rest, args[i:]...), errors.Join(errs...)
		case a == "-D":
			if i+1 == len(args) {
				errs = append(errs, fmt.Errorf("%w: -D without key=value", ErrInvalidOption))
				continue
			}
			i++
			kv = args[i]
		case strings.HasPrefix(a, "-D"):
			kv = a[2:]
		default:
			rest = append(rest, a)
			continue
		}
		errs = append(errs, c.setDynamic(kv, "-D"))
	}
	return rest, errors.Join(errs...)
}

func (c *Configuration) setDynamic(kv, source string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return &Error{Key: kv, Source: source, Err: errors.New("want key=value")}
	}
	return c.put(entry{key: strings.TrimSpace(k), value: strings.TrimSpace(v), source: source, layer: LayerDynamic})
}

// KeyFlag is a -D flag.Value that takes some keys only (package
// cluster's): Flags hands it the -D arguments of the keys it Takes, so
// that both see them.
type KeyFlag interface {
	flag.Value
	// Takes reports whether the flag takes a key (canonical).
	Takes(key string) bool
}

// Flags registers on fs -config (a file in config.yaml's shape, default
// $SLUICE_CONFIG_FILE) and -D key=value (repeatable, any key), and reads
// the environment (FromEnv) at once; Err returns what it could not read.
// Use the result after fs.Parse.
//
// A -D that fs already has is shared: every -D goes into the
// configuration, and to the earlier flag too when it is a KeyFlag that
// takes the key.
func Flags(fs *flag.FlagSet) *Configuration {
	c := New()
	if p := os.Getenv(EnvConfigFile); p != "" {
		c.fileErr = c.LoadFile(p)
	}
	c.envErr = c.FromEnv()
	fs.Func("config", "a configuration file in Flink's config.yaml shape ($"+EnvConfigFile+")", func(p string) error {
		c.layers[LayerFile] = map[string]entry{}
		c.fileErr = nil
		return c.LoadFile(p)
	})
	d := &dynamicFlag{c: c}
	if f := fs.Lookup("D"); f != nil {
		d.next, _ = f.Value.(KeyFlag)
		f.Value = d
		f.Usage += "; or any configuration key"
	} else {
		fs.Var(d, "D", "key=value: a configuration option by its Flink key (repeatable)")
	}
	return c
}

type dynamicFlag struct {
	c    *Configuration
	next KeyFlag // an earlier -D
}

func (d *dynamicFlag) String() string { return "" }

func (d *dynamicFlag) Set(s string) error {
	if err := d.c.setDynamic(s, "-D"); err != nil {
		return err
	}
	if d.next == nil {
		return nil
	}
	k, v, _ := strings.Cut(s, "=")
	if canon, ok := lookupCanonical(strings.TrimSpace(k)); ok && d.next.Takes(canon) {
		return d.next.Set(canon + "=" + strings.TrimSpace(v))
	}
	return nil
}
