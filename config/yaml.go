package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v2"
)

// loadYAML reads YAML in config.yaml's shape into a layer; src gives the
// source of a line (0: the whole input).
func (c *Configuration) loadYAML(layer Layer, data []byte, name string, src func(line int) string) error {
	var root yamlValue
	if err := yaml.UnmarshalStrict(data, &root); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidOption, name, err)
	}
	if root.kind == yamlNull {
		return nil // empty, or comments only
	}
	if root.kind != yamlMap {
		return fmt.Errorf("%w: %s: want a mapping of keys to values at the top", ErrInvalidOption, name)
	}
	var flat []flatValue
	if err := flatten("", &root, &flat); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidOption, name, err)
	}
	lines := yamlKeyLines(data)
	lineOf := func(key string, nth int) int {
		for k := key; k != ""; {
			if ls := lines[k]; len(ls) > 0 {
				return ls[min(nth, len(ls)-1)]
			}
			i := strings.LastIndexByte(k, '.')
			if i < 0 {
				break
			}
			k = k[:i]
		}
		return 0
	}
	// In the order of the lines, for the errors.
	at := make([]int, len(flat))
	nth := map[string]int{}
	for i, f := range flat {
		at[i] = lineOf(f.key, nth[f.key])
		nth[f.key]++
	}
	order := make([]int, len(flat))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return at[i] - at[j] })
	var errs []error
	seen := map[string]entry{} // canonical -> first entry
	for _, i := range order {
		f := flat[i]
		ent := entry{key: f.key, value: f.value, list: f.list, layer: layer, source: src(at[i])}
		canon := f.key
		if cn, ok := lookupCanonical(f.key); ok {
			canon = cn
		}
		if prev, dup := seen[canon]; dup {
			what := "set twice"
			if prev.key != f.key {
				what = "set under its two names, " + prev.key + " and " + f.key
			}
			errs = append(errs, ent.error(fmt.Errorf("%s (first at %s): a key may be given once", what, prev.source)))
			continue
		}
		seen[canon] = ent
		if f.null {
			// Unset; the key must still be one.
			if _, ok := lookupCanonical(f.key); !ok {
				_, err := checkEntry(ent)
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, c.put(ent))
	}
	return errors.Join(errs...)
}

type yamlKind uint8

const (
	yamlNull yamlKind = iota
	yamlScalar
	yamlList
	yamlMap
)

// yamlValue is a YAML node with its scalars as written.
type yamlValue struct {
	kind   yamlKind
	scalar string
	list   []*yamlValue
	m      map[string]*yamlValue
}

func (n *yamlValue) UnmarshalYAML(unmarshal func(any) error) error {
	var probe any
	if err := unmarshal(&probe); err != nil {
		return err
	}
	switch probe.(type) {
	case nil:
		n.kind = yamlNull
	case map[any]any:
		n.kind = yamlMap
		return unmarshal(&n.m)
	case []any:
		n.kind = yamlList
		return unmarshal(&n.list)
	default:
		// A string target takes the scalar as written (010, 1e3, yes).
		n.kind = yamlScalar
		return unmarshal(&n.scalar)
	}
	return nil
}

type flatValue struct {
	key, value string
	list, null bool
}

// flatten appends the leaves of a mapping with their keys joined by
// dots, in key order; a list is its Flink string form "[a, b]".
func flatten(prefix string, n *yamlValue, out *[]flatValue) error {
	keys := make([]string, 0, len(n.m))
	for k := range n.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		full := k
		if prefix != "" {
			full = prefix + "." + k
		}
		v := n.m[k]
		switch {
		case strings.TrimSpace(k) == "":
			return fmt.Errorf("an empty key under %q", prefix)
		case v == nil || v.kind == yamlNull:
			*out = append(*out, flatValue{key: full, null: true})
		case v.kind == yamlMap:
			if err := flatten(full, v, out); err != nil {
				return err
			}
		case v.kind == yamlList:
			items := make([]string, 0, len(v.list))
			for _, it := range v.list {
				if it == nil || it.kind != yamlScalar {
					return fmt.Errorf("%s: a list of scalars is wanted, not of lists, mappings or nulls", full)
				}
				items = append(items, it.scalar)
			}
			*out = append(*out, flatValue{key: full, value: "[" + strings.Join(items, ", ") + "]", list: true})
		default:
			*out = append(*out, flatValue{key: full, value: v.scalar})
		}
	}
	return nil
}

// yamlKeyLines maps the flattened key of every block-style mapping key in
// data to the lines it is on: for error messages only, so it reads
// indentation and "key:" and nothing more.
func yamlKeyLines(data []byte) map[string][]int {
	out := map[string][]int{}
	type frame struct {
		indent int
		key    string
	}
	var stack []frame
	block := -1 // the indentation of the key whose block scalar is being skipped
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		body := strings.TrimLeft(line, " ")
		indent := len(line) - len(body)
		if block >= 0 {
			if body == "" || indent > block {
				continue
			}
			block = -1
		}
		if body == "" || strings.ContainsRune("#-{[&*!|>%@`", rune(body[0])) || strings.HasPrefix(body, "...") {
			continue
		}
		key, rest, ok := yamlLineKey(body)
		if !ok {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, frame{indent, key})
		parts := make([]string, len(stack))
		for i, f := range stack {
			parts[i] = f.key
		}
		full := strings.Join(parts, ".")
		out[full] = append(out[full], n+1)
		if r := strings.TrimSpace(rest); strings.HasPrefix(r, "|") || strings.HasPrefix(r, ">") {
			block = indent
		}
	}
	return out
}

// yamlLineKey splits "key: rest" (the key plain or quoted).
func yamlLineKey(body string) (key, rest string, ok bool) {
	if q := body[0]; q == '"' || q == '\'' {
		var b strings.Builder
		for i := 1; i < len(body); i++ {
			c := body[i]
			switch {
			case q == '\'' && c == '\'' && i+1 < len(body) && body[i+1] == '\'':
				b.WriteByte('\'')
				i++
			case q == '"' && c == '\\' && i+1 < len(body):
				b.WriteByte(body[i+1])
				i++
			case c == q:
				after := body[i+1:]
				if strings.HasPrefix(after, ":") && (len(after) == 1 || after[1] == ' ' || after[1] == '\t') {
					return b.String(), after[1:], true
				}
				return "", "", false
			default:
				b.WriteByte(c)
			}
		}
		return "", "", false
	}
	for i := 0; i < len(body); i++ {
		if body[i] == ':' && (i+1 == len(body) || body[i+1] == ' ' || body[i+1] == '\t') {
			return strings.TrimSpace(body[:i]), body[i+1:], true
		}
		if body[i] == '#' && i > 0 && body[i-1] == ' ' {
			return "", "", false
		}
	}
	return "", "", false
}
