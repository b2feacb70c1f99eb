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
	// Kind is the format a connector registered with package decode
	// ("kafka-transaction" for sink/kafka, "file" for sink/filesink), or
	// "unknown".
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

// decodeCommittable decodes b with the decoders the connectors
// registered.
func decodeCommittable(b []byte) Committable {
	if kind, d, ok := decode.DecodeCommittable(b); ok {
		return Committable{Kind: kind, Value: d.Value, text: d.Text}
	}
	return Committable{Kind: "unknown", Raw: append([]byte(nil), b...)}
}
