// Package jsonschema owns JSON Schema in the Confluent wire format: a
// registry.Serde whose values are encoded with encoding/json and validated
// against the schema (github.com/santhosh-tekuri/jsonschema/v6, draft
// 2020-12 unless the schema's $schema says otherwise): on encode against
// the writer schema, on decode against the schema the record's id names.
// A value the schema refuses is an encode error (the Kafka sink's
// serializer error policy decides) or, read, a bad record.
package jsonschema

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	js "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/formats/registry"
)

type format[T any] struct {
	text  string
	title string
	local *js.Schema
}

// compile compiles schema text (references among registered schemas are
// given as extra resources by their names).
func compile(text string, refs map[string]string) (*js.Schema, error) {
	c := js.NewCompiler()
	add := func(url, text string) error {
		doc, err := js.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			return err
		}
		return c.AddResource(url, doc)
	}
	const root = "sluice:///schema.json"
	if err := add(root, text); err != nil {
		return nil, err
	}
	for name, t := range refs {
		if err := add(name, t); err != nil {
			return nil, fmt.Errorf("reference %s: %w", name, err)
		}
	}
	return c.Compile(root)
}

// New makes a serde of values of type T (encoded by encoding/json) with
// the JSON Schema schema on the registry client c. The schema's "title"
// is its record name (RecordNameStrategy).
func New[T any](c *registry.Client, schema string, opts ...registry.SerdeOption) (*registry.Serde[T], error) {
	local, err := compile(schema, nil)
	if err != nil {
		return nil, fmt.Errorf("json schema: %v: %w", err, registry.ErrInvalidConfig)
	}
	var head struct {
		Title string `json:"title"`
	}
	_ = json.Unmarshal([]byte(schema), &head)
	return registry.NewSerde[T](c, &format[T]{text: schema, title: head.Title, local: local}, opts...)
}

func (f *format[T]) Schema() sr.Schema { return sr.Schema{Schema: f.text, Type: sr.TypeJSON} }

func (f *format[T]) RecordName() string { return f.title }

// validate checks the JSON document b against s.
func validate(s *js.Schema, b []byte) error {
	doc, err := js.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("invalid against the schema: %w", err)
	}
	return nil
}

// writerSchema compiles w with its references (fetched from c).
func writerSchema(ctx context.Context, c *registry.Client, w sr.Schema) (*js.Schema, error) {
	refs := map[string]string{}
	for _, ref := range w.References {
		rs, err := c.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return nil, fmt.Errorf("reference %s: %w", ref.Name, err)
		}
		refs[ref.Name] = rs.Schema.Schema
	}
	return compile(w.Schema, refs)
}

func (f *format[T]) Encoder(w sr.Schema) (registry.EncodeFunc[T], error) {
	s := f.local
	if w.Schema != f.text {
		var err error
		if s, err = compile(w.Schema, nil); err != nil {
			return nil, fmt.Errorf("%w: the writer schema does not compile: %w", registry.ErrSchemaMismatch, err)
		}
	}
	return func(dst []byte, v T) ([]byte, error) {
		n := len(dst)
		buf := bytes.NewBuffer(dst)
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return dst, err
		}
		out := buf.Bytes()
		out = out[:len(out)-1] // Encode's newline
		if err := validate(s, out[n:]); err != nil {
			return dst[:n], err
		}
		return out, nil
	}, nil
}

func (f *format[T]) Decoder(ctx context.Context, c *registry.Client, w sr.Schema) (registry.DecodeFunc[T], error) {
	s := f.local
	if w.Schema != f.text {
		var err error
		if s, err = writerSchema(ctx, c, w); err != nil {
			return nil, fmt.Errorf("%w: the writer schema does not compile: %w", registry.ErrSchemaMismatch, err)
		}
	}
	return func(body []byte) (T, error) {
		var v T
		if err := validate(s, body); err != nil {
			return v, err
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return v, err
		}
		return v, nil
	}, nil
}
