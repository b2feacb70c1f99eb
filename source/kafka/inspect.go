package kafka

import (
	"fmt"

	"github.com/sluicehq/sluice/inspect/decode"
)

// The reader's split states, decoded for package inspect.
func init() { decode.RegisterPosition("kafka", decodePosition) }

func decodePosition(e []byte) (decode.Position, bool) {
	s, err := DecodeSplitState(e)
	if err != nil {
		return decode.Position{}, false
	}
	text := fmt.Sprintf("%s/%d offset %d", s.Topic, s.Partition, s.Offset)
	if s.StoppingOffset >= 0 {
		text += fmt.Sprintf(" (stops at %d)", s.StoppingOffset)
	}
	return decode.Position{Topic: s.Topic, Partition: s.Partition, Offset: s.Offset, StoppingOffset: s.StoppingOffset, Text: text}, true
}
