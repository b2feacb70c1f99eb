package inspect

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/sink/kafka"
)

// Committable is what a two-phase-commit sink pre-committed for the
// checkpoint: a restore commits it again (idempotently: it may have been
// committed already when the checkpoint completed).
type Committable struct {
	Operator string
	Subtask  int
	Index    int
	// Kind is "kafka-transaction", "file" or "unknown".
	Kind  string
	Kafka *kafka.Committable
	File  *filesink.Committable
	Raw   []byte
}

func (c Committable) String() string {
	switch c.Kind {
	case "kafka-transaction":
		k := c.Kafka
		var parts []string
		for _, o := range k.LastOffsets {
			parts = append(parts, fmt.Sprintf("%s/%d@%d", o.Topic, o.Partition, o.Offset))
		}
		s := k.String()
		if len(parts) > 0 {
			s += ", last offsets " + strings.Join(parts, " ")
		}
		return s
	case "file":
		f := c.File
		return fmt.Sprintf("file %s: %d records, %d bytes (in progress as .inprogress/%s)", f.Final, f.Records, f.Size, f.InProgress)
	}
	return fmt.Sprintf("%d opaque bytes", len(c.Raw))
}

func decodeCommittable(b []byte) Committable {
	if k, err := kafka.DecodeCommittable(b); err == nil {
		return Committable{Kind: "kafka-transaction", Kafka: &k}
	}
	if f, err := filesink.ParseCommittable(b); err == nil {
		return Committable{Kind: "file", File: &f}
	}
	return Committable{Kind: "unknown", Raw: append([]byte(nil), b...)}
}
