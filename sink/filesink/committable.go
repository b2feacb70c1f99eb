package filesink

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// committableVersion is the version of the committable encoding.
const committableVersion = 1

// Committable describes one in-progress file that a writer handed over at
// a checkpoint barrier. It is stored in the checkpoint as JSON. File names
// are relative: InProgress to <dir>/.inprogress, Final to <dir>.
type Committable struct {
	Version int `json:"v"`
	// Subtask is the index of the writer that wrote the file.
	Subtask int `json:"subtask"`
	// CheckpointID is the checkpoint whose barrier closed the file.
	CheckpointID int64 `json:"checkpoint"`
	// Seq orders the files of one subtask and checkpoint (0 today: a writer
	// hands over one file per checkpoint).
	Seq int `json:"seq"`
	// InProgress is the name of the file in <dir>/.inprogress.
	InProgress string `json:"inprogress"`
	// Final is the name the file gets in <dir> on commit.
	Final string `json:"final"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// CRC32C is the CRC-32C (Castagnoli) of the whole file.
	CRC32C uint32 `json:"crc32c"`
	// Records is the number of records in the file.
	Records int64 `json:"records"`
}

// ParseCommittable decodes and checks a committable written by a writer of
// this package.
func ParseCommittable(b []byte) (Committable, error) {
	var c Committable
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("decode committable %.100q: %v: %w", b, err, ErrInvalidCommittable)
	}
	if c.Version != committableVersion {
		return c, fmt.Errorf("committable version %d, want %d: %w", c.Version, committableVersion, ErrInvalidCommittable)
	}
	if c.Subtask < 0 || c.CheckpointID < 0 || c.Seq < 0 {
		return c, fmt.Errorf("committable subtask %d, checkpoint %d, seq %d: negative: %w", c.Subtask, c.CheckpointID, c.Seq, ErrInvalidCommittable)
	}
	if !isPlainName(c.InProgress) {
		return c, fmt.Errorf("committable in-progress name %q is not a plain file name: %w", c.InProgress, ErrInvalidCommittable)
	}
	if want := finalName(c.Subtask, c.CheckpointID, c.Seq); c.Final != want {
		return c, fmt.Errorf("committable final name %q, want %q: %w", c.Final, want, ErrInvalidCommittable)
	}
	if c.Size < int64(headerLen+footerLen) || c.Records < 0 {
		return c, fmt.Errorf("committable of %s: size %d, records %d: %w", c.Final, c.Size, c.Records, ErrInvalidCommittable)
	}
	return c, nil
}

func (c Committable) encode() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode committable of %s: %w", c.Final, err)
	}
	return b, nil
}

// String names the committable in error messages.
func (c Committable) String() string {
	return fmt.Sprintf("%s (subtask %d, checkpoint %d, in-progress %s)", c.Final, c.Subtask, c.CheckpointID, filepath.Join(inProgressDirName, c.InProgress))
}

func isPlainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && filepath.Base(name) == name
}

// finalName is the name of a committed file: part-<subtask>-<checkpoint>-<seq>.
func finalName(subtask int, checkpointID int64, seq int) string {
	return "part-" + strconv.Itoa(subtask) + "-" + strconv.FormatInt(checkpointID, 10) + "-" + strconv.Itoa(seq)
}

// parseFinalName parses a name made by finalName; ok is false for any
// other name.
func parseFinalName(name string) (subtask int, checkpointID int64, seq int, ok bool) {
	rest, found := strings.CutPrefix(name, "part-")
	if !found {
		return 0, 0, 0, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	sub, err1 := strconv.Atoi(parts[0])
	id, err2 := strconv.ParseInt(parts[1], 10, 64)
	sq, err3 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || sub < 0 || sq < 0 || finalName(sub, id, sq) != name {
		return 0, 0, 0, false
	}
	return sub, id, sq, true
}
