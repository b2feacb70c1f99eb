package state

import (
	"reflect"
	"time"

	"github.com/sluicehq/sluice/codec"
)

// deepCopier returns how the heap backend copies a value of T that a
// snapshot may be reading, or nil when a plain Go assignment is a copy
// (numbers, strings, and arrays and structs of them). Values that hold
// references are copied through c, the codec the snapshot writes them
// with: what survives a checkpoint is what the copy keeps. A value the
// codec cannot encode is returned as it is; the snapshot's own encode
// reports that error.
func deepCopier[T any](c codec.Codec[T]) func(T) T {
	if c == nil || !holdsReferences(reflect.TypeFor[T](), map[reflect.Type]bool{}) {
		return nil
	}
	return func(v T) T {
		b, err := c.Append(nil, v)
		if err != nil {
			return v
		}
		out, err := c.Decode(b)
		if err != nil {
			return v
		}
		return out
	}
}

// holdsReferences reports whether a value of t can share memory with a
// copy made by assignment. seen breaks cycles through named types.
func holdsReferences(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == nil {
		return true // an interface type's dynamic value
	}
	if t == reflect.TypeFor[time.Time]() {
		return false // its *Location is never changed
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return false
	case reflect.Array:
		return t.Len() > 0 && holdsReferences(t.Elem(), seen)
	case reflect.Struct:
		if seen[t] {
			return false
		}
		seen[t] = true
		for i := range t.NumField() {
			if holdsReferences(t.Field(i).Type, seen) {
				return true
			}
		}
		return false
	default: // pointers, slices, maps, interfaces, channels, functions
		return true
	}
}
