package inspect

import (
	"fmt"

	"github.com/sluicehq/sluice/inspect/decode"
)

// Committable is what a two-phase-commit sink pre-committed for the
// checkpoint: a restore commits it again (idempotently: it may have been
// committed already when the checkpoint completed).
type Committable struct {
	Operator string
	Subtask  int
	Index    int
	// Kind is the kind the checkpoint recorded (the format a connector
	// registered with package decode: "kafka-transaction" for
	// sink/kafka, "file" for sink/filesink), or for a checkpoint that
	// recorded none the format whose decoder took it, or "unknown".
	Kind string
	// Value is the connector's decoded committable (*kafka.Committable,
	// *filesink.Committable), nil when unknown.
	Value any
	Raw   []byte
	text  string
}

func (c Committable) String() string {
	if c.Kind != "unknown" && c.text != "" {
		return c.text
	}
	return fmt.Sprintf("%d opaque bytes", len(c.Raw))
}

// decodeCommittable decodes b, a committable of kind as the checkpoint
// recorded it, with the decoder the connector registered under kind; a
// committable of a checkpoint that recorded no kind (written before
// kinds were) with the first registered decoder that takes it. One no
// decoder takes keeps its recorded kind, or "unknown", and its bytes.
func decodeCommittable(kind string, b []byte) Committable {
	if kind != "" {
		if d, ok := decode.DecodeCommittableKind(kind, b); ok {
			return Committable{Kind: kind, Value: d.Value, text: d.Text}
		}
		return Committable{Kind: kind, Raw: append([]byte(nil), b...)}
	}
	if kind, d, ok := decode.DecodeCommittable(b); ok {
		return Committable{Kind: kind, Value: d.Value, text: d.Text}
	}
	return Committable{Kind: "unknown", Raw: append([]byte(nil), b...)}
}
