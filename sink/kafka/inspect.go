package kafka

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/inspect/decode"
	"github.com/sluicehq/sluice/sink"
)

// CommittableKind is the kind of the exactly-once writers' committables
// (sink.KindedCommittables), which the runtime records beside them in
// checkpoints and under which their decoder is registered for package
// inspect.
const CommittableKind = "kafka-transaction"

func init() { decode.RegisterCommittable(CommittableKind, decodeCommittable) }

// CommittableKind names the kind of the sink's committables.
func (s *Sink[T]) CommittableKind() string { return CommittableKind }

var _ sink.KindedCommittables = (*Sink[int])(nil)

func decodeCommittable(b []byte) (decode.Committable, bool) {
	k, err := DecodeCommittable(b)
	if err != nil {
		return decode.Committable{}, false
	}
	var parts []string
	for _, o := range k.LastOffsets {
		parts = append(parts, fmt.Sprintf("%s/%d@%d", o.Topic, o.Partition, o.Offset))
	}
	s := k.String()
	if len(parts) > 0 {
		s += ", last offsets " + strings.Join(parts, " ")
	}
	return decode.Committable{Value: &k, Text: s}, true
}
