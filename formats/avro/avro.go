// Package avro owns Avro in the Confluent wire format: a registry.Serde
// whose schemas are Avro, encoded and decoded with github.com/twmb/avro
// (chosen over github.com/hamba/avro/v2: it appends to a caller's buffer,
// which codec.Codec.Append is, encoding without allocating, and comes from
// the author of franz-go's pkg/sr; decoding speed is close, see
// formats/avro's benchmarks). Values are Go structs with `avro` field tags,
// or any type twmb/avro maps. Records written with another version of the
// schema are read through Avro schema resolution (writer to reader).
package avro

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/formats/registry"
)

// format is the registry.Format of one Avro reader schema and type T.
type format[T any] struct {
	text  string
	local *avro.Schema
	name  string
	refs  []sr.SchemaReference
}

// New makes a serde of values of type T with the Avro schema schema (JSON
// text) on the registry client c. The options name the subject and say
// whether to register (registry.AutoRegister, registry.UseLatest, ...).
func New[T any](c *registry.Client, schema string, opts ...registry.SerdeOption) (*registry.Serde[T], error) {
	local, err := avro.Parse(schema)
	if err != nil {
		return nil, fmt.Errorf("avro schema: %v: %w", err, registry.ErrInvalidConfig)
	}
	f := &format[T]{text: schema, local: local}
	if root := local.Root(); root.Name != "" {
		f.name = root.Name
		if root.Namespace != "" && !strings.Contains(root.Name, ".") {
			f.name = root.Namespace + "." + root.Name
		}
	}
	// Check once that T and the schema fit, so that a wrong type is a
	// configuration error and not every record's.
	var zero T
	if _, err := local.AppendEncode(nil, &zero); err != nil {
		return nil, fmt.Errorf("avro schema %s cannot encode %T: %v: %w", f.name, zero, err, registry.ErrInvalidConfig)
	}
	return registry.NewSerde[T](c, f, opts...)
}

func (f *format[T]) Schema() sr.Schema {
	return sr.Schema{Schema: f.text, Type: sr.TypeAvro, References: f.refs}
}

func (f *format[T]) RecordName() string { return f.name }

// parse parses a registry schema, its references (named types defined in
// other subjects) first, into one cache.
func parse(ctx context.Context, c *registry.Client, w sr.Schema) (*avro.Schema, error) {
	if len(w.References) == 0 {
		return avro.Parse(w.Schema)
	}
	var cache avro.SchemaCache
	seen := map[string]bool{}
	var add func(s sr.Schema, depth int) error
	add = func(s sr.Schema, depth int) error {
		if depth > 32 {
			return fmt.Errorf("schema references nest deeper than 32")
		}
		for _, ref := range s.References {
			key := fmt.Sprintf("%s/%d", ref.Subject, ref.Version)
			if seen[key] {
				continue
			}
			seen[key] = true
			rs, err := c.SchemaByVersion(ctx, ref.Subject, ref.Version)
			if err != nil {
				return fmt.Errorf("reference %s: %w", ref.Name, err)
			}
			if err := add(rs.Schema, depth+1); err != nil {
				return err
			}
			if _, err := cache.Parse(rs.Schema.Schema); err != nil {
				return fmt.Errorf("reference %s (subject %q version %d): %w", ref.Name, ref.Subject, ref.Version, err)
			}
		}
		return nil
	}
	if err := add(w, 0); err != nil {
		return nil, err
	}
	return cache.Parse(w.Schema)
}

func (f *format[T]) Encoder(w sr.Schema) (registry.EncodeFunc[T], error) {
	s := f.local
	if w.Schema != f.text {
		var err error
		if s, err = avro.Parse(w.Schema); err != nil {
			return nil, fmt.Errorf("%w: the writer schema does not parse: %w", registry.ErrSchemaMismatch, err)
		}
		var zero T
		if _, err := s.AppendEncode(nil, &zero); err != nil {
			return nil, fmt.Errorf("%w: the writer schema cannot encode %T: %w", registry.ErrSchemaMismatch, zero, err)
		}
	}
	return func(dst []byte, v T) ([]byte, error) { return s.AppendEncode(dst, &v) }, nil
}

func (f *format[T]) Decoder(ctx context.Context, c *registry.Client, w sr.Schema) (registry.DecodeFunc[T], error) {
	s := f.local
	if w.Schema != f.text {
		writer, err := parse(ctx, c, w)
		if err != nil {
			return nil, fmt.Errorf("%w: the writer schema does not parse: %w", registry.ErrSchemaMismatch, err)
		}
		if s, err = avro.Resolve(writer, f.local); err != nil {
			return nil, fmt.Errorf("%w: %w", registry.ErrSchemaMismatch, err)
		}
	}
	return func(body []byte) (T, error) {
		var v T
		rest, err := s.Decode(body, &v)
		if err != nil {
			return v, err
		}
		if len(rest) != 0 {
			return v, fmt.Errorf("%d bytes after the value", len(rest))
		}
		return v, nil
	}, nil
}
