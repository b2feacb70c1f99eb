package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// EncodeFunc appends the body of v (everything after the schema id) to dst.
type EncodeFunc[T any] func(dst []byte, v T) ([]byte, error)

// DecodeFunc decodes a body (everything after the schema id). It must not
// retain body.
type DecodeFunc[T any] func(body []byte) (T, error)

// Format is what a format package gives a Serde: its local schema and how
// to write and read bodies for a given writer schema. The format packages
// (formats/avro, formats/protobuf, formats/jsonschema) implement it.
type Format[T any] interface {
	// Schema is the local schema: the one registered (or looked up) under
	// the subject, and the reader schema of decodes.
	Schema() sr.Schema
	// RecordName is the schema's fully qualified record name, "" if none.
	RecordName() string
	// Encoder writes values as writer schema w, which is the local schema
	// unless the serde uses the subject's latest version.
	Encoder(w sr.Schema) (EncodeFunc[T], error)
	// Decoder reads bodies written with writer schema w (c resolves its
	// references). An error wrapping ErrSchemaMismatch says the local
	// type cannot read them.
	Decoder(ctx context.Context, c *Client, w sr.Schema) (DecodeFunc[T], error)
}

// Referencer is implemented by a Format whose schema references others
// (Protobuf imports): before the local schema is first registered or
// looked up, References registers the referenced schemas (or, with
// auto-registration off, looks them up: register false) and returns them
// as the local schema's references.
type Referencer interface {
	References(ctx context.Context, c *Client, register bool) ([]sr.SchemaReference, error)
}

type serdeConfig struct {
	topic    string
	strategy SubjectNameStrategy
	subject  string
	register bool
	latest   bool
	key      bool
}

// SerdeOption configures a Serde.
type SerdeOption func(*serdeConfig)

// Topic sets the topic that Append and Decode (the serde as a codec for
// state and shuffles) and Serializer without a topic name the subject by.
func Topic(name string) SerdeOption { return func(c *serdeConfig) { c.topic = name } }

// SubjectStrategy sets how subjects are named (default TopicNameStrategy).
func SubjectStrategy(s SubjectNameStrategy) SerdeOption {
	return func(c *serdeConfig) { c.strategy = s }
}

// Subject fixes the subject, whatever the topic and strategy.
func Subject(name string) SerdeOption { return func(c *serdeConfig) { c.subject = name } }

// AutoRegister says whether encoding registers the local schema under its
// subject (true, the default, as Confluent's auto.register.schemas) or only
// looks it up and fails with ErrNotRegistered when it is not there.
func AutoRegister(on bool) SerdeOption { return func(c *serdeConfig) { c.register = on } }

// UseLatest makes encoding write with the subject's latest version
// (Confluent's use.latest.version), looked up once per subject; the local
// schema is then never registered.
func UseLatest() SerdeOption { return func(c *serdeConfig) { c.latest = true } }

// Key makes the serde one for record keys: subjects end in "-key" under
// TopicNameStrategy, and Decoder decodes the record's key.
func Key() SerdeOption { return func(c *serdeConfig) { c.key = true } }

// writer is the resolved writer schema of one topic.
type writer[T any] struct {
	subject string
	id      int
	version int
	enc     EncodeFunc[T]
}

// reader decodes the records of one writer schema id.
type reader[T any] struct {
	dec DecodeFunc[T]
}

// Serde writes and reads values of type T in the Confluent wire format
// with a format's schemas. It is safe for concurrent use. Its Append and
// Decode make it a codec.Codec[T]; Decoder and Serializer give the Kafka
// source's and sink's function types.
type Serde[T any] struct {
	c   *Client
	f   Format[T]
	cfg serdeConfig
	// local is the writer of the configured topic, once resolved.
	local atomic.Pointer[writer[T]]

	mu      sync.RWMutex
	writers map[string]*writer[T] // by topic
	readers map[int]*reader[T]    // by schema id
}

