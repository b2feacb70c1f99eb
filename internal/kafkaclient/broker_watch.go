package kafkaclient

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerWatch is a franz-go hook that every client the connectors make
// carries (OptsFor adds it). It remembers which broker each kind of
// request of its client went to last, so that an error can name the
// broker (BrokerOf), and it reports a broker lost, when a connection to
// it cannot be made, and back, when one can again: once per broker and
// event in the process, however many clients see it, at INFO.
type brokerWatch struct {
	log *slog.Logger

	mu     sync.Mutex
	byKey  map[int16]kgo.BrokerMetadata  // the broker of each request key's last request
	byAddr map[string]kgo.BrokerMetadata // every broker dialled, by host:port
	// answered says a broker answered a request of this client: its TLS
	// and SASL settings are right, so a connection closed before its
	// first answer is a broker going away, not a misconfiguration.
	answered bool
}

var (
	_ kgo.HookBrokerConnect = (*brokerWatch)(nil)
	_ kgo.HookBrokerE2E     = (*brokerWatch)(nil)
)

func newBrokerWatch(log *slog.Logger) *brokerWatch {
	return &brokerWatch{log: log, byKey: map[int16]kgo.BrokerMetadata{}, byAddr: map[string]kgo.BrokerMetadata{}}
}

func addrOf(meta kgo.BrokerMetadata) string {
	return net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
}

// describeBroker names a broker as logs and errors do: "broker 2 at
// 127.0.0.1:9092", or "seed broker 127.0.0.1:9092" before the client has
// learnt the node ids.
func describeBroker(meta kgo.BrokerMetadata) string {
	if meta.NodeID < 0 {
		return "seed broker " + addrOf(meta)
	}
	return fmt.Sprintf("broker %d at %s", meta.NodeID, addrOf(meta))
}

// OnBrokerConnect notes the broker and reports it lost or back.
func (w *brokerWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	addr := addrOf(meta)
	w.mu.Lock()
	if old, ok := w.byAddr[addr]; !ok || meta.NodeID >= 0 || old.NodeID < 0 {
		w.byAddr[addr] = meta
	}
	w.mu.Unlock()
	switch {
	case err == nil:
		brokersDown.back(w.log, meta)
	case Retriable(err):
		brokersDown.lost(w.log, meta, Cause(err))
	}
}

// OnBrokerE2E notes the broker a request went to, and that it answered.
func (w *brokerWatch) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	w.mu.Lock()
	w.byKey[key] = meta
	if e2e.Err() == nil {
		w.answered = true
	}
	w.mu.Unlock()
}

// answeredBefore says whether a broker answered a request of cl (made by
// a Config) before.
func answeredBefore(cl *kgo.Client) bool {
	if cl == nil {
		return false
	}
	if hooks, ok := cl.OptValue(kgo.WithHooks).([]kgo.Hook); ok {
		for _, h := range hooks {
			if w, ok := h.(*brokerWatch); ok {
				w.mu.Lock()
				defer w.mu.Unlock()
				return w.answered
			}
		}
	}
	return false
}

// describe names the broker that err came from: the one dialled when err
// is a network error naming an address, else the one key's last request
// went to; "" when not known.
func (w *brokerWatch) describe(key int16, err error) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ne := (*net.OpError)(nil); errors.As(err, &ne) && ne.Addr != nil {
		if meta, ok := w.byAddr[ne.Addr.String()]; ok {
			return describeBroker(meta)
		}
		return "broker at " + ne.Addr.String()
	}
	if meta, ok := w.byKey[key]; ok && key >= 0 {
		return describeBroker(meta)
	}
	return ""
}

// BrokerOf names the broker that a call through cl of request key key
// (-1 when not known) went to last, for an error: "broker 2 at
// 127.0.0.1:9092"; "" when cl was not made by a Config or the broker is
// not known.
func BrokerOf(cl *kgo.Client, key int16, err error) string {
	if cl != nil {
		if hooks, ok := cl.OptValue(kgo.WithHooks).([]kgo.Hook); ok {
			for _, h := range hooks {
				if w, ok := h.(*brokerWatch); ok {
					return w.describe(key, err)
				}
			}
		}
	}
	if ne := (*net.OpError)(nil); errors.As(err, &ne) && ne.Addr != nil {
		return "broker at " + ne.Addr.String()
	}
	return ""
}

// brokersDown is the process's view of which brokers cannot be reached,
// so that a broker lost is reported once however many clients dial it.
var brokersDown = &downBrokers{m: map[string]downBroker{}}

type downBrokers struct {
	mu sync.Mutex
	m  map[string]downBroker // by host:port
}

type downBroker struct {
	since time.Time
	cause string
	name  string // as the lost line named it
}

func (d *downBrokers) lost(log *slog.Logger, meta kgo.BrokerMetadata, cause string) {
	addr := addrOf(meta)
	d.mu.Lock()
	_, already := d.m[addr]
	if !already {
		d.m[addr] = downBroker{since: time.Now(), cause: cause, name: describeBroker(meta)}
	}
	d.mu.Unlock()
	if !already && log != nil {
		log.Info("kafka: "+describeBroker(meta)+" unreachable: "+cause+"; requests to it are retried", "broker", addr)
	}
}

func (d *downBrokers) back(log *slog.Logger, meta kgo.BrokerMetadata) {
	addr := addrOf(meta)
	d.mu.Lock()
	b, was := d.m[addr]
	delete(d.m, addr)
	d.mu.Unlock()
	if was && log != nil {
		name := describeBroker(meta)
		if meta.NodeID < 0 {
			name = b.name // a seed connection: the lost line may know its id
		}
		log.Info("kafka: "+name+" reachable again", "broker", addr,
			"down_for", time.Since(b.since).Round(100*time.Millisecond), "cause", b.cause)
	}
}
