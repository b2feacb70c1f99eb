package kafkaclient

import (
	"log/slog"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ClientInfo describes a client a connector is about to make, for the
// hooks.
type ClientInfo struct {
	// Kind says what the client is for: "source-admin" (metadata and
	// offsets of the Kafka source), "source-consumer", "dead-letter",
	// "sink-producer", "sink-admin", "sink-transactional-producer",
	// "sink-committer", "sink-marker-reader".
	Kind string
	// Logger is the connector's own logger (its Logger option); nil when
	// none was set (the connector logs through slog.Default()).
	Logger *slog.Logger
}

// ClientHook returns options for a new client (franz-go hooks such as
// kprom's metrics, a kgo.WithLogger). They come before the user's options,
// which win where an option replaces (kgo.WithLogger); kgo.WithHooks adds.
type ClientHook func(ClientInfo) []kgo.Opt

var (
	hooksMu sync.Mutex
	hooks   = map[int]ClientHook{}
	nextID  int
)

// AddClientHook has every client Sluice's Kafka connectors make from now
// on built with h's options, in this process, until remove is called: the
// job runner installs franz-go's client metrics (kprom) with it, so no
// connector needs naming.
func AddClientHook(h ClientHook) (remove func()) {
	hooksMu.Lock()
	defer hooksMu.Unlock()
	id := nextID
	nextID++
	hooks[id] = h
	return func() {
		hooksMu.Lock()
		defer hooksMu.Unlock()
		delete(hooks, id)
	}
}

func hookOpts(info ClientInfo) []kgo.Opt {
	hooksMu.Lock()
	ids := make([]int, 0, len(hooks))
	for id := range hooks {
		ids = append(ids, id)
	}
	hs := make([]ClientHook, 0, len(ids))
	slices.Sort(ids)
	for _, id := range ids {
		hs = append(hs, hooks[id])
	}
	hooksMu.Unlock()
	var opts []kgo.Opt
	for _, h := range hs {
		opts = append(opts, h(info)...)
	}
	return opts
}

// NewClient makes a client of the given kind (see ClientInfo.Kind): the
// hooks' options, then the user's, the seed brokers and extra (the
// connector's own, which win).
func (c *Config) NewClient(kind string, extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(c.OptsFor(kind, extra...)...)
}

// OptsFor returns the options NewClient makes a client of that kind from:
// the client logs through the connector's logger (see clientLogger) and
// carries the broker watch (see BrokerOf), then come the hooks' options
// and the user's, which may replace the logger.
func (c *Config) OptsFor(kind string, extra ...kgo.Opt) []kgo.Opt {
	info := ClientInfo{Kind: kind, Logger: c.Logger}
	if info.Logger != nil && isDefault(info.Logger) {
		info.Logger = nil
	}
	log := c.Log()
	opts := []kgo.Opt{kgo.WithLogger(newClientLogger(log, kind)), kgo.WithHooks(newBrokerWatch(log))}
	opts = append(opts, hookOpts(info)...)
	return append(opts, c.Opts(extra...)...)
}
