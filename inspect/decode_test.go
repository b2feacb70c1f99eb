package inspect

import (
	"encoding/binary"
	"strings"
	"testing"

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
	d := decodeCommittable(c.Encode())
	if d.Kind != "kafka-transaction" || d.Value.(*kafka.Committable).ProducerID != 42 || !strings.Contains(d.String(), "out/1@77") ||
		!strings.Contains(d.String(), "sluice-0-1") {
		t.Errorf("kafka committable: %+v %q", d, d)
	}
	if u := decodeCommittable([]byte("x")); u.Kind != "unknown" || u.String() != "1 opaque bytes" {
		t.Errorf("garbage: %+v %q", u, u)
	}
}
