package projector

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// flatObject reports whether b is a JSON object of string values only,
// each key once, without escapes, none of the trace keys spelt in another
// case: the metadata writers put, where the scan of MetadataContext and the
// JSON decoder must agree.
func flatObject(b []byte) bool {
	if bytes.IndexByte(b, '\\') >= 0 || !json.Valid(b) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok || seen[key] {
			return false
		}
		seen[key] = true
		for _, k := range []string{metaTraceParent, metaTraceState, metaTraceID, metaSpanID} {
			if strings.EqualFold(key, k) && key != k {
				return false
			}
		}
		if v, err := dec.Token(); err != nil {
			return false
		} else if _, ok := v.(string); !ok {
			return false
		}
	}
	t, err := dec.Token()
	return err == nil && t == json.Delim('}')
}

// The scan that reads the trace context without allocating gives what the
// JSON decoder gives, on the metadata writers put.
func FuzzMetadataContext_the_scan_agrees_with_the_decoder(f *testing.F) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, seed := range []string{
		`{"traceparent":"` + tp + `"}`,
		`{"clientId":"x","traceparent":"` + tp + `","tracestate":"a=1,b=2"}`,
		`{"$traceId":"0af7651916cd43dd8448eb211c80319c","$spanId":"b7ad6b7169203331"}`,
		`{"traceparent":"nope","$traceId":"0af7651916cd43dd8448eb211c80319c","$spanId":"b7ad6b7169203331"}`,
		`{"kind":"traceparent","traceparent":"` + tp + `"}`,
		`{"traceparent" : "` + tp + `" , "x":"traceparent"}`,
		`{"traceparent":"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}`,
		`{"traceparent":"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		`{"traceparent":"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"}`,
		`{"$traceId":"00000000000000000000000000000000","$spanId":"0000000000000000"}`,
		`{}`, `{"a":"b"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !flatObject(b) {
			return
		}
		if got, want := MetadataContext(b), metadataContextJSON(b); !got.Equal(want) {
			t.Fatalf("metadata %s: the scan gives %v/%v (valid %v), the decoder %v/%v (valid %v)",
				b, got.TraceID(), got.SpanID(), got.IsValid(), want.TraceID(), want.SpanID(), want.IsValid())
		}
	})
}
