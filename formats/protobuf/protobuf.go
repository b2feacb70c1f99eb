// Package protobuf owns Protobuf in the Confluent wire format: a
// registry.Serde of proto.Message values, generated (*pb.Order) or dynamic
// (*dynamicpb.Message on a descriptor built at run time). The schema
// registered is the message's .proto file printed from its descriptor
// (github.com/jhump/protoreflect/v2/protoprint), its imports registered
// first as schema references under their paths; the header carries the
// message indexes (the message's path in its file) after the schema id.
// Records are read into the serde's message type; the writer's schema is
// parsed (github.com/bufbuild/protocompile, references fetched from the
// registry) only to check that the index names a message of the same full
// name, so another message type in the topic is a bad record
// (registry.ErrSchemaMismatch) rather than garbage.
package protobuf

import (
	"context"
	"fmt"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/jhump/protoreflect/v2/protoprint"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicehq/sluice/formats/registry"
)

type format[T proto.Message] struct {
	newMsg  func() T
	md      protoreflect.MessageDescriptor
	text    string
	indexes []int
	local   protoreflect.FileDescriptor
}

// New makes a serde of the message type newMessage makes, e.g.
// func() *pb.Order { return new(pb.Order) } for a generated message, on the
// registry client c. The files the message's file imports are
// registered as schema references under their import paths (the
// well-known types, google/protobuf/*.proto, need none).
func New[T proto.Message](c *registry.Client, newMessage func() T, opts ...registry.SerdeOption) (*registry.Serde[T], error) {
	if newMessage == nil {
		return nil, fmt.Errorf("protobuf: nil message constructor: %w", registry.ErrInvalidConfig)
	}
	md := newMessage().ProtoReflect().Descriptor()
	fd := md.ParentFile()
	if fd == nil {
		return nil, fmt.Errorf("protobuf: message %s has no file descriptor: %w", md.FullName(), registry.ErrInvalidConfig)
	}
	text, err := printFile(fd)
	if err != nil {
		return nil, err
	}
	f := &format[T]{newMsg: newMessage, md: md, text: text, indexes: indexesOf(md), local: fd}
	return registry.NewSerde[T](c, f, opts...)
}

// printFile is fd as .proto text, the schema the registry keeps.
func printFile(fd protoreflect.FileDescriptor) (string, error) {
	var printer protoprint.Printer
	text, err := printer.PrintProtoToString(fd)
	if err != nil {
		return "", fmt.Errorf("protobuf: printing %s: %v: %w", fd.Path(), err, registry.ErrInvalidConfig)
	}
	return text, nil
}

// wellKnown says whether an import is one of the well-known types, which
// registries know without references.
func wellKnown(path string) bool { return strings.HasPrefix(path, "google/protobuf/") }

// References registers (or looks up) every file the message's file
// imports, other than the well-known types, each under the subject named
// by its import path (Confluent's default reference subject names),
// depth first, and returns the direct imports as references.
func (f *format[T]) References(ctx context.Context, c *registry.Client, register bool) ([]sr.SchemaReference, error) {
	return importRefs(ctx, c, f.local, register, 0)
}

func importRefs(ctx context.Context, c *registry.Client, fd protoreflect.FileDescriptor, register bool, depth int) ([]sr.SchemaReference, error) {
	if depth > 32 {
		return nil, fmt.Errorf("imports of %s nest deeper than 32", fd.Path())
	}
	var refs []sr.SchemaReference
	for i := range fd.Imports().Len() {
		imp := fd.Imports().Get(i).FileDescriptor
		if wellKnown(imp.Path()) {
			continue
		}
		sub, err := importRefs(ctx, c, imp, register, depth+1)
		if err != nil {
			return nil, err
		}
		text, err := printFile(imp)
		if err != nil {
			return nil, err
		}
		schema := sr.Schema{Schema: text, Type: sr.TypeProtobuf, References: sub}
		var ss sr.SubjectSchema
		if register {
			ss, err = c.Register(ctx, imp.Path(), schema)
		} else {
			ss, err = c.Lookup(ctx, imp.Path(), schema)
		}
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", imp.Path(), err)
		}
		refs = append(refs, sr.SchemaReference{Name: imp.Path(), Subject: imp.Path(), Version: ss.Version})
	}
	return refs, nil
}

// NewDynamic makes a serde of dynamic messages of descriptor md.
func NewDynamic(c *registry.Client, md protoreflect.MessageDescriptor, opts ...registry.SerdeOption) (*registry.Serde[*dynamicpb.Message], error) {
	if md == nil {
		return nil, fmt.Errorf("protobuf: nil message descriptor: %w", registry.ErrInvalidConfig)
	}
	return New(c, func() *dynamicpb.Message { return dynamicpb.NewMessage(md) }, opts...)
}

