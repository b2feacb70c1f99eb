package network

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Config, the same as Flink's network stack.
const (
	// DefaultBufferSize is the size of one network buffer (Flink's
	// taskmanager.memory.segment-size, 32 KiB).
	DefaultBufferSize = 32 * 1024
	// DefaultExclusiveBuffersPerChannel is the number of buffers each input
	// channel owns (taskmanager.network.memory.buffers-per-channel).
	DefaultExclusiveBuffersPerChannel = 2
	// DefaultFloatingBuffersPerGate is the number of buffers an input gate
	// shares among its channels
	// (taskmanager.network.memory.floating-buffers-per-gate).
	DefaultFloatingBuffersPerGate = 8
)

// MaxRecordSize is the largest record the framing accepts (its length
// prefix is a uvarint; anything larger is refused on write and treated as
// corruption on read).
const MaxRecordSize = 1<<31 - 1

// Sentinel errors, returned wrapped with the partition's name.
var (
	// ErrReleased is returned by writers of a partition that was released
	// (failure or cancellation).
	ErrReleased = errors.New("network: partition released")
	// ErrFinished is returned when writing to a partition after Finish.
	ErrFinished = errors.New("network: partition finished")
	// ErrRecordTooLarge is returned for a record longer than MaxRecordSize
	// or raw bytes longer than one buffer.
	ErrRecordTooLarge = errors.New("network: record too large")
	// ErrCorruptFrame is reported by RecordReader.Err when the bytes fed to
	// it are not a valid sequence of framed records.
	ErrCorruptFrame = errors.New("network: corrupt record framing")
	// ErrNilEvent is returned when a nil event is added.
	ErrNilEvent = errors.New("network: nil event")
	// ErrNotAnEvent is returned when an event.RecordBuffer is added as an
	// event.
	ErrNotAnEvent = errors.New("network: not an event")
)

// Config sizes the buffers and pools of partitions and gates. Zero fields
// take the defaults.
type Config struct {
	// BufferSize is the size in bytes of every network buffer.
	BufferSize int
	// ExclusiveBuffersPerChannel is the number of buffers each input
	// channel owns; it is also what a subpartition contributes to its
	// partition's output pool.
	ExclusiveBuffersPerChannel int
	// FloatingBuffersPerGate is the number of buffers an input gate shares
	// among its channels; it is also the extra part of a partition's output
	// pool.
	FloatingBuffersPerGate int
	// Pool is the process's network memory (nil: unbounded). With a pool,
	// a gate owns only its first floating buffer and borrows the others
	// from the pool (BufferPool); the runtime reserves what the
	// partitions and gates require (PartitionBuffers, GateBuffers) before
	// deploying them.
	Pool *BufferPool
}

// PartitionBuffers is what a partition of numSubpartitions requires: its
// output pool, numSubpartitions*ExclusiveBuffersPerChannel +
// FloatingBuffersPerGate.
func (c Config) PartitionBuffers(numSubpartitions int) int {
	c = c.withDefaults()
	return numSubpartitions*c.ExclusiveBuffersPerChannel + c.FloatingBuffersPerGate
}

// GateBuffers is what a gate of numChannels requires: the channels'
// exclusive buffers and the floating buffers it owns, all of them
// without a pool and the first one with a pool (the others it borrows
// while the pool has them, as Flink's gates take floating buffers from
// the NetworkBufferPool beyond their required one).
func (c Config) GateBuffers(numChannels int) int {
	c = c.withDefaults()
	return numChannels*c.ExclusiveBuffersPerChannel + c.ownedFloating()
}

// ownedFloating is how many of a gate's floating buffers are its own.
func (c Config) ownedFloating() int {
	if c.Pool == nil {
		return c.FloatingBuffersPerGate
	}
	return min(c.FloatingBuffersPerGate, 1)
}

// DefaultConfig returns the configuration with every field at its default.
func DefaultConfig() Config {
	return Config{
		BufferSize:                 DefaultBufferSize,
		ExclusiveBuffersPerChannel: DefaultExclusiveBuffersPerChannel,
		FloatingBuffersPerGate:     DefaultFloatingBuffersPerGate,
	}
}

// withDefaults fills zero fields with the defaults.
func (c Config) withDefaults() Config {
	if c.BufferSize == 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.ExclusiveBuffersPerChannel == 0 {
		c.ExclusiveBuffersPerChannel = DefaultExclusiveBuffersPerChannel
	}
	if c.FloatingBuffersPerGate == 0 {
		c.FloatingBuffersPerGate = DefaultFloatingBuffersPerGate
	}
	return c
}

// Validate reports a configuration that cannot work: negative sizes, or
// no buffer at all on either side of a channel.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.BufferSize < 16:
		return fmt.Errorf("network: buffer size %d is too small (minimum 16 bytes)", c.BufferSize)
	case c.ExclusiveBuffersPerChannel < 0:
		return fmt.Errorf("network: exclusive buffers per channel %d is negative", c.ExclusiveBuffersPerChannel)
	case c.FloatingBuffersPerGate < 0:
		return fmt.Errorf("network: floating buffers per gate %d is negative", c.FloatingBuffersPerGate)
	case c.Pool != nil && c.Pool.BufferSize() != c.BufferSize:
		return fmt.Errorf("network: the process buffer pool has buffers of %d bytes, the configuration %d", c.Pool.BufferSize(), c.BufferSize)
	}
	return nil
}

// mustConfig applies defaults and panics on an invalid configuration: the
// constructors have no error result, and a bad config is a wiring bug the
// runtime rejects earlier with Validate.
func mustConfig(c Config, who string) Config {
	if err := c.Validate(); err != nil {
		panic(fmt.Sprintf("%s: %v", who, err))
	}
	return c.withDefaults()
}

// ---- The bounds of the data plane's transport ----

// Defaults of TransportLimits.
const (
	DefaultMaxPendingRequests    = 1024
	DefaultMaxConnectionsPerPeer = 64
	DefaultIdleTimeout           = time.Minute
)

// TransportLimits bound what the peers of a Transport can make it hold;
// zero fields take the defaults.
type TransportLimits struct {
	// MaxPendingRequests (taskmanager.network.max-pending-requests-per-connection,
	// 1024): a request past it is refused, its channel fails naming the key.
	MaxPendingRequests int
	// MaxConnectionsPerPeer (taskmanager.network.max-connections-per-peer,
	// 64): a connection past it is closed as soon as it is accepted.
	MaxConnectionsPerPeer int
	// IdleTimeout (taskmanager.network.connection.idle-timeout, 1 min).
	IdleTimeout time.Duration
}

func (l TransportLimits) withDefaults() TransportLimits {
	if l.MaxPendingRequests <= 0 {
		l.MaxPendingRequests = DefaultMaxPendingRequests
	}
	if l.MaxConnectionsPerPeer <= 0 {
		l.MaxConnectionsPerPeer = DefaultMaxConnectionsPerPeer
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	return l
}
