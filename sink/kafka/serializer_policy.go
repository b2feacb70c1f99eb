package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/source"
)

// Headers of a dead-letter copy written under the DeadLetterTopic policy,
// besides the headers the serializer made.
const (
	// HeaderError is the serializer's error.
	HeaderError = "sluice.error"
	// HeaderSinkTopic is the topic the record was meant for, when the
	// serializer got that far.
	HeaderSinkTopic = "sluice.sink.topic"
	// HeaderSinkSubtask is the index of the writer's subtask.
	HeaderSinkSubtask = "sluice.sink.subtask"
	// HeaderValueFormat says what the copy's value is: "serialized" (what
	// the serializer made) or "fmt" (the value printed with fmt's %v).
	HeaderValueFormat = "sluice.sink.value-format"
)

// maxValueInError bounds the value printed in an error or a log line.
const maxValueInError = 200

// maxDeadLetterFmtValue bounds the %v of a value written to the
// dead-letter topic, well below Kafka's default message size limit.
const maxDeadLetterFmtValue = 256 << 10

// serialize runs the serializer; a panic or a missing record becomes an
// error. On an error the record returned is what the serializer made, if
// anything.
func (s *Sink[T]) serialize(v T) (r *kgo.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("serializer panicked: %v", p)
		}
	}()
	r, err = s.ser(v)
	if err == nil && r == nil {
		err = errors.New("serializer returned no record")
	}
	return r, err
}

// record returns what a writer produces for v: its record, stamped with
// ts when the serializer left the timestamp unset; or, when the
// serializer refused v, what the sink's policy says: an error
// (FailOnSerializerError), nothing (SkipSerializerErrors: nil, nil) or the
// dead-letter copy (DeadLetterTopic).
func (s *Sink[T]) record(v T, ts int64, subtask int, log *slog.Logger) (*kgo.Record, error) {
	r, err := s.serialize(v)
	if err == nil {
		if r.Timestamp.IsZero() && ts != source.NoTimestamp {
			r.Timestamp = time.UnixMilli(ts)
		}
		return r, nil
	}
	p := s.cfg.serPolicy
	switch p.kind {
	case policySkip:
		s.cfg.stats.of(subtask).skip()
		log.Warn("kafka sink: skipped a record the serializer refused", "value", truncatedValue(v), "err", err)
		return nil, nil
	case policyDeadLetter:
		s.cfg.stats.of(subtask).deadLetter()
		dl := deadLetterRecord(p.topic, v, ts, subtask, r, err)
		log.Warn("kafka sink: wrote a record the serializer refused to the dead-letter topic", "dead_letter_topic", p.topic,
			"value_format", string(headerValue(dl, HeaderValueFormat)), "value", truncatedValue(v), "err", err)
		return dl, nil
	}
	return nil, fmt.Errorf("%s subtask %d: record with value %q (event time %s): %w: %w",
		s.describe(), subtask, truncatedValue(v), describeTimestamp(ts), err, ErrSerialize)
}

// describe names the sink in errors.
func (s *Sink[T]) describe() string {
	if s.cfg.guarantee == ExactlyOnce {
		return fmt.Sprintf("kafka sink (%v, transactional id prefix %s)", s.cfg.guarantee, s.cfg.prefix)
	}
	return fmt.Sprintf("kafka sink (%v)", s.cfg.guarantee)
}

func describeTimestamp(ts int64) string {
	if ts == source.NoTimestamp {
		return "none"
	}
	return strconv.FormatInt(ts, 10)
}

// deadLetterRecord is the copy of a refused value for the dead-letter
// topic: the key and value the serializer made, if it got that far, else
// the value printed with %v.
func deadLetterRecord[T any](topic string, v T, ts int64, subtask int, partial *kgo.Record, cause error) *kgo.Record {
	dl := &kgo.Record{Topic: topic}
	format := "fmt"
	if partial != nil {
		dl.Key = partial.Key
		dl.Headers = append(dl.Headers, partial.Headers...)
		if partial.Value != nil {
			dl.Value, format = partial.Value, "serialized"
		}
		if partial.Topic != "" {
			dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderSinkTopic, Value: []byte(partial.Topic)})
		}
		dl.Timestamp = partial.Timestamp
	}
	if format == "fmt" {
		dl.Value = []byte(truncate(fmt.Sprintf("%v", v), maxDeadLetterFmtValue))
	}
	if dl.Timestamp.IsZero() && ts != source.NoTimestamp {
		dl.Timestamp = time.UnixMilli(ts)
	}
	dl.Headers = append(dl.Headers,
		kgo.RecordHeader{Key: HeaderError, Value: []byte(cause.Error())},
		kgo.RecordHeader{Key: HeaderSinkSubtask, Value: []byte(strconv.Itoa(subtask))},
		kgo.RecordHeader{Key: HeaderValueFormat, Value: []byte(format)},
	)
	return dl
}

func headerValue(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

// truncatedValue prints v with %v, cut to maxValueInError bytes.
func truncatedValue[T any](v T) string {
	return truncate(fmt.Sprintf("%v", v), maxValueInError)
}

// truncate cuts s to at most n bytes at a rune boundary, saying how long
// it was.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... (%d bytes in all)", len(s))
}
