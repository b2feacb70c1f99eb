package memory

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/config"
)

// A ConnectorShare is a part of the Sluice memory (the process less the overhead)
// that a connector sets aside for its clients' buffers, as a fraction:
// the Kafka source's fetched records (kafka.source), the Kafka sink's
// producer buffers (kafka.sink). The connector declares it
// (RegisterShare) from a package-level variable, so every program that
// imports the connector budgets for it and one that does not leaves that
// memory to the task heap; this package knows no connector. The fraction
// is the key taskmanager.memory.<name>.fraction (Config.Fractions).
type ConnectorShare struct {
	name string
	def  float64
	key  *config.Key[float64]
}

var shares struct {
	sync.RWMutex
	list []*ConnectorShare
}

// RegisterShare declares the share name (lower case, dot-separated: "kafka.source")
// of default fraction def, read from taskmanager.memory.<name>.fraction
// (doc says what it holds). It panics when name is declared already or
// def is not in [0, 1).
func RegisterShare(name, doc string, def float64) *ConnectorShare {
	if def < 0 || def >= 1 || name == "" || strings.ToLower(name) != name {
		panic(fmt.Sprintf("memory: share %q of default fraction %v", name, def))
	}
	shares.Lock()
	defer shares.Unlock()
	if slices.ContainsFunc(shares.list, func(s *ConnectorShare) bool { return s.name == name }) {
		panic(fmt.Sprintf("memory: share %q registered twice", name))
	}
	s := &ConnectorShare{name: name, def: def, key: fraction(ShareKey(name), doc, def)}
	shares.list = append(shares.list, s)
	return s
}

// ShareKey is the configuration key of the fraction of share name.
func ShareKey(name string) string { return "taskmanager.memory." + name + ".fraction" }

// Name is the share's name.
func (s *ConnectorShare) Name() string { return s.name }

// Default is the share's default fraction.
func (s *ConnectorShare) Default() float64 { return s.def }

// Of returns the share's bytes in b.
func (s *ConnectorShare) Of(b Budget) int64 { return b.Shares[s.name] }

// registeredShares returns the declared shares, in declaration order.
func registeredShares() []*ConnectorShare {
	shares.RLock()
	defer shares.RUnlock()
	return slices.Clone(shares.list)
}

// budgetShares computes every declared share of sluice bytes from the
// fractions of c, refusing a fraction out of range or of a share no
// package declared.
func (c Config) budgetShares(sluice int64) (map[string]int64, int64, error) {
	declared := registeredShares()
	for name := range c.Fractions {
		if !slices.ContainsFunc(declared, func(s *ConnectorShare) bool { return s.name == name }) {
			return nil, 0, fmt.Errorf("%w: %s: no package of the program declares the share %q (its connector is not imported)",
				ErrInvalid, ShareKey(name), name)
		}
	}
	out := make(map[string]int64, len(declared))
	var sum int64
	for _, s := range declared {
		f := c.Fractions[s.name]
		if f < 0 || f >= 1 || math.IsNaN(f) {
			return nil, 0, fmt.Errorf("%w: %s %v: want a fraction in [0, 1)", ErrInvalid, ShareKey(s.name), f)
		}
		out[s.name] = int64(float64(sluice) * frac(f, s.def))
		sum += out[s.name]
	}
	return out, sum, nil
}

// configureShares sets the fractions of the declared shares conf sets.
func (c *Config) configureShares(conf *config.Configuration) []error {
	var errs []error
	for _, s := range registeredShares() {
		f, ok, err := s.key.Get(conf)
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok:
			if c.Fractions == nil {
				c.Fractions = map[string]float64{}
			}
			if f == 0 {
				f = math.SmallestNonzeroFloat64 // 0 in Config is the default
			}
			c.Fractions[s.name] = f
		}
	}
	return errs
}
