package kafka

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/binread"
)

// committableVersion is the first byte of every encoded Committable:
// version 2 adds the record count to version 1, which is still decoded
// (Records -1).
const committableVersion = 2

// Committable names one pre-committed Kafka transaction: everything the
// committer needs to finish it from another client or another process.
type Committable struct {
	// TransactionalID is the id the transaction runs under.
	TransactionalID string
	// ProducerID and ProducerEpoch identify the transaction: EndTxn with
	// them resumes and commits it.
	ProducerID    int64
	ProducerEpoch int16
	// TransactionVersion is the transaction protocol the producer used: 2
	// (KIP-890, the epoch is bumped at every commit; EndTxn v5+) or 1
	// (EndTxn v4 and below).
	TransactionVersion int8
	// CheckpointID is the checkpoint whose barrier closed the transaction.
	CheckpointID int64
	// LastOffsets is the offset of the last record the transaction wrote
	// to each partition: its control marker follows it, which is how a
	// re-commit tells committed from aborted once the id moved on.
	LastOffsets []PartitionOffset
	// Records is the number of records the transaction wrote (-1 when
	// unknown: a committable of encoding version 1).
	Records int64
}

// PartitionOffset is an offset in a topic partition.
type PartitionOffset struct {
	Topic     string
	Partition int32
	Offset    int64
}

func (c Committable) String() string {
	return fmt.Sprintf("transaction %s (producer id %d, epoch %d, transaction version %d) of checkpoint %d",
		c.TransactionalID, c.ProducerID, c.ProducerEpoch, c.TransactionVersion, c.CheckpointID)
}

// Encode returns the committable's bytes: a version byte, then the fields
// as varints and length-prefixed strings; topics are written once each.
func (c Committable) Encode() []byte {
	b := make([]byte, 0, 32+len(c.TransactionalID)+8*len(c.LastOffsets))
	b = append(b, committableVersion)
	b = appendString(b, c.TransactionalID)
	b = binary.AppendVarint(b, c.ProducerID)
	b = binary.AppendVarint(b, int64(c.ProducerEpoch))
	b = append(b, byte(c.TransactionVersion))
	b = binary.AppendVarint(b, c.CheckpointID)
	offs := slices.Clone(c.LastOffsets)
	slices.SortFunc(offs, func(x, y PartitionOffset) int {
		if n := strings.Compare(x.Topic, y.Topic); n != 0 {
			return n
		}
		return int(x.Partition) - int(y.Partition)
	})
	var groups [][]PartitionOffset
	for i := 0; i < len(offs); {
		j := i + 1
		for j < len(offs) && offs[j].Topic == offs[i].Topic {
			j++
		}
		groups = append(groups, offs[i:j])
		i = j
	}
	b = binary.AppendUvarint(b, uint64(len(groups)))
	for _, g := range groups {
		b = appendString(b, g[0].Topic)
		b = binary.AppendUvarint(b, uint64(len(g)))
		for _, po := range g {
			b = binary.AppendVarint(b, int64(po.Partition))
			b = binary.AppendVarint(b, po.Offset)
		}
	}
	return binary.AppendVarint(b, c.Records)
}

// DecodeCommittable decodes what Encode wrote.
func DecodeCommittable(b []byte) (Committable, error) {
	d := binread.New(b)
	var c Committable
	v := d.Byte()
	if d.Err() == nil && v != 1 && v != committableVersion {
		return c, fmt.Errorf("committable version %d, want 1 to %d: %w", v, committableVersion, ErrBadCommittable)
	}
	c.TransactionalID = d.String()
	c.ProducerID = d.Varint()
	c.ProducerEpoch = int16(d.Varint())
	c.TransactionVersion = int8(d.Byte())
	c.CheckpointID = d.Varint()
	topics := d.Uvarint()
	for i := uint64(0); i < topics && d.Err() == nil; i++ {
		t := d.String()
		n := d.Uvarint()
		for j := uint64(0); j < n && d.Err() == nil; j++ {
			p := int32(d.Varint())
			o := d.Varint()
			c.LastOffsets = append(c.LastOffsets, PartitionOffset{Topic: t, Partition: p, Offset: o})
		}
	}
	c.Records = -1
	if v >= 2 {
		c.Records = d.Varint()
	}
	err := d.Err()
	if err == nil && d.Len() != 0 {
		err = fmt.Errorf("%d trailing bytes", d.Len())
	}
	if err != nil {
		return Committable{}, fmt.Errorf("decode committable: %w: %w", err, ErrBadCommittable)
	}
	return c, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
