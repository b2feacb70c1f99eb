package inspect

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/sink/kafka"
	srckafka "github.com/sluicehq/sluice/source/kafka"
)

func TestDecodePositions(t *testing.T) {
	k := decodePosition(srckafka.SplitState{Topic: "orders", Partition: 3, Offset: 1200, StoppingOffset: srckafka.NoStoppingOffset}.Encode())
	if k.Kind != "kafka" || k.Topic != "orders" || k.Partition != 3 || k.Offset != 1200 || k.String() != "orders/3 offset 1200" {
		t.Errorf("kafka split: %+v %q", k, k)
	}
	b := decodePosition(srckafka.SplitState{Topic: "t", Partition: 0, Offset: 5, StoppingOffset: 9}.Encode())
	if b.String() != "t/0 offset 5 (stops at 9)" {
		t.Errorf("bounded split %q", b)
	}
	// Datagen entries of subtask 1 must not pass for Kafka splits,
	// whatever their index.
	for _, next := range []int64{0, 1, 127, 1 << 20, 1 << 40} {
		e := binary.AppendUvarint(nil, 1)
		e = binary.AppendUvarint(e, 2)
		e = binary.AppendVarint(e, next)
		d := decodePosition(e)
		if d.Kind != "datagen" || d.ReaderSubtask != 1 || d.Parallelism != 2 || d.Next != next {
			t.Errorf("datagen entry for %d: %+v", next, d)
		}
	}
	if u := decodePosition([]byte{0xff, 0xfe}); u.Kind != "unknown" || len(u.Raw) != 2 {
		t.Errorf("garbage: %+v", u)
	}
}

func TestDecodeCommittables(t *testing.T) {
	c := kafka.Committable{TransactionalID: "sluice-0-1", ProducerID: 42, ProducerEpoch: 3, TransactionVersion: 2,
		CheckpointID: 9, LastOffsets: []kafka.PartitionOffset{{Topic: "out", Partition: 1, Offset: 77}}}
	// By the kind the checkpoint recorded, and, for a checkpoint that
	// recorded none (an earlier version's), by the decoder that takes it.
	for _, kind := range []string{kafka.CommittableKind, ""} {
		d := decodeCommittable(kind, c.Encode())
		if d.Kind != "kafka-transaction" || d.Value.(*kafka.Committable).ProducerID != 42 || !strings.Contains(d.String(), "out/1@77") ||
			!strings.Contains(d.String(), "sluice-0-1") {
			t.Errorf("kafka committable of kind %q: %+v %q", kind, d, d)
		}
	}
	// A committable of version 1 (before the record count), of a
	// checkpoint of an earlier version.
	v1 := c.Encode()
	v1[0] = 1
	v1 = v1[:len(v1)-1] // the record count, -1 as a varint, is its last byte
	if d := decodeCommittable("", v1); d.Kind != "kafka-transaction" || d.Value.(*kafka.Committable).Records != -1 ||
		d.Value.(*kafka.Committable).TransactionalID != "sluice-0-1" {
		t.Errorf("kafka committable of version 1: %+v %q", d, d)
	}
	// The recorded kind decides: a file committable recorded as a
	// Kafka transaction is not guessed into a file.
	file := []byte(`{"v":1,"subtask":0,"checkpoint":1,"seq":0,"inprogress":"part-0-1-0.tmp","final":"part-0-1-0","size":100,"crc32c":0,"records":3}`)
	if d := decodeCommittable("", file); d.Kind != filesink.CommittableKind {
		t.Fatalf("file committable guessed as %q", d.Kind)
	}
	if d := decodeCommittable(kafka.CommittableKind, file); d.Kind != kafka.CommittableKind || d.Value != nil || d.String() != fmt.Sprintf("%d opaque bytes", len(file)) {
		t.Errorf("file committable recorded as a Kafka transaction: %+v %q", d, d)
	}
	// A kind no imported connector registered keeps its name.
	if d := decodeCommittable("elsewhere", c.Encode()); d.Kind != "elsewhere" || d.Value != nil {
		t.Errorf("committable of an unregistered kind: %+v %q", d, d)
	}
	if u := decodeCommittable("", []byte("x")); u.Kind != "unknown" || u.String() != "1 opaque bytes" {
		t.Errorf("garbage: %+v %q", u, u)
	}
}
