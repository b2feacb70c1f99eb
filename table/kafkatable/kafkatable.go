// Package kafkatable owns tables in Kafka: reading a changelog topic (a
// compacted topic keyed by the table's key) as a table's changes,
// writing a table's changes to one (an upsert changelog: the value for an
// upsert, a tombstone — a record without a value — for a delete; exactly
// once when the job's checkpoints are), and the View, a read-only copy of
// such a table that another Go service keeps from the topic (goka's
// View).
//
// Keys and values are encoded by codecs: codec.String, codec.Bytes,
// codec.JSON, or a Schema Registry serde of package formats/registry
// (a registry.Serde is a codec.Codec; make the key's with registry.Key).
package kafkatable

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/table"
)

// Decoder decodes a changelog record into a table change: its key with
// key, its value with value; a record without a value is a tombstone. A
// record without a key is refused (a bad record for the source's
// policy): a table has none.
func Decoder[K comparable, V any](key codec.Codec[K], value codec.Codec[V]) kafkasource.Decoder[table.Change[K, V]] {
	return func(r *kgo.Record) (table.Change[K, V], error) { return decode(r, key, value) }
}

func decode[K comparable, V any](r *kgo.Record, key codec.Codec[K], value codec.Codec[V]) (table.Change[K, V], error) {
	var c table.Change[K, V]
	if r.Key == nil {
		return c, fmt.Errorf("changelog record of %s partition %d offset %d has no key", r.Topic, r.Partition, r.Offset)
	}
	k, err := key.Decode(r.Key)
	if err != nil {
		return c, fmt.Errorf("changelog record of %s partition %d offset %d: key: %w", r.Topic, r.Partition, r.Offset, err)
	}
	if r.Value == nil {
		return table.Tombstone[K, V](k), nil
	}
	v, err := value.Decode(r.Value)
	if err != nil {
		return c, fmt.Errorf("changelog record of %s partition %d offset %d (key %v): value: %w", r.Topic, r.Partition, r.Offset, k, err)
	}
	return table.Upsert(k, v), nil
}

// NewSource is a Kafka source of the changes of a table kept in topic (a
// compacted topic keyed by the table's key), from its beginning unless
// opts say otherwise: make it a table with table.FromChangelog (with the
// key codec of the topic's partitioning, usually the same key codec, when
// it is joined with a stream keyed likewise).
//
//	src, err := kafkatable.NewSource(seeds, "customers", codec.String{}, codec.JSON[Customer]{})
//	customers := table.FromChangelog(sluice.FromSource(env, src, sluice.NoWatermarks[table.Change[string, Customer]](), "customers"))
func NewSource[K comparable, V any](seeds []string, topic string, key codec.Codec[K], value codec.Codec[V], opts ...kafkasource.Option) (*kafkasource.Source[table.Change[K, V]], error) {
	// Decoder keeps nothing of the records (codecs copy what they
	// decode): the source may reuse their memory.
	opts = append([]kafkasource.Option{kafkasource.StartFrom(kafkasource.Earliest()), kafkasource.DecoderKeepsNothing()}, opts...)
	return kafkasource.NewSource(seeds, kafkasource.Topics(topic), Decoder(key, value), opts...)
}

// Serializer writes a table change to topic: keyed by its key, the value
// encoded for an upsert, no value (a tombstone) for a delete.
func Serializer[K comparable, V any](topic string, key codec.Codec[K], value codec.Codec[V]) kafkasink.Serializer[table.Change[K, V]] {
	return func(c table.Change[K, V]) (*kgo.Record, error) {
		k, err := key.Append(nil, c.Key)
		if err != nil {
			return nil, fmt.Errorf("changelog of %s: key %v: %w", topic, c.Key, err)
		}
		r := &kgo.Record{Topic: topic, Key: k}
		if c.Delete {
			return r, nil
		}
		if r.Value, err = value.Append(nil, c.Value); err != nil {
			return nil, fmt.Errorf("changelog of %s: value of key %v: %w", topic, c.Key, err)
		}
		if r.Value == nil {
			r.Value = []byte{} // an empty value is a value, not a tombstone
		}
		return r, nil
	}
}

// NewSink is a Kafka sink writing a table's changes to topic (create it
// with cleanup.policy=compact: Kafka then keeps the latest value of every
// key and, after delete.retention.ms, drops the deleted ones). Its
// delivery guarantee follows the job's checkpointing unless opts say
// otherwise: exactly once with exactly-once checkpoints, so a reader
// under read_committed (a View) never sees a change a failure undid.
//
//	snk, err := kafkatable.NewSink(seeds, "customer-totals", codec.String{}, codec.JSON[Total]{})
//	sluice.SinkTo(totals.Changes(), snk, sluice.UID("totals-changelog"))
func NewSink[K comparable, V any](seeds []string, topic string, key codec.Codec[K], value codec.Codec[V], opts ...kafkasink.Option) (*kafkasink.Sink[table.Change[K, V]], error) {
	return kafkasink.NewSink(seeds, Serializer(topic, key, value), opts...)
}