// NewSerde makes a serde of format f on the registry client c. Formats
// wrap it in their own constructors (avro.New, protobuf.New,
// jsonschema.New).
func NewSerde[T any](c *Client, f Format[T], opts ...SerdeOption) (*Serde[T], error) {
	if c == nil {
		return nil, fmt.Errorf("nil registry client: %w", ErrInvalidConfig)
	}
	cfg := serdeConfig{strategy: TopicNameStrategy, register: true}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.strategy == nil {
		return nil, fmt.Errorf("nil subject name strategy: %w", ErrInvalidConfig)
	}
	return &Serde[T]{c: c, f: f, cfg: cfg, writers: map[string]*writer[T]{}, readers: map[int]*reader[T]{}}, nil
}

// Client is the registry client of the serde.
func (s *Serde[T]) Client() *Client { return s.c }

// Subject names the subject values written to topic go under.
func (s *Serde[T]) Subject(topic string) (string, error) {
	if s.cfg.subject != "" {
		return s.cfg.subject, nil
	}
	return s.cfg.strategy(topic, s.f.RecordName(), s.cfg.key)
}

// writerFor resolves (once per topic) the writer schema of topic.
func (s *Serde[T]) writerFor(ctx context.Context, topic string) (*writer[T], error) {
	s.mu.RLock()
	w := s.writers[topic]
	s.mu.RUnlock()
	if w != nil {
		return w, nil
	}
	subject, err := s.Subject(topic)
	if err != nil {
		return nil, &SchemaError{Op: "encode", Err: err}
	}
	mode := modeRegister
	switch {
	case s.cfg.latest:
		mode = modeLatest
	case !s.cfg.register:
		mode = modeLookup
	}
	local := s.f.Schema()
	if r, ok := s.f.(Referencer); ok && mode != modeLatest {
		refs, err := r.References(ctx, s.c, mode == modeRegister)
		if err != nil {
			return nil, &SchemaError{Op: "encode", Subject: subject, Err: fmt.Errorf("the schema's references: %w", err)}
		}
		local.References = refs
	}
	ss, err := s.c.resolve(ctx, subject, local, mode)
	if err != nil {
		return nil, err
	}
	if ss.Type != s.f.Schema().Type {
		return nil, &SchemaError{Op: "encode", Subject: subject, Version: ss.Version, ID: ss.ID,
			Err: fmt.Errorf("%w: the subject's schema is %v, the serde writes %v", ErrSchemaMismatch, ss.Type, s.f.Schema().Type)}
	}
	enc, err := s.f.Encoder(ss.Schema)
	if err != nil {
		return nil, &SchemaError{Op: "encode", Subject: subject, Version: ss.Version, ID: ss.ID, Err: err}
	}
	w = &writer[T]{subject: subject, id: ss.ID, version: ss.Version, enc: enc}
	s.mu.Lock()
	if have := s.writers[topic]; have != nil {
		w = have
	} else {
		s.writers[topic] = w
	}
	s.mu.Unlock()
	return w, nil
}

// AppendTo appends the wire-format encoding of v, as written to topic, to
// dst.
func (s *Serde[T]) AppendTo(dst []byte, topic string, v T) ([]byte, error) {
	w, err := s.writerFor(context.Background(), topic)
	if err != nil {
		return dst, err
	}
	return s.encode(dst, w, v)
}

func (s *Serde[T]) encode(dst []byte, w *writer[T], v T) ([]byte, error) {
	n := len(dst)
	out, err := w.enc(AppendHeader(dst, w.id), v)
	if err != nil {
		return dst[:n], &SchemaError{Op: "encode", Subject: w.subject, Version: w.version, ID: w.id,
			Err: fmt.Errorf("%w: %T: %w", ErrEncode, v, err)}
	}
	return out, nil
}

// Append appends the wire-format encoding of v under the configured
// topic's subject (codec.Codec).
func (s *Serde[T]) Append(dst []byte, v T) ([]byte, error) {
	w := s.local.Load()
	if w == nil {
		var err error
		if w, err = s.writerFor(context.Background(), s.cfg.topic); err != nil {
			return dst, err
		}
		s.local.Store(w)
	}
	return s.encode(dst, w, v)
}

