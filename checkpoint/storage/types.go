package storage

import "github.com/sluicehq/sluice/checkpoint/snapshot"

// The checkpoint's data types live in package snapshot (no I/O, imported
// by the deterministic core); these aliases keep the storage's callers
// (runtime, inspect, api, tools) compiling unchanged. New code may use
// either name: they are the same types and values.
type (
	Metadata            = snapshot.Metadata
	SubtaskState        = snapshot.SubtaskState
	StateHandle         = snapshot.StateHandle
	OperatorStateHandle = snapshot.OperatorStateHandle
	KeyGroupRange       = snapshot.KeyGroupRange
	KeyedStateHandle    = snapshot.KeyedStateHandle
	NamedHandle         = snapshot.NamedHandle
	ChannelStateHandle  = snapshot.ChannelStateHandle
	Figures             = snapshot.Figures
	HandleRef           = snapshot.HandleRef
	SharedRegistry      = snapshot.SharedRegistry
)

// MetadataVersion is the version of the _metadata format written.
const MetadataVersion = snapshot.MetadataVersion

// Kinds of snapshot and operator-state distributions.
const (
	KindCheckpoint      = snapshot.KindCheckpoint
	KindSavepoint       = snapshot.KindSavepoint
	KindFullCheckpoint  = snapshot.KindFullCheckpoint
	DistributeSplit     = snapshot.DistributeSplit
	DistributeUnion     = snapshot.DistributeUnion
	DistributeBroadcast = snapshot.DistributeBroadcast
)

// The errors of package snapshot, under the names storage callers know.
// They are the same values: errors.Is works with either.
var (
	ErrCorrupt            = snapshot.ErrCorrupt
	ErrChecksumMismatch   = snapshot.ErrChecksumMismatch
	ErrTruncated          = snapshot.ErrTruncated
	ErrUnsupportedVersion = snapshot.ErrUnsupportedVersion
	ErrInvalidMetadata    = snapshot.ErrInvalidMetadata
	ErrSharedInSavepoint  = snapshot.ErrSharedInSavepoint
)

// NewSharedRegistry returns an empty shared-file registry.
func NewSharedRegistry() *SharedRegistry { return snapshot.NewSharedRegistry() }

// EncodeMetadata validates md and returns the bytes of its _metadata.
func EncodeMetadata(md *Metadata) ([]byte, error) { return snapshot.EncodeMetadata(md) }

// DecodeMetadata checks the trailer of a _metadata and decodes it.
func DecodeMetadata(data []byte) (*Metadata, error) { return snapshot.DecodeMetadata(data) }

// Checksum is the CRC32C that state handles record, for bytes kept inline.
func Checksum(data []byte) uint32 { return snapshot.Checksum(data) }

const metadataName = snapshot.MetadataName
