package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ErrUnsupportedExporter is returned (wrapped) by ProviderFromEnv when the
// environment asks for an exporter or protocol this build does not have.
var ErrUnsupportedExporter = errors.New("unsupported trace exporter")

// DefaultServiceName is the service.name of the traces unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const DefaultServiceName = "sluice"

// ExportConfig says whether and how the environment asks for traces to be
// exported.
type ExportConfig struct {
	// Enabled is true when traces are to be exported over OTLP.
	Enabled bool
	// Reason says why, for a log line.
	Reason string
}

// ExportFromEnv reads the standard variables: traces are exported over
// OTLP/HTTP when OTEL_TRACES_EXPORTER is "otlp", or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// never when OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is "none".
// Unlike the OpenTelemetry default, an unset environment exports nothing.
// The OTLP protocol must be http/protobuf (the default) or http/json.
func ExportFromEnv(getenv func(string) string) (ExportConfig, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return ExportConfig{Reason: "OTEL_SDK_DISABLED=true"}, nil
	}
	var cfg ExportConfig
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "":
		for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
			if e := strings.TrimSpace(getenv(v)); e != "" {
				cfg = ExportConfig{Enabled: true, Reason: v + "=" + e}
				break
			}
		}
		if !cfg.Enabled {
			return ExportConfig{Reason: "no OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_ENDPOINT set"}, nil
		}
	case "none":
		return ExportConfig{Reason: "OTEL_TRACES_EXPORTER=none"}, nil
	case "otlp":
		cfg = ExportConfig{Enabled: true, Reason: "OTEL_TRACES_EXPORTER=otlp"}
	default:
		return ExportConfig{}, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q (this build exports otlp or none)", ErrUnsupportedExporter, exp)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		p := strings.TrimSpace(getenv(v))
		if p == "" {
			continue
		}
		if p != "http/protobuf" && p != "http/json" {
			return ExportConfig{}, fmt.Errorf("%w: %s=%q (this build speaks OTLP over HTTP: http/protobuf or http/json, port 4318)", ErrUnsupportedExporter, v, p)
		}
		break
	}
	return cfg, nil
}

// ProviderFromEnv returns the tracer provider the environment asks for
// (see ExportFromEnv) and a shutdown function that flushes and stops it.
// Without configuration it returns a provider that records nothing. The
// OTLP/HTTP exporter reads its endpoint, headers, timeout, compression and
// TLS settings from the standard variables itself.
func ProviderFromEnv(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	cfg, err := ExportFromEnv(nil)
	if err != nil {
		return nil, nil, err
	}
	if !cfg.Enabled {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(attribute.String("service.name", DefaultServiceName)),
		resource.Environment(),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}
