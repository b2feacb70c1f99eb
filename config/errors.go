package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidOption is matched by every *Error: a refused key or value
// (the root package's sluice.ErrInvalidOption is this error).
var ErrInvalidOption = errors.New("invalid option")

// ErrUnknownKey is matched by the error of a key no linked package
// declares.
var ErrUnknownKey = errors.New("unknown configuration key")

// Error is a refused configuration key: an unknown one, or one whose
// value does not parse or cannot work. It matches ErrInvalidOption and
// Err.
type Error struct {
	// Key as written.
	Key string
	// Value, or ****** for keys that hold secrets.
	Value string
	// Source is where the value came from: "conf/config.yaml:12",
	// "$SLUICE_CONF_PARALLELISM_DEFAULT", "$SLUICE_PROPERTIES line 2",
	// "-D", "Set"; empty for a key that is missing.
	Source string
	Err    error
	set    bool // Value was given
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source + ": ")
	}
	b.WriteString(e.Key)
	if e.set {
		fmt.Fprintf(&b, " = %q", e.Value)
	}
	return b.String() + ": " + e.Err.Error()
}

// Unwrap returns ErrInvalidOption and the cause.
func (e *Error) Unwrap() []error { return []error{ErrInvalidOption, e.Err} }

// Sensitive reports whether a key's value is a secret, shown as ******:
// a key declared Sensitive, or one whose name says so (Flink's
// GlobalConfiguration.SENSITIVE_KEYS: password, secret, token,
// jaas.config, ..., and private keys).
func Sensitive(key string) bool {
	if k := lookup(key); k != nil && k.sensitive {
		return true
	}
	return sensitiveName(key)
}

func sensitiveName(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"password", "secret", "fs.azure.account.key", "apikey", "api-key", "auth-params",
		"service-key", "token", "basic-auth", "jaas.config", "http-headers", "ssl.keystore.key"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// mask is a value as errors and String show it.
func mask(key, value string) string {
	if Sensitive(key) {
		return "******"
	}
	return value
}

func (ent entry) error(err error) *Error {
	return &Error{Key: ent.key, Value: mask(ent.key, ent.value), Source: ent.source, Err: err, set: true}
}

// unknownKey is the error of a key no linked package declares, with the
// nearest declared key when one is close, or the package that declares
// keys like it when the program does not import it.
func unknownKey(key string) error {
	if h := hintFor(key); h != "" {
		return fmt.Errorf("%w (%s)", ErrUnknownKey, h)
	}
	if near := nearestKey(key); near != "" {
		return fmt.Errorf("%w (did you mean %s?)", ErrUnknownKey, near)
	}
	return ErrUnknownKey
}

// nearestKey is the declared key closest to an unknown one, when it is
// close.
func nearestKey(key string) string {
	best, bestD := "", len(key)/3+2
	for _, k := range names() {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
