package registry

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrUnknownSchema: the registry does not know the schema id a record
	// carries (it answered "schema not found").
	ErrUnknownSchema = errors.New("schema registry: unknown schema id")
	// ErrNotRegistered: with auto-registration off, the serde's schema is not
	// registered under its subject (or the subject has no version at all).
	ErrNotRegistered = errors.New("schema registry: schema not registered under the subject")
	// ErrBadWireFormat: the bytes do not start with the Confluent header
	// (magic byte 0 and a 4-byte schema id), or the Protobuf message
	// indexes after it are malformed.
	ErrBadWireFormat = errors.New("schema registry: not in the Confluent wire format")
	// ErrSchemaMismatch: the record's writer schema cannot be read as the
	// serde's type (another record type, another schema type, or an
	// incompatible change).
	ErrSchemaMismatch = errors.New("schema registry: writer schema does not match the reader")
	// ErrRegistry: the registry could not be reached or answered with an
	// error other than "not found" until the lookup timeout passed.
	ErrRegistry = errors.New("schema registry: request failed")
	// ErrEncode and ErrDecode wrap a format's failure to encode a value or
	// decode a body (invalid against the schema, malformed bytes).
	ErrEncode = errors.New("schema registry: encode failed")
	ErrDecode = errors.New("schema registry: decode failed")
	// ErrInvalidConfig: an option or argument the constructor refuses.
	ErrInvalidConfig = errors.New("schema registry: invalid configuration")
)

// SchemaError is the error of every serde operation that concerns one
// schema: it names the subject, version and schema id that are known
// (0 and "" when not), and unwraps to one of the sentinels above and the
// cause.
type SchemaError struct {
	Op      string // "encode", "decode", "register", "look up", ...
	Subject string
	Version int
	ID      int
	Err     error
}

func (e *SchemaError) Error() string {
	var b strings.Builder
	b.WriteString("schema registry: ")
	b.WriteString(e.Op)
	var parts []string
	if e.Subject != "" {
		parts = append(parts, fmt.Sprintf("subject %q", e.Subject))
	}
	if e.Version > 0 {
		parts = append(parts, fmt.Sprintf("version %d", e.Version))
	}
	if e.ID > 0 || e.Op == "decode" {
		parts = append(parts, fmt.Sprintf("schema id %d", e.ID))
	}
	if len(parts) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(parts, ", "))
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *SchemaError) Unwrap() error { return e.Err }

// Temporary reports whether the failure is the registry's (ErrRegistry:
// unreachable, or answering with server errors) rather than the record's
// or the configuration's. The Kafka source fails on a temporary decoder
// error whatever its bad-record policy, so that the job's restart reads
// the record again instead of skipping it.
func (e *SchemaError) Temporary() bool { return errors.Is(e.Err, ErrRegistry) }
