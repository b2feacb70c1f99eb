package protobuf_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/formats/protobuf"
	"github.com/sluicehq/sluice/formats/registry"
)

// testFile is shop.proto: message Order {int64 id = 1; string customer = 2;
// double amount = 3;} and message Refund {int64 order_id = 1;}.
func testFile(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	field := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String(name)}
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name: proto.String("shop.proto"), Package: proto.String("shop"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Order"), Field: []*descriptorpb.FieldDescriptorProto{
				field("id", 1, descriptorpb.FieldDescriptorProto_TYPE_INT64),
				field("customer", 2, descriptorpb.FieldDescriptorProto_TYPE_STRING),
				field("amount", 3, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE),
			}},
			{Name: proto.String("Refund"), Field: []*descriptorpb.FieldDescriptorProto{
				field("order_id", 1, descriptorpb.FieldDescriptorProto_TYPE_INT64),
			}},
		},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func newClient(t *testing.T) (*srfake.Registry, *registry.Client) {
	t.Helper()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	c, err := registry.NewClient(reg.URL())
	if err != nil {
		t.Fatal(err)
	}
	return reg, c
}

func order(md protoreflect.MessageDescriptor, id int64, customer string, amount float64) *dynamicpb.Message {
	m := dynamicpb.NewMessage(md)
	f := md.Fields()
	m.Set(f.ByName("id"), protoreflect.ValueOfInt64(id))
	m.Set(f.ByName("customer"), protoreflect.ValueOfString(customer))
	m.Set(f.ByName("amount"), protoreflect.ValueOfFloat64(amount))
	return m
}

