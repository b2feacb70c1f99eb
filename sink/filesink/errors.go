package filesink

import "errors"

// ErrDataLoss is returned (wrapped) by Commit when neither the in-progress
// file nor the final file of a committable exists: the data the committable
// describes is gone.
var ErrDataLoss = errors.New("filesink: committed data is missing (data loss)")

// ErrCorrupt is returned (wrapped) when a file does not have the size,
// checksum or layout it should: an in-progress file at commit, or a
// committed file read back by ReadCommitted.
var ErrCorrupt = errors.New("filesink: corrupt file")

// ErrConflict is returned (wrapped) by Commit when the final file of a
// committable already exists with other contents than the committable
// describes, which happens only when a checkpoint id is reused for
// different data (one job per directory, and checkpoint ids must grow).
var ErrConflict = errors.New("filesink: final file exists with other contents")

// ErrInvalidCommittable is returned (wrapped) by Commit for a committable
// that this sink did not write or cannot decode.
var ErrInvalidCommittable = errors.New("filesink: invalid committable")
