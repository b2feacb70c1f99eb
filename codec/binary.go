package codec

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// TagCBOR is the first byte of every value the Binary codec writes: the
// version tag of its format (CBOR, RFC 8949, as configured below). It is
// never the first byte of JSON (which starts with '{', '[', '"', '-', a
// digit, 't', 'f' or 'n'), so Binary.Decode tells a value the JSON default
// of earlier versions wrote from its own; another leading byte is refused.
const TagCBOR byte = 0x01

// ErrUnknownFormat is returned (wrapped) when Binary decodes bytes that
// neither start with TagCBOR nor look like JSON.
var ErrUnknownFormat = errors.New("codec: unknown format byte")

// Binary is the default codec of struct and other composite types: CBOR
// (github.com/fxamacker/cbor/v2) behind the TagCBOR byte. It follows
// encoding/json's rules for what is encoded, so that a type behaves as it
// did under the JSON default: exported fields only, field names from the
// `json` tag (a `cbor` tag wins where both are given), "-" and omitempty
// as encoding/json, embedded structs flattened, unknown fields ignored and
// missing ones left zero on decode (structs are encoded as maps keyed by
// field name, so adding or removing a field keeps old values readable).
// time.Time is encoded as RFC 3339 text with nanoseconds, as JSON does, so
// it decodes to the same instant and offset. The encoding is deterministic:
// map keys are sorted (RFC 8949 core deterministic order), so equal values
// give equal bytes and Binary may encode keys.
//
// Differences from JSON: []byte is a byte string (not base64); strings are
// kept byte for byte (invalid UTF-8 is not replaced); NaN and infinities
// encode (JSON refuses them); maps with non-string keys of any comparable
// type encode. Default does not pick Binary for a type that reaches an
// interface or a type with its own JSON or text encoding (MarshalJSON,
// MarshalText and their Unmarshal counterparts, other than time.Time):
// those keep JSON, whose behaviour they rely on.
//
// Decode also reads JSON (what the default codec wrote before Binary), so
// state and in-flight data written under the JSON default restore.
type Binary[T any] struct{}

var (
	cborEnc cbor.UserBufferEncMode
	cborDec cbor.DecMode
	encBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

func init() {
	var err error
	cborEnc, err = cbor.EncOptions{
		Sort:            cbor.SortBytewiseLexical,
		Time:            cbor.TimeRFC3339Nano,
		TimeTag:         cbor.EncTagNone,
		OmitEmpty:       cbor.OmitEmptyGoValue,
		BinaryMarshaler: cbor.BinaryMarshalerNone,
	}.UserBufferEncMode()
	if err != nil {
		panic(fmt.Sprintf("codec: CBOR encoding options: %v", err))
	}
	cborDec, err = cbor.DecOptions{
		// State values can be large: the limits are the library's
		// maxima (JSON has none), not its defaults meant for untrusted
		// network input.
		MaxNestedLevels:   65535,
		MaxArrayElements:  2147483647,
		MaxMapPairs:       2147483647,
		UTF8:              cbor.UTF8DecodeInvalid,
		BinaryUnmarshaler: cbor.BinaryUnmarshalerNone,
	}.DecMode()
	if err != nil {
		panic(fmt.Sprintf("codec: CBOR decoding options: %v", err))
	}
}

// Append implements Codec.
func (Binary[T]) Append(dst []byte, v T) ([]byte, error) {
	buf := encBufs.Get().(*bytes.Buffer)
	buf.Reset()
	err := cborEnc.MarshalToBuffer(&v, buf)
	if err == nil {
		dst = append(append(dst, TagCBOR), buf.Bytes()...)
	}
	if buf.Cap() <= 64<<10 {
		encBufs.Put(buf)
	}
	if err != nil {
		return dst, fmt.Errorf("binary encode %T: %w", v, err)
	}
	return dst, nil
}

// Decode implements Codec. Bytes that start with TagCBOR are CBOR;
// bytes that start as JSON does are decoded as JSON.
func (Binary[T]) Decode(src []byte) (T, error) {
	var v T
	if len(src) == 0 {
		return v, fmt.Errorf("binary decode into %T: empty input: %w", v, ErrShortInput)
	}
	switch src[0] {
	case TagCBOR:
		if err := cborDec.Unmarshal(src[1:], &v); err != nil {
			return v, fmt.Errorf("binary decode into %T: %w", v, err)
		}
		return v, nil
	case '{', '[', '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 't', 'f', 'n', ' ', '\t', '\r', '\n':
		return JSON[T]{}.Decode(src)
	}
	return v, fmt.Errorf("binary decode into %T: first byte %#x: %w", v, src[0], ErrUnknownFormat)
}

var (
	jsonOnlyTypes sync.Map // reflect.Type -> bool
	timeType      = reflect.TypeFor[time.Time]()
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	jsonUnmarsh   = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarsh   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// keepsJSON reports whether values of t must stay with the JSON codec
// because Binary would not treat them as encoding/json does: t reaches an
// interface (JSON decodes its dynamic value into float64, map[string]any
// and so on), a type with its own JSON or text encoding other than
// time.Time, or a kind JSON refuses (channels, functions, complex numbers).
func keepsJSON(t reflect.Type) bool {
	if v, ok := jsonOnlyTypes.Load(t); ok {
		return v.(bool)
	}
	v := reachesJSONOnly(t, map[reflect.Type]bool{})
	jsonOnlyTypes.Store(t, v)
	return v
}

func reachesJSONOnly(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == timeType {
		return false
	}
	if seen[t] {
		return false // a recursive type: decided where it started
	}
	seen[t] = true
	pt := reflect.PointerTo(t)
	for _, i := range []reflect.Type{jsonMarshaler, textMarshaler} {
		if t.Implements(i) || pt.Implements(i) {
			return true
		}
	}
	for _, i := range []reflect.Type{jsonUnmarsh, textUnmarsh} {
		if pt.Implements(i) {
			return true
		}
	}
	switch t.Kind() {
	case reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return reachesJSONOnly(t.Elem(), seen)
	case reflect.Map:
		return reachesJSONOnly(t.Key(), seen) || reachesJSONOnly(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if (!f.IsExported() && !f.Anonymous) || f.Tag.Get("json") == "-" {
				continue
			}
			if reachesJSONOnly(f.Type, seen) {
				return true
			}
		}
	}
	return false
}
