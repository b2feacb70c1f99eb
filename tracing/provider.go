package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
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
	// Protocol is the OTLP protocol: grpc or http/protobuf.
	Protocol string
}

// ExportFromEnv reads the standard variables: traces are exported when
// OTEL_TRACES_EXPORTER is "otlp" or "console", or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set
// (over OTLP); never when OTEL_SDK_DISABLED is true or
// OTEL_TRACES_EXPORTER is "none". Unlike the OpenTelemetry default, an
// unset environment exports nothing. The OTLP protocol
// (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL) is
// grpc (port 4317) or http/protobuf (the default, port 4318).
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
	case "otlp", "console":
		cfg = ExportConfig{Enabled: true, Reason: "OTEL_TRACES_EXPORTER=" + exp}
	default:
		return ExportConfig{}, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q (want otlp, console or none)", ErrUnsupportedExporter, exp)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		p := strings.TrimSpace(getenv(v))
		if p == "" {
			continue
		}
		if p != "http/protobuf" && p != "grpc" {
			return ExportConfig{}, fmt.Errorf("%w: %s=%q (want grpc, port 4317, or http/protobuf, port 4318)", ErrUnsupportedExporter, v, p)
		}
		cfg.Protocol = p
		break
	}
	if cfg.Protocol == "" {
		cfg.Protocol = "http/protobuf"
	}
	return cfg, nil
}

// Settings are Flink's trace reporter keys (traces.reporter.otel.*),
// which override the OTEL_* variables where they are set.
type Settings struct {
	// Endpoint (traces.reporter.otel.exporter.endpoint): where to send
	// traces over OTLP; set, it turns export on whatever
	// OTEL_TRACES_EXPORTER says (unless OTEL_SDK_DISABLED).
	Endpoint string
	// Protocol (traces.reporter.otel.exporter.protocol): "grpc" (Flink's
	// default) or "http/protobuf".
	Protocol string
	// Timeout (traces.reporter.otel.exporter.timeout) of one export.
	Timeout time.Duration
	// ServiceName (traces.reporter.otel.service.name), over
	// OTEL_SERVICE_NAME.
	ServiceName string
}

// ProviderFromEnv returns the tracer provider the environment asks for
// (see ExportFromEnv) and a shutdown function that flushes and stops it.
// Without configuration it returns a provider that records nothing.
func ProviderFromEnv(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	tp, shutdown, _, err := Provider(ctx, Settings{})
	return tp, shutdown, err
}

// Provider returns the tracer provider that s and the environment ask
// for, a shutdown function that flushes and stops it, and what was
// chosen. Without s.Endpoint the exporter is
// go.opentelemetry.io/contrib/exporters/autoexport's from the OTEL_*
// variables (OTLP over gRPC or HTTP, console), which read the endpoint,
// headers, timeout, compression and TLS settings themselves; with it, an
// OTLP exporter to that endpoint (the OTEL_* variables still give the
// headers and TLS settings). Without either, a provider that records
// nothing.
func Provider(ctx context.Context, s Settings) (trace.TracerProvider, func(context.Context) error, ExportConfig, error) {
	cfg, err := ExportFromEnv(nil)
	if err != nil && s.Endpoint == "" {
		return nil, nil, ExportConfig{}, err
	}
	var exp sdktrace.SpanExporter
	switch {
	case strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true"):
		return noopProvider(), func(context.Context) error { return nil }, cfg, nil
	case s.Endpoint != "":
		cfg = ExportConfig{Enabled: true, Reason: "traces.reporter.otel.exporter.endpoint=" + s.Endpoint, Protocol: s.Protocol}
		if cfg.Protocol == "" {
			cfg.Protocol = "grpc"
		}
		exp, err = endpointExporter(ctx, s, cfg.Protocol)
	case !cfg.Enabled:
		return noopProvider(), func(context.Context) error { return nil }, cfg, nil
	default:
		exp, err = autoexport.NewSpanExporter(ctx)
	}
	if err != nil {
		return nil, nil, ExportConfig{}, fmt.Errorf("trace exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", DefaultServiceName)}
	res, err := resource.Merge(resource.NewSchemaless(attrs...), resource.Environment())
	if err == nil && s.ServiceName != "" {
		res, err = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", s.ServiceName)))
	}
	if err != nil {
		return nil, nil, ExportConfig{}, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, cfg, nil
}

func noopProvider() trace.TracerProvider { return noop.NewTracerProvider() }

// endpointExporter is the OTLP exporter of Flink's keys.
func endpointExporter(ctx context.Context, s Settings, protocol string) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(s.Endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("traces.reporter.otel.exporter.endpoint %q: want a URL such as http://collector:4317", s.Endpoint)
	}
	insecure := u.Scheme == "http"
	switch protocol {
	case "grpc":
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(s.Endpoint)}
		if s.Timeout > 0 {
			opts = append(opts, otlptracegrpc.WithTimeout(s.Timeout))
		}
		if insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	case "http/protobuf":
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(s.Endpoint)}
		if s.Timeout > 0 {
			opts = append(opts, otlptracehttp.WithTimeout(s.Timeout))
		}
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("%w: traces.reporter.otel.exporter.protocol %q (want gRPC or HTTP)", ErrUnsupportedExporter, protocol)
}
