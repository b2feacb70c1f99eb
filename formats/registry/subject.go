package registry

import "fmt"

// SubjectNameStrategy names the subject a serde registers and looks up its
// schema under, from the topic written to, the schema's record name (the
// Avro full name, the Protobuf message's full name, the JSON Schema's
// title) and whether the serde is for keys. Confluent's strategies are
// below; TopicNameStrategy is the default.
type SubjectNameStrategy func(topic, recordName string, key bool) (string, error)

func suffix(key bool) string {
	if key {
		return "-key"
	}
	return "-value"
}

// TopicNameStrategy: "<topic>-value" ("<topic>-key" for keys). One schema
// (and its versions) per topic.
func TopicNameStrategy(topic, _ string, key bool) (string, error) {
	if topic == "" {
		return "", fmt.Errorf("TopicNameStrategy needs a topic (registry.Topic for a serde used as a codec): %w", ErrInvalidConfig)
	}
	return topic + suffix(key), nil
}

// RecordNameStrategy: the record's full name, whatever the topic: several
// record types in one topic, one subject per type across topics.
func RecordNameStrategy(_, recordName string, _ bool) (string, error) {
	if recordName == "" {
		return "", fmt.Errorf("RecordNameStrategy needs a schema with a record name: %w", ErrInvalidConfig)
	}
	return recordName, nil
}

// TopicRecordNameStrategy: "<topic>-<record full name>": several record
// types in one topic, subjects per topic.
func TopicRecordNameStrategy(topic, recordName string, _ bool) (string, error) {
	if topic == "" || recordName == "" {
		return "", fmt.Errorf("TopicRecordNameStrategy needs a topic (%q) and a record name (%q): %w", topic, recordName, ErrInvalidConfig)
	}
	return topic + "-" + recordName, nil
}