// Dynamic messages round-trip; the bytes are header, the message index,
// then the message as proto.Marshal writes it.
func TestDynamicRoundTripAndWireFormat(t *testing.T) {
	reg, c := newClient(t)
	fd := testFile(t)
	md := fd.Messages().ByName("Order")
	s, err := protobuf.NewDynamic(c, md, registry.Topic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	v := order(md, 7, "ann", 12.5)
	b, err := s.Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	ss, ok := reg.GetSchema("orders-value", 1)
	if !ok || ss.Type != sr.TypeProtobuf {
		t.Fatalf("no protobuf schema under orders-value: %+v", ss)
	}
	id, body, err := registry.ReadHeader(b)
	if err != nil || id != ss.ID {
		t.Fatalf("id %d %v, want %d", id, err, ss.ID)
	}
	// dynamicpb marshals fields in no fixed order: compare messages.
	plain := dynamicpb.NewMessage(md)
	if body[0] != 0 || proto.Unmarshal(body[1:], plain) != nil || !proto.Equal(plain, v) {
		t.Fatalf("body %x, want index byte 0 then the message %v", body, v)
	}
	got, err := s.Decode(b)
	if err != nil || !proto.Equal(got, v) {
		t.Fatalf("decode %v %v, want %v", got, err, v)
	}

	// The second message has index [1]: count 1, index 1, zig-zag.
	rs, err := protobuf.NewDynamic(c, fd.Messages().ByName("Refund"), registry.Topic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	r := dynamicpb.NewMessage(fd.Messages().ByName("Refund"))
	r.Set(r.Descriptor().Fields().ByName("order_id"), protoreflect.ValueOfInt64(7))
	rb, err := rs.Append(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	if rb[5] != 2 || rb[6] != 2 {
		t.Fatalf("refund indexes %x, want 02 02", rb[5:7])
	}
	// An Order serde refuses a Refund record with ErrSchemaMismatch.
	if _, err := s.Decode(rb); !errors.Is(err, registry.ErrSchemaMismatch) {
		t.Fatalf("err %v, want ErrSchemaMismatch", err)
	}
}

// A generated message type (a well-known wrapper) round-trips.
func TestGeneratedMessage(t *testing.T) {
	_, c := newClient(t)
	s, err := protobuf.New(c, func() *wrapperspb.StringValue { return new(wrapperspb.StringValue) }, registry.Topic("names"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Append(nil, wrapperspb.String("hello"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode(b)
	if err != nil || got.GetValue() != "hello" {
		t.Fatalf("decode %v %v", got, err)
	}
}

// A record written with a schema registered elsewhere (hand-written .proto
// text, another id) is read by parsing that schema: the index must name
// the serde's message.
func TestWriterSchemaParsed(t *testing.T) {
	reg, c := newClient(t)
	reg.SeedSchema("other-value", 1, 77, sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package shop;
message Refund { int64 order_id = 1; }
message Order { int64 id = 1; string customer = 2; double amount = 3; string note = 4; }`})
	md := testFile(t).Messages().ByName("Order")
	s, err := protobuf.NewDynamic(c, md, registry.Topic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	v := order(md, 1, "bob", 2)
	plain, _ := proto.Marshal(v)
	rec := registry.AppendIndexes(registry.AppendHeader(nil, 77), []int{1})
	got, err := s.Decode(append(rec, plain...))
	if err != nil || !proto.Equal(got, v) {
		t.Fatalf("decode %v %v, want %v", got, err, v)
	}
	rec = registry.AppendIndexes(registry.AppendHeader(nil, 77), []int{0})
	if _, err := s.Decode(append(rec, plain...)); !errors.Is(err, registry.ErrSchemaMismatch) {
		t.Fatalf("index of Refund: err %v, want ErrSchemaMismatch", err)
	}
	rec = registry.AppendIndexes(registry.AppendHeader(nil, 77), []int{5})
	if _, err := s.Decode(append(rec, plain...)); !errors.Is(err, registry.ErrSchemaMismatch) {
		t.Fatalf("index out of range: err %v, want ErrSchemaMismatch", err)
	}
}

// UseLatest writes with the subject's latest version: its id, and the
// index of the serde's message in that version's file.
func TestUseLatest(t *testing.T) {
	reg, c := newClient(t)
	reg.SeedSchema("orders-value", 3, 55, sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package shop;
message Refund { int64 order_id = 1; }
message Order { int64 id = 1; string customer = 2; double amount = 3; }`})
	md := testFile(t).Messages().ByName("Order")
	s, err := protobuf.NewDynamic(c, md, registry.Topic("orders"), registry.UseLatest())
	if err != nil {
		t.Fatal(err)
	}
	v := order(md, 9, "zed", 1)
	b, err := s.Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	id, body, _ := registry.ReadHeader(b)
	idx, _, err := registry.ReadIndexes(body)
	if id != 55 || err != nil || len(idx) != 1 || idx[0] != 1 {
		t.Fatalf("id %d indexes %v %v, want 55 [1]", id, idx, err)
	}
	if got, err := s.Decode(b); err != nil || !proto.Equal(got, v) {
		t.Fatalf("decode %v %v", got, err)
	}
}

// A message whose file imports another: the import is registered under
// its path and referenced; a reader without the local descriptor's text
// resolves the reference from the registry; with auto-registration off,
// an unregistered import is refused.
func TestImportsAreReferences(t *testing.T) {
	money, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("shop/money.proto"), Package: proto.String("shop"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Money"), Field: []*descriptorpb.FieldDescriptorProto{
			{Name: proto.String("cents"), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum(),
				Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String("cents")}}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := new(protoregistry.Files)
	if err := files.RegisterFile(money); err != nil {
		t.Fatal(err)
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("shop/payment.proto"), Package: proto.String("shop"), Syntax: proto.String("proto3"),
		Dependency: []string{"shop/money.proto"},
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Payment"), Field: []*descriptorpb.FieldDescriptorProto{
			{Name: proto.String("amount"), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(),
				TypeName: proto.String(".shop.Money"), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String("amount")}}}},
	}, files)
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().ByName("Payment")

	reg, c := newClient(t)
	off, err := protobuf.NewDynamic(c, md, registry.Topic("payments"), registry.AutoRegister(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := off.Append(nil, dynamicpb.NewMessage(md)); !errors.Is(err, registry.ErrNotRegistered) || !strings.Contains(err.Error(), "shop/money.proto") {
		t.Fatalf("auto-register off: %v, want ErrNotRegistered naming the import", err)
	}

	s, err := protobuf.NewDynamic(c, md, registry.Topic("payments"))
	if err != nil {
		t.Fatal(err)
	}
	v := dynamicpb.NewMessage(md)
	amount := v.Mutable(md.Fields().ByName("amount")).Message()
	amount.Set(amount.Descriptor().Fields().ByName("cents"), protoreflect.ValueOfInt64(1250))
	b, err := s.Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	ss, ok := reg.GetSchema("payments-value", 1)
	if !ok || len(ss.References) != 1 || ss.References[0].Subject != "shop/money.proto" || ss.References[0].Version != 1 ||
		!reg.SubjectExists("shop/money.proto") {
		t.Fatalf("payments-value %+v: want a reference to shop/money.proto version 1", ss)
	}
	// A record of a schema written by hand, with the reference: the
	// reader parses it, fetching the import from the registry.
	reg.SeedSchema("payments-by-hand", 1, 91, sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package shop;
import "shop/money.proto";
message Payment { Money amount = 1; }`, References: []sr.SchemaReference{{Name: "shop/money.proto", Subject: "shop/money.proto", Version: 1}}})
	cold, _ := registry.NewClient(reg.URL())
	other, err := protobuf.NewDynamic(cold, md, registry.Subject("other"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := registry.ReadHeader(b)
	got, err := other.Decode(append(registry.AppendHeader(nil, 91), body...))
	if err != nil || !proto.Equal(got, v) {
		t.Fatalf("decode %v %v, want %v", got, err, v)
	}
}
