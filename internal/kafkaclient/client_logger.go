package kafkaclient

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// WithJobLogger returns the configuration for one writer, committer or
// reader of a job: the connector's own Logger when it was given one, else
// job (the job's logger, from the runtime's contexts), else slog.Default()
// as Log has it. The copy shares the user's options.
func (c *Config) WithJobLogger(job *slog.Logger) *Config {
	cp := *c
	if job != nil && (c.Logger == nil || isDefault(c.Logger)) {
		cp.Logger = job
	}
	return &cp
}

// clientLogger is the kgo.Logger of every client the connectors make: the
// client's lines go to the connector's logger with component=kafka-client
// and client=<kind>. franz-go logs its routine at INFO (connections,
// producer ids, transactions): that is DEBUG here. Its warnings and errors
// about an error Kafka calls retriable (a broker restarting, a coordinator
// moving) are DEBUG too, since the connectors retry and report such a
// failover once at INFO (Retry, the broker watch); the other warnings and
// errors keep their level.
type clientLogger struct{ l *slog.Logger }

func newClientLogger(l *slog.Logger, kind string) *clientLogger {
	return &clientLogger{l: l.With("component", "kafka-client", "client", kind)}
}

// Level is the most detailed level franz-go should log at.
func (c *clientLogger) Level() kgo.LogLevel {
	switch ctx := context.Background(); {
	case c.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelDebug
	case c.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	case c.l.Enabled(ctx, slog.LevelError):
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

// Log logs one franz-go line at the level the type's comment says.
func (c *clientLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelDebug
	switch level {
	case kgo.LogLevelError, kgo.LogLevelWarn:
		l = slog.LevelWarn
		if level == kgo.LogLevelError {
			l = slog.LevelError
		}
		for i := 1; i < len(keyvals); i += 2 {
			if err, ok := keyvals[i].(error); ok && (Retriable(err) || errors.Is(err, context.Canceled)) {
				l = slog.LevelDebug
			}
		}
		// "abandoning InitProducerID retry due to request ctx
		// quitting": the connector cancelled the call (a failover).
		if strings.HasPrefix(msg, "abandoning ") {
			l = slog.LevelDebug
		}
	}
	c.l.Log(context.Background(), l, msg, keyvals...)
}
