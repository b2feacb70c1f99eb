package runtime

import (
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/sink"
)

// recordCommittableKinds records, beside the committables of each
// written state (one per unit, in order), their kind as the sink names
// it (sink.KindedCommittables; the sink operator passes its sink's on),
// which inspect decodes them by.
func recordCommittableKinds(states []storage.SubtaskState, units []unitSnapshot) {
	for i := range min(len(states), len(units)) {
		if k, ok := units[i].unit.op.(sink.KindedCommittables); ok && len(states[i].Committables) > 0 {
			states[i].CommittableKind = k.CommittableKind()
		}
	}
}