// indexesOf is the path of md in its file: top-level index first.
func indexesOf(md protoreflect.MessageDescriptor) []int {
	var rev []int
	for d := protoreflect.Descriptor(md); ; {
		m, ok := d.(protoreflect.MessageDescriptor)
		if !ok {
			break
		}
		rev = append(rev, m.Index())
		d = m.Parent()
	}
	out := make([]int, len(rev))
	for i, v := range rev {
		out[len(rev)-1-i] = v
	}
	return out
}

// messageAt is the message at path indexes in fd, or nil.
func messageAt(fd protoreflect.FileDescriptor, indexes []int) protoreflect.MessageDescriptor {
	var m protoreflect.MessageDescriptor
	msgs := fd.Messages()
	for _, i := range indexes {
		if i >= msgs.Len() {
			return nil
		}
		m = msgs.Get(i)
		msgs = m.Messages()
	}
	return m
}

func (f *format[T]) Schema() sr.Schema { return sr.Schema{Schema: f.text, Type: sr.TypeProtobuf} }

func (f *format[T]) RecordName() string { return string(f.md.FullName()) }

func (f *format[T]) Encoder(w sr.Schema) (registry.EncodeFunc[T], error) {
	indexes := f.indexes
	if w.Schema != f.text {
		// UseLatest: write the latest version's index of our message.
		fd, err := parse(context.Background(), nil, w)
		if err != nil {
			return nil, fmt.Errorf("%w: the writer schema does not parse: %w", registry.ErrSchemaMismatch, err)
		}
		m := fd.Messages().ByName(f.md.Name())
		if m == nil || m.FullName() != f.md.FullName() {
			return nil, fmt.Errorf("%w: the writer schema has no top-level message %s", registry.ErrSchemaMismatch, f.md.FullName())
		}
		indexes = indexesOf(m)
	}
	var opts proto.MarshalOptions
	return func(dst []byte, v T) ([]byte, error) {
		return opts.MarshalAppend(registry.AppendIndexes(dst, indexes), v)
	}, nil
}

// parse compiles a registry schema, with its references (fetched from c)
// and the well-known types as imports.
func parse(ctx context.Context, c *registry.Client, w sr.Schema) (protoreflect.FileDescriptor, error) {
	const root = "sluice-writer-schema.proto"
	srcs := map[string]string{root: w.Schema}
	if len(w.References) > 0 && c == nil {
		return nil, fmt.Errorf("schema references without a registry client")
	}
	var add func(s sr.Schema, depth int) error
	add = func(s sr.Schema, depth int) error {
		if depth > 32 {
			return fmt.Errorf("schema references nest deeper than 32")
		}
		for _, ref := range s.References {
			if _, ok := srcs[ref.Name]; ok {
				continue
			}
			rs, err := c.SchemaByVersion(ctx, ref.Subject, ref.Version)
			if err != nil {
				return fmt.Errorf("reference %s: %w", ref.Name, err)
			}
			srcs[ref.Name] = rs.Schema.Schema
			if err := add(rs.Schema, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(w, 0); err != nil {
		return nil, err
	}
	comp := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(srcs),
	})}
	files, err := comp.Compile(ctx, root)
	if err != nil {
		return nil, err
	}
	return files[0], nil
}

func (f *format[T]) Decoder(ctx context.Context, c *registry.Client, w sr.Schema) (registry.DecodeFunc[T], error) {
	fd := f.local
	if w.Schema != f.text {
		var err error
		if fd, err = parse(ctx, c, w); err != nil {
			return nil, fmt.Errorf("%w: the writer schema does not parse: %w", registry.ErrSchemaMismatch, err)
		}
	}
	want := f.md.FullName()
	return func(body []byte) (T, error) {
		var zero T
		indexes, rest, err := registry.ReadIndexes(body)
		if err != nil {
			return zero, err
		}
		m := messageAt(fd, indexes)
		if m == nil {
			return zero, fmt.Errorf("%w: message indexes %v name no message of the writer schema", registry.ErrSchemaMismatch, indexes)
		}
		if m.FullName() != want {
			return zero, fmt.Errorf("%w: the record is a %s, the serde reads %s", registry.ErrSchemaMismatch, m.FullName(), want)
		}
		v := f.newMsg()
		if err := proto.Unmarshal(rest, v); err != nil {
			return zero, err
		}
		return v, nil
	}, nil
}