// readerFor returns (once per id) the decoder of writer schema id.
func (s *Serde[T]) readerFor(ctx context.Context, id int) (*reader[T], error) {
	s.mu.RLock()
	r := s.readers[id]
	s.mu.RUnlock()
	if r != nil {
		return r, nil
	}
	w, err := s.c.SchemaByID(ctx, id)
	if err != nil {
		return nil, err
	}
	var dec DecodeFunc[T]
	if w.Type != s.f.Schema().Type {
		err = fmt.Errorf("%w: the record's schema is %v, the serde reads %v", ErrSchemaMismatch, w.Type, s.f.Schema().Type)
	} else {
		dec, err = s.f.Decoder(ctx, s.c, w)
	}
	if err != nil {
		subject, version := s.c.Usage(ctx, id)
		// A mismatch is the record's fault: not cached, so that it is
		// reported for each such record, and cheap to find again.
		return nil, &SchemaError{Op: "decode", Subject: subject, Version: version, ID: id, Err: err}
	}
	r = &reader[T]{dec: dec}
	s.mu.Lock()
	if have := s.readers[id]; have != nil {
		r = have
	} else {
		s.readers[id] = r
	}
	s.mu.Unlock()
	return r, nil
}

// Decode decodes one wire-format value with the schema its id names
// (codec.Codec). A schema id the registry does not know gives an error
// wrapping ErrUnknownSchema.
func (s *Serde[T]) Decode(src []byte) (T, error) {
	var zero T
	id, body, err := ReadHeader(src)
	if err != nil {
		return zero, &SchemaError{Op: "decode", Err: err}
	}
	r, err := s.readerFor(context.Background(), id)
	if err != nil {
		return zero, err
	}
	v, err := r.dec(body)
	if err != nil {
		subject, version := s.c.Usage(context.Background(), id)
		if !errors.Is(err, ErrSchemaMismatch) && !errors.Is(err, ErrBadWireFormat) {
			err = fmt.Errorf("%w: %w", ErrDecode, err)
		}
		return zero, &SchemaError{Op: "decode", Subject: subject, Version: version, ID: id, Err: err}
	}
	return v, nil
}

// Decoder is the Kafka source's decoder (source/kafka.Decoder[T]): it
// decodes the record's value (its key with the Key option). Its errors,
// ErrUnknownSchema among them, make the record a bad record, handled by
// the source's BadRecordPolicy.
func (s *Serde[T]) Decoder() func(*kgo.Record) (T, error) {
	if s.cfg.key {
		return func(r *kgo.Record) (T, error) { return s.Decode(r.Key) }
	}
	return func(r *kgo.Record) (T, error) { return s.Decode(r.Value) }
}

// Serializer is a Kafka sink serializer (sink/kafka.Serializer[T]) writing
// each value to topic, encoded under topic's subject, with the key key(v)
// (no key when key is nil).
func (s *Serde[T]) Serializer(topic string, key func(T) []byte) func(T) (*kgo.Record, error) {
	return func(v T) (*kgo.Record, error) {
		b, err := s.AppendTo(nil, topic, v)
		if err != nil {
			return nil, fmt.Errorf("topic %s: %w", topic, err)
		}
		r := &kgo.Record{Topic: topic, Value: b}
		if key != nil {
			r.Key = key(v)
		}
		return r, nil
	}
}

// KeyValueSerializer is a Kafka sink serializer writing each value v to
// topic with the key keyOf(v) encoded by keys (a serde made with the Key
// option) and the value encoded by values.
func KeyValueSerializer[T, K any](topic string, keys *Serde[K], keyOf func(T) K, values *Serde[T]) func(T) (*kgo.Record, error) {
	return func(v T) (*kgo.Record, error) {
		k, err := keys.AppendTo(nil, topic, keyOf(v))
		if err != nil {
			return nil, fmt.Errorf("topic %s key: %w", topic, err)
		}
		b, err := values.AppendTo(nil, topic, v)
		if err != nil {
			return nil, fmt.Errorf("topic %s value: %w", topic, err)
		}
		return &kgo.Record{Topic: topic, Key: k, Value: b}, nil
	}
}
