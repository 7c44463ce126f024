package app

import (
	"strings"
	"testing"
)

// The OTEL_* variables: when tracing is on, and a wrong value is an error
// naming the variable, never a tracing that silently does nothing.
func TestParseTracing_on_only_when_the_environment_asks_and_wrong_values_are_errors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       map[string]string
		exporters string // "": off
		protocol  string
		err       string // a part of the error
	}{
		{"nothing set: off", nil, "", "", ""},
		{"an OTLP endpoint: otlp over http", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp", "http/protobuf", ""},
		{"a traces endpoint: otlp", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, "otlp", "http/protobuf", ""},
		{"otlp over grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "otlp", "grpc", ""},
		{"the traces protocol wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, "otlp", "http/protobuf", ""},
		{"console and otlp", map[string]string{"OTEL_TRACES_EXPORTER": "console, otlp"}, "console,otlp", "http/protobuf", ""},
		{"none: off even with an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "", "", ""},
		{"disabled: off whatever else", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "jaeger"}, "", "", ""},
		{"disabled false", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "console"}, "console", "http/protobuf", ""},
		{"ratio sampler", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, "otlp", "http/protobuf", ""},
		{"unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}, "", "", `OTEL_TRACES_EXPORTER "jaeger": unknown exporter "jaeger"`},
		{"none with another", map[string]string{"OTEL_TRACES_EXPORTER": "none,otlp"}, "", "", "none with another exporter"},
		{"bad protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "udp"}, "", "", `OTEL_EXPORTER_OTLP_PROTOCOL "udp": want grpc or http/protobuf`},
		{"http/json", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "", "", "not supported by the Go SDK"},
		{"bad disabled", map[string]string{"OTEL_SDK_DISABLED": "yes"}, "", "", `OTEL_SDK_DISABLED "yes"`},
		{"unknown sampler", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "sometimes"}, "", "", `OTEL_TRACES_SAMPLER "sometimes"`},
		{"bad ratio", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "", "", `OTEL_TRACES_SAMPLER_ARG "2"`},
		{"a ratio that is not a number", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "NaN"}, "", "", `OTEL_TRACES_SAMPLER_ARG "NaN": want a number from 0 to 1`},
		{"names in upper case", map[string]string{"OTEL_TRACES_EXPORTER": "OTLP", "OTEL_TRACES_SAMPLER": "ALWAYS_ON", "OTEL_EXPORTER_OTLP_PROTOCOL": "GRPC"}, "otlp", "grpc", ""},
		{"an endpoint that is not a URL", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "not a url"}, "", "", `OTEL_EXPORTER_OTLP_ENDPOINT "not a url": want a URL with the scheme http or https and a host`},
		{"an endpoint without a scheme", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318"}, "", "", `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT "collector:4318"`},
		{"an endpoint of another scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://x"}, "", "", `OTEL_EXPORTER_OTLP_ENDPOINT "ftp://x"`},
		{"an endpoint without a host", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://"}, "", "", `OTEL_EXPORTER_OTLP_ENDPOINT "http://"`},
		{"a bad endpoint, unused: console only", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_ENDPOINT": "::::"}, "console", "http/protobuf", ""},
		{"a bad endpoint, unused: the traces' own wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "unix:///run/other.sock", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, "otlp", "http/protobuf", ""},
		{"a bad traces endpoint beside a good one", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector"}, "", "", `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT "collector"`},
		{"a gRPC target over grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "otlp", "grpc", ""},
		{"a dns target over grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "dns:///collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "otlp", "grpc", ""},
		{"a bare word over grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "", "", `OTEL_EXPORTER_OTLP_ENDPOINT "collector": want a URL with the scheme http or https and a host, such as http://collector:4317, or a gRPC target`},
		{"http without a host over grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "", "", `OTEL_EXPORTER_OTLP_ENDPOINT "http://"`},
		{"a unix socket without a path over grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "unix://", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "", "", `OTEL_EXPORTER_OTLP_ENDPOINT "unix://"`},
		{"a gRPC target over http", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "", "", `OTEL_EXPORTER_OTLP_ENDPOINT "collector:4318": want a URL with the scheme http or https and a host, such as http://collector:4318`},
		{"an https endpoint over grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "HTTPS://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "otlp", "grpc", ""},
		{"a unix socket over grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "unix:///run/otel.sock", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "otlp", "grpc", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseTracing(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, "projector")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err %v, want one line with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(c.exporters, ","); got != tc.exporters || c.on() != (tc.exporters != "") {
				t.Fatalf("exporters %q (on %v), want %q", got, c.on(), tc.exporters)
			}
			if c.on() && c.protocol != tc.protocol {
				t.Fatalf("protocol %q, want %q", c.protocol, tc.protocol)
			}
		})
	}
}
