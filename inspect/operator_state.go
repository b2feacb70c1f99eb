package inspect

import (
	"bufio"
	"io"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/state"
)

type opState struct {
	name  string
	kind  state.Kind
	elems [][]byte
}

// readOperatorState reads an operator state stream with the state
// package's decoder (state.ReadOperatorSnapshot): nothing is allocated
// past what the stream holds, whatever length a (corrupt or hostile)
// handle claims. The whole stream is read, so that its checksum is
// verified.
func readOperatorState(snap *storage.Snapshot, h storage.StateHandle) ([]opState, error) {
	rc, err := snap.Open(h)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	_, _, states, err := state.ReadOperatorSnapshot(br)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, br); err != nil { // verifies the file's checksum
		return nil, err
	}
	out := make([]opState, 0, len(states))
	for _, s := range states {
		out = append(out, opState{name: s.Meta.Name, kind: s.Meta.Kind, elems: s.Elements})
	}
	return out, nil
}
