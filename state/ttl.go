package state

import (
	"encoding/binary"
	"fmt"
)

// TTL states store, with every value (with every list element and every
// map value), the time in milliseconds since the epoch it was last written
// (or read, with OnReadAndWrite). In bytes — in snapshots and in byte-level
// backends — that is an 8-byte big-endian prefix before the codec's bytes,
// so a backend can drop expired entries (during compaction, or when writing
// a snapshot) without knowing the codec.

// TTLPrefixLen is the length of the timestamp prefix of a TTL value.
const TTLPrefixLen = 8

// AppendTTLTimestamp appends the timestamp prefix of a TTL value.
func AppendTTLTimestamp(dst []byte, millis int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(millis))
}

// SplitTTLValue splits a TTL value into its timestamp and the codec bytes.
func SplitTTLValue(b []byte) (millis int64, value []byte, err error) {
	if len(b) < TTLPrefixLen {
		return 0, nil, fmt.Errorf("TTL value of %d bytes, want at least %d: %w", len(b), TTLPrefixLen, ErrCorruptSnapshot)
	}
	return int64(binary.BigEndian.Uint64(b)), b[TTLPrefixLen:], nil
}

// TTLExpired reports whether an entry last stamped at millis has expired
// at nowMillis under cfg (never, when TTL is off), as Flink: expired once
// stamp + ttl <= now.
func TTLExpired(cfg TTLConfig, millis, nowMillis int64) bool {
	return cfg.Enabled() && expiredAt(millis, cfg.millis(), nowMillis)
}

func expiredAt(stamp, ttlMillis, now int64) bool {
	return stamp+ttlMillis <= now
}

// ttlCtx is a handle's TTL configuration and clock.
type ttlCtx struct {
	on     bool
	ms     int64
	onRead bool // OnReadAndWrite
	retExp bool // ReturnExpiredIfNotCleanedUp
	clock  Clock
}

func newTTL(cfg TTLConfig, clock Clock) ttlCtx {
	if clock == nil {
		clock = SystemClock{}
	}
	return ttlCtx{
		on:     cfg.Enabled(),
		ms:     cfg.millis(),
		onRead: cfg.UpdateType == OnReadAndWrite,
		retExp: cfg.Visibility == ReturnExpiredIfNotCleanedUp,
		clock:  clock,
	}
}

// now reads the clock; it is only called for TTL states.
func (c *ttlCtx) now() int64 { return c.clock.Now().UnixMilli() }

func (c *ttlCtx) expired(stamp, now int64) bool { return expiredAt(stamp, c.ms, now) }
