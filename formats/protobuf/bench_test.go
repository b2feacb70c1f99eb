package protobuf_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicehq/sluice/formats/protobuf"
	"github.com/sluicehq/sluice/formats/registry"
)

// The record of formats/avro's benchmark as a dynamic message:
// message BenchOrder {int64 id = 1; string customer = 2; double amount = 3;
// repeated string items = 4;}
func benchMessage(b *testing.B) *dynamicpb.Message {
	f := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type, l descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(), Label: l.Enum(), JsonName: proto.String(name)}
	}
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("bench.proto"), Package: proto.String("bench"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("BenchOrder"), Field: []*descriptorpb.FieldDescriptorProto{
			f("id", 1, descriptorpb.FieldDescriptorProto_TYPE_INT64, opt),
			f("customer", 2, descriptorpb.FieldDescriptorProto_TYPE_STRING, opt),
			f("amount", 3, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, opt),
			f("items", 4, descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_LABEL_REPEATED),
		}}},
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	md := fd.Messages().Get(0)
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByName("id"), protoreflect.ValueOfInt64(123456789))
	m.Set(md.Fields().ByName("customer"), protoreflect.ValueOfString("customer-42"))
	m.Set(md.Fields().ByName("amount"), protoreflect.ValueOfFloat64(99.5))
	l := m.Mutable(md.Fields().ByName("items")).List()
	for _, s := range []string{"apple", "bread", "cheese"} {
		l.Append(protoreflect.ValueOfString(s))
	}
	return m
}

func benchSerde(b *testing.B, md protoreflect.MessageDescriptor) *registry.Serde[*dynamicpb.Message] {
	reg := srfake.New()
	b.Cleanup(reg.Close)
	c, err := registry.NewClient(reg.URL())
	if err != nil {
		b.Fatal(err)
	}
	s, err := protobuf.NewDynamic(c, md, registry.Topic("bench"))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkProtobufDynamicEncode(b *testing.B) {
	v := benchMessage(b)
	s := benchSerde(b, v.Descriptor())
	buf, err := s.Append(nil, v)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if buf, err = s.Append(buf[:0], v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}

func BenchmarkProtobufDynamicDecode(b *testing.B) {
	v := benchMessage(b)
	s := benchSerde(b, v.Descriptor())
	buf, err := s.Append(nil, v)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Decode(buf); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}
