// Package codec owns the encoding of typed values to bytes and back: the
// Codec interface that every network edge, keyed state and checkpoint uses,
// and the built-in codecs for []byte, string, the integer types and JSON.
package codec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
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
// string, Int for the integer kinds, JSON for everything else.
func Default[T any]() Codec[T] {
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
	if cc, ok := c.(Codec[T]); ok {
		return cc
	}
	return JSON[T]{}
}
