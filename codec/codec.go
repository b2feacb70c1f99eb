// Package codec turns typed values into bytes and back. A Kafka source
// decodes and a Kafka sink encodes with a codec (codec.JSON[Order]{} for
// a topic of JSON, codec.String{}, codec.Bytes{}, codec.Int[int64]{}, a
// Schema Registry serde of formats/avro, formats/protobuf or
// formats/jsonschema, or your own Codec); keyed state, window contents
// and records between subtasks use codec.Default when given none: the
// built-in codecs for []byte, string and integers, and Binary (CBOR
// behind a format byte, honouring `json` tags) for composite types.
// Example shows both; docs/state.md says what a changed struct restores.
//
// The package owns the Codec interface that every network edge, keyed
// state and checkpoint uses, and the built-in codecs.
package codec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// ErrShortInput is returned (wrapped) when a fixed-size value is decoded
// from fewer bytes than it needs.
var ErrShortInput = errors.New("codec: input too short")

// Codec encodes values of type T to bytes and decodes them back.
//
// Append appends the encoding of v to dst and returns the extended slice; it
// must not retain dst. Decode decodes one value from exactly the bytes in
// src; it must not retain src (the bytes belong to a network buffer that is
// reused), so codecs of reference types copy what they keep.
type Codec[T any] interface {
	Append(dst []byte, v T) ([]byte, error)
	Decode(src []byte) (T, error)
}

// Bytes is the codec for []byte. Decode returns a copy of its input.
type Bytes struct{}

func (Bytes) Append(dst []byte, v []byte) ([]byte, error) { return append(dst, v...), nil }
func (Bytes) Decode(src []byte) ([]byte, error) {
	out := make([]byte, len(src))
	copy(out, src)
	return out, nil
}

// String is the codec for string (UTF-8 bytes, no length prefix).
type String struct{}

func (String) Append(dst []byte, v string) ([]byte, error) { return append(dst, v...), nil }
func (String) Decode(src []byte) (string, error)           { return string(src), nil }

// Integer is the set of integer types that the Int codec handles.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

// Int is the codec for integer types: eight bytes, big endian, so that the
// byte order of non-negative values is their numeric order.
type Int[T Integer] struct{}

func (Int[T]) Append(dst []byte, v T) ([]byte, error) {
	return binary.BigEndian.AppendUint64(dst, uint64(v)), nil
}

func (Int[T]) Decode(src []byte) (T, error) {
	if len(src) != 8 {
		return 0, fmt.Errorf("integer needs 8 bytes, got %d: %w", len(src), ErrShortInput)
	}
	return T(binary.BigEndian.Uint64(src)), nil
}

// JSON is the codec for any type encoding/json can handle.
type JSON[T any] struct{}

func (JSON[T]) Append(dst []byte, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("json encode %T: %w", v, err)
	}
	return append(dst, b...), nil
}

func (JSON[T]) Decode(src []byte) (T, error) {
	var v T
	if err := json.Unmarshal(src, &v); err != nil {
		return v, fmt.Errorf("json decode into %T: %w", v, err)
	}
	return v, nil
}

// Default returns the built-in codec for T: Bytes for []byte, String for
// string, Int for the integer kinds, Binary for everything else, except
// types Binary would not treat as encoding/json does (a type that reaches
// an interface, or has its own MarshalJSON, MarshalText or their Unmarshal
// counterparts, other than time.Time), which keep JSON. Before Binary,
// JSON was the default of every composite type; Binary reads what it
// wrote.
func Default[T any]() Codec[T] { return DefaultFor[T](FormatBinary) }

// DefaultFor is Default with the format of composite types given:
// FormatJSON gives JSON where Default gives Binary.
func DefaultFor[T any](f Format) Codec[T] {
	if c, ok := builtin[T](); ok {
		return c
	}
	if f == FormatJSON || keepsJSON(reflect.TypeFor[T]()) {
		return JSON[T]{}
	}
	return Binary[T]{}
}

// DefaultKey returns the codec of keys when none is given (the key of a
// keyed stream, the user key of a map state): the built-in codecs as
// Default, JSON for other types. A key's bytes are its identity: they are
// hashed to its key group and looked up in the state backend, so they
// stay those of earlier versions (where JSON was the default) for the
// state of their savepoints to be found. JSON is deterministic for keys:
// struct fields in declaration order, map keys sorted. Binary is
// deterministic too; give it (KeyByCodec, MapStateDescriptor.KeyCodec) in
// a job without such savepoints to encode composite keys faster.
func DefaultKey[T any]() Codec[T] {
	if c, ok := builtin[T](); ok {
		return c
	}
	return JSON[T]{}
}

// Format selects the encoding of composite types in DefaultFor.
type Format uint8

const (
	// FormatBinary is Binary (CBOR with a format byte), the default.
	FormatBinary Format = iota
	// FormatJSON is JSON, the default of earlier versions.
	FormatJSON
)

// ErrUnknownFormatName is returned (wrapped) by ParseFormat.
var ErrUnknownFormatName = errors.New("codec: unknown format")

// ParseFormat parses "binary" or "json" (any case).
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "binary":
		return FormatBinary, nil
	case "json":
		return FormatJSON, nil
	}
	return 0, fmt.Errorf("%q: want binary or json: %w", s, ErrUnknownFormatName)
}

func (f Format) String() string {
	switch f {
	case FormatBinary:
		return "binary"
	case FormatJSON:
		return "json"
	}
	return fmt.Sprintf("format(%d)", uint8(f))
}

func builtin[T any]() (Codec[T], bool) {
	var zero T
	var c any
	switch any(zero).(type) {
	case []byte:
		c = Bytes{}
	case string:
		c = String{}
	case int:
		c = Int[int]{}
	case int8:
		c = Int[int8]{}
	case int16:
		c = Int[int16]{}
	case int32:
		c = Int[int32]{}
	case int64:
		c = Int[int64]{}
	case uint:
		c = Int[uint]{}
	case uint8:
		c = Int[uint8]{}
	case uint16:
		c = Int[uint16]{}
	case uint32:
		c = Int[uint32]{}
	case uint64:
		c = Int[uint64]{}
	}
	cc, ok := c.(Codec[T])
	return cc, ok
}
