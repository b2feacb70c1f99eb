package kafkaclient

// RecordOverhead is what a buffered Kafka record costs beyond its key and
// value: franz-go's Record, the pointer to it, its share of the batch.
// The Kafka source and sink size their buffers with it.
const RecordOverhead = 256
