package filesink

import (
	"fmt"

	"github.com/sluicehq/sluice/inspect/decode"
)

// The writers' committables, decoded for package inspect.
func init() { decode.RegisterCommittable("file", decodeCommittable) }

func decodeCommittable(b []byte) (decode.Committable, bool) {
	f, err := ParseCommittable(b)
	if err != nil {
		return decode.Committable{}, false
	}
	return decode.Committable{Value: &f,
		Text: fmt.Sprintf("file %s: %d records, %d bytes (in progress as .inprogress/%s)", f.Final, f.Records, f.Size, f.InProgress)}, true
}
