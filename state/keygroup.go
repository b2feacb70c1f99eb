package state

import (
	"encoding/binary"
	"math/bits"
)

// DefaultMaxParallelism is the default number of key groups, as in Flink.
const DefaultMaxParallelism = 128

// KeyGroupRange is the inclusive range [Start, End] of key groups a subtask
// owns. An empty range has End < Start.
type KeyGroupRange struct {
	Start, End int
}

// Contains reports whether kg lies in the range.
func (r KeyGroupRange) Contains(kg int) bool { return kg >= r.Start && kg <= r.End }

// Len is the number of key groups in the range.
func (r KeyGroupRange) Len() int {
	if r.End < r.Start {
		return 0
	}
	return r.End - r.Start + 1
}

// HashKey hashes the encoded bytes of a key with 32-bit MurmurHash3 (seed
// 0). The hash depends only on the bytes, so it is stable across processes
// and versions: key groups, and so the state of a key, land on the same
// subtask after a restore.
func HashKey(key []byte) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := uint32(0)
	n := len(key)
	for len(key) >= 4 {
		k := binary.LittleEndian.Uint32(key)
		key = key[4:]
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch len(key) {
	case 3:
		k ^= uint32(key[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(key[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(key[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// KeyGroupForHash maps a key hash to its key group in [0, maxParallelism).
func KeyGroupForHash(hash uint32, maxParallelism int) int {
	return int(hash % uint32(maxParallelism))
}

// KeyGroupFor maps the encoded bytes of a key to its key group.
func KeyGroupFor(key []byte, maxParallelism int) int {
	return KeyGroupForHash(HashKey(key), maxParallelism)
}

// OperatorIndexFor returns the subtask that owns a key group, with Flink's
// assignment: keyGroup * parallelism / maxParallelism.
func OperatorIndexFor(keyGroup, maxParallelism, parallelism int) int {
	return keyGroup * parallelism / maxParallelism
}

// RangeFor returns the contiguous key-group range that subtask index owns
// at the given parallelism; the ranges of all subtasks partition
// [0, maxParallelism) and agree with OperatorIndexFor.
func RangeFor(maxParallelism, parallelism, index int) KeyGroupRange {
	start := (index*maxParallelism + parallelism - 1) / parallelism
	end := ((index+1)*maxParallelism - 1) / parallelism
	return KeyGroupRange{Start: start, End: end}
}
