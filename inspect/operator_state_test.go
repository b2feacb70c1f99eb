package inspect

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/state"
)

// A 10-byte operator state handle that claims 16 GiB of payload is
// refused as corrupt without allocating what it claims.
func TestOperatorStateClaimNotAllocated(t *testing.T) {
	data := binary.AppendUvarint([]byte("SLOS\x01"), 1<<34)
	if len(data) != 10 {
		t.Fatalf("the handle is %d bytes", len(data))
	}
	var err error
	grown := testutil.AllocatedBytes(16<<20, func() { _, err = readOperatorState(&storage.Snapshot{}, storage.StateHandle{Inline: data}) })
	if !errors.Is(err, state.ErrCorruptSnapshot) {
		t.Errorf("a truncated operator state: %v, want ErrCorruptSnapshot", err)
	}
	if grown > 16<<20 {
		t.Errorf("reading 10 bytes allocated %d bytes", grown)
	}
}
