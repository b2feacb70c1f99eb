package tracing_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/tracing"
)

func TestExportFromEnv(t *testing.T) {
	for _, c := range []struct {
		env      map[string]string
		enabled  bool
		err      bool
		protocol string
	}{
		{env: nil, enabled: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"}, enabled: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://jaeger:4318/v1/traces"}, enabled: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, enabled: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, enabled: false},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, enabled: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true, protocol: "grpc"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true, protocol: "http/protobuf"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, enabled: true},
	} {
		cfg, err := tracing.ExportFromEnv(func(k string) string { return c.env[k] })
		if c.err {
			if !errors.Is(err, tracing.ErrUnsupportedExporter) {
				t.Errorf("%v: err %v, want ErrUnsupportedExporter", c.env, err)
			}
			continue
		}
		if err != nil || cfg.Enabled != c.enabled || cfg.Reason == "" {
			t.Errorf("%v: %+v, %v; want enabled=%t with a reason", c.env, cfg, err, c.enabled)
		}
		if c.protocol != "" && cfg.Protocol != c.protocol {
			t.Errorf("%v: protocol %q, want %q", c.env, cfg.Protocol, c.protocol)
		}
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, spans go over OTLP/HTTP to it.
func TestProviderFromEnvExportsOverOTLP(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var bodies int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path+" "+r.Header.Get("Content-Type"))
		if len(b) > 0 {
			bodies++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_SERVICE_NAME", "sluice-test")
	ctx := context.Background()
	tp, shutdown, err := tracing.ProviderFromEnv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tracing.New(tp).ObserveCheckpoint("j", checkpoint.Stats{ID: 1, Status: checkpoint.StatusCompleted,
		TriggerTime: now, EndTime: now.Add(time.Millisecond)})
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) == 0 || paths[0] != "/v1/traces application/x-protobuf" || bodies == 0 {
		t.Fatalf("OTLP requests %v (%d with a body), want a POST to /v1/traces", paths, bodies)
	}
}

// Without configuration nothing is exported.
func TestProviderFromEnvDisabled(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	tp, shutdown, err := tracing.ProviderFromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	_, span := tp.Tracer("x").Start(context.Background(), "s")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("the unconfigured provider records spans")
	}
}

// otlpReceiver is an OTLP/gRPC trace receiver in the test process.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.names = append(r.names, sp.GetName())
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func startReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	recv := &otlpReceiver{}
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, recv)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return recv, ln.Addr().String()
}

func exportOne(t *testing.T, tp trace.TracerProvider, shutdown func(context.Context) error) {
	t.Helper()
	now := time.Now()
	tracing.New(tp).ObserveCheckpoint("j", checkpoint.Stats{ID: 1, Status: checkpoint.StatusCompleted,
		TriggerTime: now, EndTime: now.Add(time.Millisecond)})
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends the spans over OTLP/gRPC
// (autoexport), to a receiver in the test.
func TestProviderFromEnvExportsOverGRPC(t *testing.T) {
	recv, addr := startReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	tp, shutdown, cfg, err := tracing.Provider(context.Background(), tracing.Settings{})
	if err != nil || cfg.Protocol != "grpc" {
		t.Fatalf("provider: %+v, %v", cfg, err)
	}
	exportOne(t, tp, shutdown)
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.names) == 0 || recv.names[0] != "Checkpoint" {
		t.Fatalf("the receiver got spans %v, want the checkpoint's", recv.names)
	}
}

// Flink's keys (traces.reporter.otel.exporter.endpoint, protocol gRPC)
// export without any OTEL_* variable.
func TestProviderFromFlinkKeys(t *testing.T) {
	recv, addr := startReceiver(t)
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		t.Setenv(k, "")
	}
	tp, shutdown, cfg, err := tracing.Provider(context.Background(), tracing.Settings{Endpoint: "http://" + addr, Protocol: "grpc", Timeout: 5 * time.Second})
	if err != nil || !cfg.Enabled {
		t.Fatalf("provider: %+v, %v", cfg, err)
	}
	exportOne(t, tp, shutdown)
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.names) == 0 {
		t.Fatal("the receiver got no span")
	}
}
