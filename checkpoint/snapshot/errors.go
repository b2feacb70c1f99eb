package snapshot

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt is wrapped by every error about a file whose content is
	// not what was written.
	ErrCorrupt = errors.New("corrupt checkpoint file")
	// ErrChecksumMismatch: the CRC32C of a file differs from the recorded
	// one. It wraps ErrCorrupt.
	ErrChecksumMismatch = fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	// ErrTruncated: a file is shorter (or longer) than recorded. It wraps
	// ErrCorrupt.
	ErrTruncated = fmt.Errorf("%w: wrong length (truncated?)", ErrCorrupt)
	// ErrUnsupportedVersion: _metadata written by a newer, incompatible
	// version.
	ErrUnsupportedVersion = errors.New("unsupported checkpoint metadata version")
	// ErrInvalidMetadata: metadata that cannot be written or used as it is
	// (a path that leaves its directory, a savepoint with shared files...).
	ErrInvalidMetadata = errors.New("invalid checkpoint metadata")
	// ErrSharedInSavepoint: savepoints are self-contained and may not write
	// or reference shared files. It wraps ErrInvalidMetadata.
	ErrSharedInSavepoint = fmt.Errorf("%w: a savepoint cannot use shared files (savepoints are self-contained)", ErrInvalidMetadata)
)
