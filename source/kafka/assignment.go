package kafka

import "unicode/utf16"

// OwnerOf returns the subtask that reads partition of topic when the source
// runs with parallelism readers. It is Flink's KafkaSourceEnumerator rule:
// the topic's Java hash code picks the subtask of partition 0, and the
// topic's partitions follow round-robin from there, so a topic's
// partitions spread evenly and a Flink user sees the same assignment.
func OwnerOf(topic string, partition int32, parallelism int) int {
	start := int((javaStringHash(topic)*31)&0x7FFFFFFF) % parallelism
	return (start + int(partition)) % parallelism
}

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// over the UTF-16 code units, in 32-bit two's complement arithmetic.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}
