package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Tracing is off unless the environment turns it on, with the standard
// OpenTelemetry variables:
//
//   - OTEL_SDK_DISABLED=true: off, whatever else is set.
//   - OTEL_TRACES_EXPORTER: a comma-separated list of otlp (the OTLP
//     exporter) and console (spans as JSON lines on standard error); none
//     alone is off. Unset, tracing is on with otlp when
//     OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
//     set, and off otherwise (the specification's default is otlp: a
//     projector does not try a collector that nobody configured).
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
//     http/protobuf (the default, port 4318) or grpc (port 4317).
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG: always_on,
//     always_off, traceidratio, parentbased_always_on (the default),
//     parentbased_always_off, parentbased_traceidratio; the argument of the
//     ratio samplers is a number from 0 to 1 (default 1).
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT:
//     a URL, http or https, with a host (over grpc, also a gRPC target);
//     see checkEndpoint.
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES: the resource (the
//     service's name defaults to the binary's).
//
// The names of exporters, protocols and samplers are read without regard to
// case, as the specification says. Any other value of these is a one-line
// error at startup (exit status 2), not a tracing that silently does
// nothing. The decision and the checks read the environment given to
// [Config.Run]; the exporter's endpoint, headers,
// timeout, compression and certificates (OTEL_EXPORTER_OTLP_*), the batch
// processor's settings (OTEL_BSP_*) and the resource's variables are read
// by the SDK from the process's environment, as its documentation says.
// When on, the tracer provider and the W3C propagator are set as the
// global ones (package otel), which the engine and the cart write side use
// by default; spans are flushed and the provider shut down when the command
// ends.
type tracingConfig struct {
	exporters []string // otlp, console; none: tracing is off
	protocol  string   // of otlp: grpc or http/protobuf
	sampler   sdktrace.Sampler
	service   string
}

func (c tracingConfig) on() bool { return len(c.exporters) > 0 }

// parseTracing reads the OTEL_* variables of env; service is the default
// service name.
func parseTracing(env func(string) (string, bool), service string) (tracingConfig, error) {
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	c := tracingConfig{service: service}
	if off, err := sdkDisabled(get); off || err != nil {
		return c, err
	}
	var err error
	if c.exporters, err = parseExporters(get); err != nil {
		return c, err
	}
	if c.protocol, err = parseProtocol(get); err != nil {
		return c, err
	}
	if slices.Contains(c.exporters, "otlp") {
		// The traces' own endpoint, when set, is the one the SDK uses.
		v := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
		if get(v) == "" {
			v = "OTEL_EXPORTER_OTLP_ENDPOINT"
		}
		if err := checkEndpoint(v, get(v), c.protocol); err != nil {
			return c, err
		}
	}
	if c.sampler, err = parseSampler(strings.ToLower(get("OTEL_TRACES_SAMPLER")), get("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return c, err
	}
	if name := get("OTEL_SERVICE_NAME"); name != "" {
		c.service = name
	}
	return c, nil
}

// sdkDisabled reports whether OTEL_SDK_DISABLED (read by get) turns tracing
// off, whatever else is set.
func sdkDisabled(get func(string) string) (bool, error) {
	switch strings.ToLower(get("OTEL_SDK_DISABLED")) {
	case "true":
		return true, nil
	case "", "false":
		return false, nil
	}
	return false, fmt.Errorf("OTEL_SDK_DISABLED %q: want true or false", get("OTEL_SDK_DISABLED"))
}

// parseExporters returns the exporters that OTEL_TRACES_EXPORTER (read by
// get) names, otlp when it is unset and an OTLP endpoint is set; none when
// it says none (tracing is off).
func parseExporters(get func(string) string) ([]string, error) {
	exporters := strings.ToLower(get("OTEL_TRACES_EXPORTER"))
	if exporters == "" && (get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		exporters = "otlp"
	}
	var out []string
	none := false
	for e := range strings.SplitSeq(exporters, ",") {
		switch e = strings.TrimSpace(e); e {
		case "":
		case "none":
			none = true
		case "otlp", "console":
			out = append(out, e)
		default:
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: unknown exporter %q (want otlp, console or none)", exporters, e)
		}
	}
	if none && len(out) > 0 {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: none with another exporter", exporters)
	}
	return out, nil
}

// parseProtocol returns the protocol of the OTLP exporter that
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL (read
// by get), names: grpc or http/protobuf (the default).
func parseProtocol(get func(string) string) (string, error) {
	v := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if get(v) == "" {
		v = "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	protocol := strings.ToLower(get(v))
	switch protocol {
	case "":
		return "http/protobuf", nil
	case "grpc", "http/protobuf":
		return protocol, nil
	case "http/json":
		return "", fmt.Errorf("%s %q: not supported by the Go SDK (want grpc or http/protobuf)", v, protocol)
	}
	return "", fmt.Errorf("%s %q: want grpc or http/protobuf", v, protocol)
}

// checkEndpoint refuses an OTLP endpoint (the value of variable v) that the
// exporter could not send to, as the SDK reads it: over http/protobuf, a
// URL with the scheme http or https and a host; over grpc, also a gRPC
// target (collector:4317, dns:///collector:4317, unix:///run/otel.sock),
// which the SDK hands to gRPC as it is, but not a bare word or a URL of
// http or https without a host. Accepted, such an endpoint would have the
// spans dropped at each export, with one line of the SDK's own on standard
// error.
func checkEndpoint(v, endpoint, protocol string) error {
	if endpoint == "" {
		return nil
	}
	u, err := url.Parse(endpoint)
	web := err == nil && (strings.EqualFold(u.Scheme, "http") || strings.EqualFold(u.Scheme, "https"))
	switch {
	case err != nil:
	case web && u.Host != "":
		return nil
	case protocol == "grpc" && !web && u.Scheme != "" && (u.Opaque != "" || u.Host != "" || u.Path != ""):
		return nil
	}
	if protocol == "grpc" {
		return fmt.Errorf("%s %q: want a URL with the scheme http or https and a host, such as http://collector:4317, or a gRPC target, such as collector:4317", v, endpoint)
	}
	return fmt.Errorf("%s %q: want a URL with the scheme http or https and a host, such as http://collector:4318", v, endpoint)
}

// parseSampler returns the sampler that OTEL_TRACES_SAMPLER (name) and
// OTEL_TRACES_SAMPLER_ARG (arg) name.
func parseSampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || math.IsNaN(r) || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q: want a number from 0 to 1", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER %q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// startTracing sets up the SDK as c says and makes it the global tracer
// provider; stop flushes the spans, shuts it down and puts back the
// globals it replaced.
func startTracing(ctx context.Context, c tracingConfig, name string, stderr io.Writer) (stop func(context.Context) error, err error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", c.service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSampler(c.sampler)}
	for _, name := range c.exporters {
		var exp sdktrace.SpanExporter
		switch {
		case name == "console":
			exp, err = stdouttrace.New(stdouttrace.WithWriter(stderr))
		case c.protocol == "grpc":
			exp, err = otlptracegrpc.New(ctx)
		default:
			exp, err = otlptracehttp.New(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("%s exporter: %w", name, err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	// The globals the program had (a provider of its own, maybe) are its
	// again once the command ends: a provider shut down is left to no one.
	// Where the program set none, the SDK's first setting makes its
	// default ones forward to the command's for good: once the command has
	// ended, its handler says errors as the SDK's default does (the
	// standard logger), not in the ended command's log, and its provider,
	// shut down, makes no spans.
	oldTP, oldProp, oldHandler := otel.GetTracerProvider(), otel.GetTextMapPropagator(), otel.GetErrorHandler()
	var ended atomic.Bool
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		if ended.Load() {
			log.Print(err)
			return
		}
		tracingError(stderr, name, err)
	}))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		err := tp.Shutdown(ctx)
		ended.Store(true)
		otel.SetTracerProvider(oldTP)
		otel.SetTextMapPropagator(oldProp)
		otel.SetErrorHandler(oldHandler)
		return err
	}, nil
}

// tracingShutdown bounds how long the spans of a command that ends may take
// to flush.
const tracingShutdown = 5 * time.Second

// withTracing runs run with tracing set up as env says, and shuts it down
// after. A bad variable is one line on stderr and exit status 2.
func withTracing(ctx context.Context, env func(string) (string, bool), name string, stderr io.Writer, run func() int) int {
	c, err := parseTracing(env, name)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if !c.on() {
		return run()
	}
	stop, err := startTracing(ctx, c, name, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: tracing: %v\n", name, err)
		return 2
	}
	code := run()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingShutdown)
	defer cancel()
	if err := stop(sctx); err != nil && !errors.Is(err, context.Canceled) {
		tracingError(stderr, name, fmt.Errorf("flushing spans: %w", err))
	}
	tracingLog.Store(nil)
	return code
}

// tracingLog is the logger of the command running (newLogger's), through
// which the span exporters' errors (a collector that does not answer) are
// said in its format: a line of another format would break a reader of
// --log-format json. nil before the command makes one, or when it has
// none (then a line of the command's name on stderr).
var tracingLog atomic.Pointer[slog.Logger]

// tracingError says err, of the tracing of command name, through
// tracingLog, else on stderr.
func tracingError(stderr io.Writer, name string, err error) {
	if l := tracingLog.Load(); l != nil {
		l.Warn("tracing: spans not exported", "err", err)
		return
	}
	fmt.Fprintf(stderr, "%s: tracing: %v\n", name, err)
}
