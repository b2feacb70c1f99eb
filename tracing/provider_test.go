package tracing_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/tracing"
)

func TestExportFromEnv(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		enabled bool
		err     bool
	}{
		{env: nil, enabled: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"}, enabled: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://jaeger:4318/v1/traces"}, enabled: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, enabled: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, enabled: false},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, enabled: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true},
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
	tracing.New(tp).ObserveCheckpoint("j", checkpoint.CheckpointStats{ID: 1, Status: checkpoint.StatusCompleted,
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
