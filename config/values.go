package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The parsers of the kinds of values, one each, in Flink's syntax. Every
// key of a kind parses its values with its kind's parser; a package that
// takes values of a kind outside a Configuration (a Set method, a flag)
// uses the same one.

// durationUnits are the units of Flink's TimeUtils, and Go's "µs".
var durationUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "nano": time.Nanosecond, "nanos": time.Nanosecond, "nanosecond": time.Nanosecond, "nanoseconds": time.Nanosecond,
	"us": time.Microsecond, "µs": time.Microsecond, "micro": time.Microsecond, "micros": time.Microsecond,
	"microsecond": time.Microsecond, "microseconds": time.Microsecond,
	"ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

var errDuration = errors.New(`want a duration: a number with an optional unit (ns, us, ms, s, min, h, d; none is milliseconds), e.g. "10 s", "1.5 s", "1 min", "500"`)

// ParseDuration parses a duration as Flink's TimeUtils does: a number and
// an optional unit, with or without a space ("10 s", "500ms", "1min",
// "1 d"); a number alone is milliseconds. The number may have a fraction
// ("1.5 s"), rounded to the nanosecond. The units are ns, us (µs), ms,
// s, m/min, h and d, with Flink's long forms (millis, seconds, minutes,
// days, ...), in any case. Go's syntax ("1m30s") is accepted too. A
// negative duration, and one past about 292 years, is refused.
func ParseDuration(v string) (time.Duration, error) {
	s := strings.TrimSpace(v)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	mult, known := durationUnits[unit]
	if unit == "" {
		mult, known = time.Millisecond, true
	}
	if !known || num == "" {
		// Go's syntax: 1m30s.
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return 0, errDuration
		case d < 0:
			return 0, errors.New("a duration must not be negative")
		}
		return d, nil
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok || strings.HasPrefix(num, ".") || strings.HasSuffix(num, ".") {
		return 0, errDuration
	}
	r.Mul(r, new(big.Rat).SetInt64(int64(mult)))
	// Rounded to the nanosecond: (2 num + den) / (2 den).
	two := big.NewInt(2)
	n := new(big.Int).Mul(r.Num(), two)
	n.Add(n, r.Denom()).Quo(n, new(big.Int).Mul(r.Denom(), two))
	if !n.IsInt64() {
		return 0, errors.New("the duration overflows (at most about 292 years)")
	}
	return time.Duration(n.Int64()), nil
}

// FormatDuration writes a duration in the form ParseDuration reads, with
// the largest unit that keeps it whole: "10 s", "1 min", "250 ms".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0 ms"
	}
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"min", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}} {
		if d%u.d == 0 {
			return fmt.Sprintf("%d %s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%d ns", int64(d))
}

// ParseMemorySize parses a memory size as Flink's MemorySize: a whole
// number and an optional unit, with or without a space (b/bytes,
// k/kb/kibibytes, m/mb/mebibytes, g/gb/gibibytes, t/tb/tebibytes; binary
// multiples, any case): "64mb", "8 mb", "1g", "4096" (bytes).
func ParseMemorySize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("memory size %q: want a non-negative number with an optional unit (b, kb, mb, gb, tb)", s)
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
		return 0, fmt.Errorf("memory size %q: unknown unit %q (want b, kb, mb, gb or tb)", s, unit)
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("memory size %q overflows", s)
	}
	return n << shift, nil
}

// FormatMemorySize writes a size in the form ParseMemorySize reads, with
// the largest unit that keeps it whole: "32kb", "1gb", "100b".
func FormatMemorySize(n int64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"tb", 40}, {"gb", 30}, {"mb", 20}, {"kb", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%db", n)
}

// ParseBool parses true or false, in any case, as Flink does.
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("want true or false")
}

// ParseInt parses a whole number.
func ParseInt(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, errors.New("want an integer")
	}
	return n, nil
}

// ParseFloat parses a number, not NaN.
func ParseFloat(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) {
		return 0, errors.New("want a number")
	}
	return f, nil
}

// ParseString takes the value with the space around it trimmed.
func ParseString(v string) (string, error) { return strings.TrimSpace(v), nil }

// ParseList splits a list value: Flink's "[a, b]" (a YAML list in a
// file), or "a;b" and "a,b"; quotes around an item are removed, empty
// items dropped.
func ParseList(v string) ([]string, error) {
	s := strings.TrimSpace(v)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	var items []string
	for _, it := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		it = strings.TrimSpace(it)
		if len(it) >= 2 && (it[0] == '"' || it[0] == '\'') && it[len(it)-1] == it[0] {
			it = it[1 : len(it)-1]
		}
		if it != "" {
			items = append(items, it)
		}
	}
	return items, nil
}

// normalizeEnum is how enumeration values compare: in upper case, '-' as
// '_' (EXACTLY_ONCE, exactly-once).
func normalizeEnum(v string) string {
	return strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(v), "-", "_"))
}

// ParseChoice returns the one of values v names, compared in any case
// and with '-' as '_'; an error lists them.
func ParseChoice(v string, values ...string) (string, error) {
	n := normalizeEnum(v)
	for _, c := range values {
		if normalizeEnum(c) == n {
			return c, nil
		}
	}
	return "", fmt.Errorf("want %s", orList(values))
}

// orList writes "a, b or c".
func orList(values []string) string {
	switch len(values) {
	case 0:
		return "nothing"
	case 1:
		return values[0]
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}
