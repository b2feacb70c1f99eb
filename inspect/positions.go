package inspect

import (
	"github.com/sluicehq/sluice/source/kafka"
)

// decodePosition decodes one source reader entry: a Kafka split (offset
// per partition), or a datagen reader's position (uvarint subtask,
// uvarint parallelism, varint next index, as the datagen source writes
// it); anything else is kept raw.
func decodePosition(e []byte) SourcePosition {
	if s, err := kafka.DecodeSplitState(e); err == nil {
		return SourcePosition{Kind: "kafka", Topic: s.Topic, Partition: s.Partition, Offset: s.Offset, StoppingOffset: s.StoppingOffset}
	}
	d := decoder{b: e}
	sub, par, next := d.uvarint(), d.uvarint(), d.varint()
	if d.err == nil && len(d.b) == 0 && par > 0 && sub < par && next >= 0 {
		return SourcePosition{Kind: "datagen", ReaderSubtask: int(sub), Parallelism: int(par), Next: next}
	}
	return SourcePosition{Kind: "unknown", Raw: append([]byte(nil), e...)}
}
