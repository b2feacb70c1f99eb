package filesink

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/codec"
)

// CommittedFile is one committed file of a sink's directory.
type CommittedFile struct {
	// Path is the file's path (the directory joined with its name).
	Path         string
	Subtask      int
	CheckpointID int64
	Seq          int
}

// CommittedFiles lists the committed files of dir ordered by subtask, then
// checkpoint id, then sequence. In-progress files are never listed. A name
// that starts with "part-" but is not one this package makes is an error.
func CommittedFiles(dir string) ([]CommittedFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("file sink: list committed files: %w", err)
	}
	var files []CommittedFile
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "part-") {
			continue
		}
		sub, id, seq, ok := parseFinalName(name)
		if !ok || !e.Type().IsRegular() {
			return nil, fmt.Errorf("file sink: %s is not a committed file of this sink: %w", filepath.Join(dir, name), ErrCorrupt)
		}
		files = append(files, CommittedFile{Path: filepath.Join(dir, name), Subtask: sub, CheckpointID: id, Seq: seq})
	}
	slices.SortFunc(files, func(a, b CommittedFile) int {
		return cmp.Or(cmp.Compare(a.Subtask, b.Subtask), cmp.Compare(a.CheckpointID, b.CheckpointID), cmp.Compare(a.Seq, b.Seq))
	})
	return files, nil
}

// ReadFile decodes every record of one committed (or handed-over) file,
// checking its layout, record count and checksum.
func ReadFile[T any](path string, c codec.Codec[T]) ([]T, error) {
	if c == nil {
		c = codec.Default[T]()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("file sink: read: %w", err)
	}
	var out []T
	err = parseRecords(data, func(payload []byte) error {
		v, err := c.Decode(payload)
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("file sink: read %s: %w", path, err)
	}
	return out, nil
}

// ReadCommitted returns every record of every committed file in dir, in
// a deterministic order: by subtask, then checkpoint id, then sequence, and
// within a file in the order written. Uncommitted records are never
// returned. A nil codec means codec.Default[T]().
func ReadCommitted[T any](dir string, c codec.Codec[T]) ([]T, error) {
	files, err := CommittedFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, f := range files {
		vs, err := ReadFile(f.Path, c)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// ReadCommittedBySubtask is ReadCommitted grouped by the subtask that wrote
// the records; every subtask's records are in checkpoint order. Subtasks
// with no committed file are absent.
func ReadCommittedBySubtask[T any](dir string, c codec.Codec[T]) (map[int][]T, error) {
	files, err := CommittedFiles(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[int][]T)
	for _, f := range files {
		vs, err := ReadFile(f.Path, c)
		if err != nil {
			return nil, err
		}
		out[f.Subtask] = append(out[f.Subtask], vs...)
	}
	return out, nil
}
