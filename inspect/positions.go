package inspect

import (
	"github.com/sluicehq/sluice/inspect/decode"
	"github.com/sluicehq/sluice/internal/binread"
)

// decodePosition decodes one source reader entry: with the decoders the
// connectors registered (a Kafka split: offset per partition), else as a
// datagen reader's position (uvarint subtask, uvarint parallelism, varint
// next index, as the datagen source writes it); anything else is kept
// raw.
func decodePosition(e []byte) SourcePosition {
	if kind, p, ok := decode.DecodePosition(e); ok {
		return SourcePosition{Kind: kind, Topic: p.Topic, Partition: p.Partition, Offset: p.Offset, StoppingOffset: p.StoppingOffset, text: p.Text}
	}
	d := binread.New(e)
	sub, par, next := d.Uvarint(), d.Uvarint(), d.Varint()
	if d.Err() == nil && d.Len() == 0 && par > 0 && sub < par && next >= 0 {
		return SourcePosition{Kind: "datagen", ReaderSubtask: int(sub), Parallelism: int(par), Next: next}
	}
	return SourcePosition{Kind: "unknown", Raw: append([]byte(nil), e...)}
}
