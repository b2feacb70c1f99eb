package network_test

import (
	"context"
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testcerts"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/runtime/network"
)

// BenchmarkExchange measures one producer goroutine sending b.N records to
// one consumer goroutine through a partition and a gate with the default
// configuration, wired in process. One op is one record; allocs/op must
// be 0.
func BenchmarkExchange(b *testing.B) {
	for _, bc := range exchangeCases {
		b.Run(bc.name, func(b *testing.B) { benchExchange(b, bc.size, bc.flushEach, inProcess) })
	}
}

// BenchmarkExchangeTCP is BenchmarkExchange with the partition and the
// gate on two transports, over loopback TCP. Its allocs/op must be 0 too.
func BenchmarkExchangeTCP(b *testing.B) {
	for _, bc := range exchangeCases {
		b.Run(bc.name, func(b *testing.B) {
			prod := newTransport(b, network.TransportConfig{})
			cons := newTransport(b, network.TransportConfig{})
			benchExchange(b, bc.size, bc.flushEach, overTCP(prod, cons, ""))
		})
	}
}

// BenchmarkExchangeTCPAuth is BenchmarkExchangeTCP with the connection
// authenticated and encrypted: mutual TLS (peerauth, TLS 1.3) and the
// shared secret (TLS with a certificate made at start, and the
// challenge-response). Compare its records/s and cpu-ns/record with
// BenchmarkExchangeTCP's:
//
//	go test -run '^$' -bench 'ExchangeTCP' -benchtime 3s -count 3 ./runtime/network/
func BenchmarkExchangeTCPAuth(b *testing.B) {
	ca := testcerts.NewTestCA(b, "bench CA")
	mtls := func(cn string) *peerauth.Authenticator {
		cert, key := ca.MustIssue(b, cn).Files(b)
		a, err := peerauth.New(peerauth.Config{TLS: true, CertFile: cert, KeyFile: key, TrustFile: ca.File(b)})
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	secret, err := peerauth.New(peerauth.Config{Secret: []byte("a benchmark's shared secret")})
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name       string
		prod, cons *peerauth.Authenticator
	}{{"mTLS", mtls("producer"), mtls("consumer")}, {"secret", secret, secret}} {
		for _, bc := range exchangeCases {
			b.Run(mode.name+"/"+bc.name, func(b *testing.B) {
				prod := newTransport(b, network.TransportConfig{Auth: mode.prod})
				cons := newTransport(b, network.TransportConfig{Auth: mode.cons})
				benchExchange(b, bc.size, bc.flushEach, overTCP(prod, cons, ""))
			})
		}
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var exchangeCases = []struct {
	name      string
	size      int
	flushEach bool // buffer timeout 0: flush after every record
}{
	{"int64", 8, false},
	{"100B", 100, false},
	{"int64-flush-every-record", 8, true},
}

func benchExchange(b *testing.B, size int, flushEach bool, wire wiring) {
	cfg := network.DefaultConfig()
	wake := make(chan struct{}, 1)
	p := network.NewResultPartition("p", 1, cfg, nil)
	g := network.NewInputGate("g", 1, cfg, wake)
	wire(b, p, 0, g, 0)
	defer g.Release()
	n := b.N
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	errc := make(chan error, 1)
	go func() {
		rec := make([]byte, size)
		ctx := context.Background()
		for i := range n {
			binary.BigEndian.PutUint64(rec, uint64(i))
			if err := p.WriteRecord(ctx, 0, rec); err != nil {
				errc <- err
				return
			}
			if flushEach {
				p.Flush(0)
			}
		}
		errc <- p.Finish()
	}()
	r := network.NewRecordReader()
	got := 0
	for !g.Finished() {
		boe, ok := g.Poll()
		if !ok {
			<-wake
			continue
		}
		if boe.Buffer == nil {
			continue
		}
		r.Feed(boe.Buffer)
		for {
			rec, ok := r.Next()
			if !ok {
				break
			}
			if binary.BigEndian.Uint64(rec) != uint64(got) {
				b.Fatalf("record %d out of order", got)
			}
			got++
		}
	}
	elapsed, cpuUsed := time.Since(start), cpuTime()-cpu
	b.StopTimer()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	if got != n {
		b.Fatalf("received %d records, want %d", got, n)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
	// The process's CPU (both ends, the harness included) per record.
	b.ReportMetric(float64(cpuUsed.Nanoseconds())/float64(n), "cpu-ns/record")
}
