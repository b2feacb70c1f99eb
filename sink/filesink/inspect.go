package filesink

import (
	"fmt"

	"github.com/sluicehq/sluice/inspect/decode"
	"github.com/sluicehq/sluice/sink"
)

// CommittableKind is the kind of the writers' committables
// (sink.KindedCommittables), which the runtime records beside them in
// checkpoints and under which their decoder is registered for package
// inspect.
const CommittableKind = "file"

func init() { decode.RegisterCommittable(CommittableKind, decodeCommittable) }

// CommittableKind names the kind of the sink's committables.
func (s *Sink[T]) CommittableKind() string { return CommittableKind }

var _ sink.KindedCommittables = (*Sink[int])(nil)

func decodeCommittable(b []byte) (decode.Committable, bool) {
	f, err := ParseCommittable(b)
	if err != nil {
		return decode.Committable{}, false
	}
	return decode.Committable{Value: &f,
		Text: fmt.Sprintf("file %s: %d records, %d bytes (in progress as .inprogress/%s)", f.Final, f.Records, f.Size, f.InProgress)}, true
}
