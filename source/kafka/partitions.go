package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/source"
)

var _ source.Partitioned = (*Source[int])(nil)

// Partitions is the number of partitions of the topics the source
// subscribes to now (source.Partitioned): the reactive mode runs the
// source at no more parallelism, since a reader beyond them would read
// nothing. A subscribed topic that does not exist is an error naming it.
func (s *Source[T]) Partitions(ctx context.Context) (int, error) {
	cl, err := s.cfg.client.NewClient("source-admin")
	if err != nil {
		return 0, fmt.Errorf("kafka source %v: partitions: new client: %w", s.cfg.sub, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var tds kadm.TopicDetails
	if s.cfg.sub.pattern != nil {
		tds, err = adm.ListTopics(ctx)
	} else {
		tds, err = adm.ListTopics(ctx, s.cfg.sub.topics...)
	}
	if err != nil {
		return 0, fmt.Errorf("kafka source %v: partitions: list topics: %w", s.cfg.sub, err)
	}
	n := 0
	for _, td := range tds.Sorted() {
		if !s.cfg.sub.matches(td.Topic) {
			continue
		}
		if td.Err != nil {
			return 0, fmt.Errorf("kafka source %v: partitions of topic %s: %w", s.cfg.sub, td.Topic, td.Err)
		}
		n += len(td.Partitions)
	}
	return n, nil
}
