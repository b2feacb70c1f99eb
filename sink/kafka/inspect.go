package kafka

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/inspect/decode"
)

// The exactly-once writers' committables, decoded for package inspect.
func init() { decode.RegisterCommittable("kafka-transaction", decodeCommittable) }

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
