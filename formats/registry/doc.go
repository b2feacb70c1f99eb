// Package registry owns Sluice's side of a Confluent-compatible Schema
// Registry: the client with its caches and authentication (Client), the
// wire format (magic byte 0, the 4-byte big-endian schema id, then the
// format's body: wire.go), the subject name strategies (subject.go), and
// the generic Serde that a format (formats/avro, formats/protobuf,
// formats/jsonschema) plugs its schema handling into. A Serde is at once a
// Kafka source decoder (Decoder), a Kafka sink serializer (Serializer) and
// a codec.Codec for state and shuffles, without importing the Kafka
// connectors: their function types are matched, not named.
//
// Lookups go through github.com/twmb/franz-go/pkg/sr. Every schema id,
// subject and version seen is cached for the life of the Client (schemas
// under an id never change); transient registry failures are retried with
// backoff up to the lookup timeout. A record whose schema id the registry
// does not know fails with ErrUnknownSchema, which the Kafka source treats
// as a bad record (its BadRecordPolicy decides).
package registry
