package kafka

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/sluicehq/sluice/formats/avro"
	"github.com/sluicehq/sluice/formats/registry"
	"github.com/sluicehq/sluice/source"
)

type avroCount struct {
	N int64 `avro:"n"`
}

// A record whose schema id the registry does not know is a bad record
// for the source's policy, like any decoder error: it fails the reader
// under the default policy, naming the record and the id, and is skipped
// (and counted) under SkipBadRecords.
func TestUnknownSchemaIDIsABadRecord(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	c, err := registry.NewClient(reg.URL())
	if err != nil {
		t.Fatal(err)
	}
	serde, err := avro.New[avroCount](c, `{"type":"record","name":"Count","fields":[{"name":"n","type":"long"}]}`, registry.Topic("in"))
	if err != nil {
		t.Fatal(err)
	}
	rec := func(n int64) *kgo.Record {
		b, err := serde.Append(nil, avroCount{N: n})
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Value: b}
	}
	unknown := &kgo.Record{Value: append(registry.AppendHeader(nil, 999), 2)} // offset 1
	e := newEnv(t, 1, "in")
	e.produceRecords(rec(1), unknown, rec(2))

	newReader := func(opts ...Option) *Reader[avroCount] {
		s, err := NewSource(e.seeds, Topics("in"), serde.Decoder(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.NewReader(source.ReaderContext{Subtask: 0, Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r.(*Reader[avroCount])
	}

	_, err = pollUntil(t, newReader(), &fakeOutput[avroCount]{}, func() bool { return false })
	if !errors.Is(err, ErrBadRecord) || !errors.Is(err, registry.ErrUnknownSchema) ||
		!strings.Contains(err.Error(), "offset 1") || !strings.Contains(err.Error(), "schema id 999") {
		t.Fatalf("err %v; want ErrBadRecord and ErrUnknownSchema naming offset 1 and schema id 999", err)
	}

	r := newReader(OnBadRecord(SkipBadRecords()))
	out := &fakeOutput[avroCount]{}
	if _, err := pollUntil(t, r, out, func() bool { return len(out.values) == 2 }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out.values) != "[{1} {2}]" || r.SkippedRecords() != 1 {
		t.Fatalf("emitted %v, skipped %d; want [{1} {2}] and 1 skipped", out.values, r.SkippedRecords())
	}
}

// A registry that cannot be reached is not the record's fault: the reader
// fails even under SkipBadRecords (the restart reads the record again),
// and skips nothing.
func TestRegistryOutageIsNotABadRecord(t *testing.T) {
	reg := srfake.New()
	c, err := registry.NewClient(reg.URL(), registry.LookupTimeout(200*time.Millisecond),
		registry.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	serde, err := avro.New[avroCount](c, `{"type":"record","name":"Count","fields":[{"name":"n","type":"long"}]}`, registry.Topic("in"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := serde.Append(nil, avroCount{N: 1}) // registered; the reader's serde has not read it yet
	if err != nil {
		t.Fatal(err)
	}
	reg.Close()
	cold, _ := registry.NewClient(reg.URL(), registry.LookupTimeout(200*time.Millisecond),
		registry.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	reader, _ := avro.New[avroCount](cold, `{"type":"record","name":"Count","fields":[{"name":"n","type":"long"}]}`)
	e := newEnv(t, 1, "in")
	e.produceRecords(&kgo.Record{Value: b})
	s, err := NewSource(e.seeds, Topics("in"), reader.Decoder(), OnBadRecord(SkipBadRecords()))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := s.NewReader(source.ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	r := rd.(*Reader[avroCount])
	_, err = pollUntil(t, r, &fakeOutput[avroCount]{}, func() bool { return false })
	if !errors.Is(err, registry.ErrRegistry) || errors.Is(err, ErrBadRecord) || r.SkippedRecords() != 0 {
		t.Fatalf("err %v, skipped %d; want ErrRegistry, not ErrBadRecord, nothing skipped", err, r.SkippedRecords())
	}
}
