package mongostore

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/revgate/projector/projector/driver"
)

// A window of handled ids comes back as it was written: UUIDs and other
// ids (an upper-case UUID is not a canonical one, and stays as written),
// positions in any order, none.
func TestHandledWindow_comes_back_as_written(t *testing.T) {
	for _, h := range [][]driver.Handled{
		nil,
		{{ID: "6f1c3b8e-1d2a-4b5c-9e7f-0a1b2c3d4e5f", Position: 1 << 40}},
		{
			{ID: "6f1c3b8e-1d2a-4b5c-9e7f-0a1b2c3d4e5f", Position: 900},
			{ID: "6F1C3B8E-1D2A-4B5C-9E7F-0A1B2C3D4E5F", Position: 12},
			{ID: "order-17/line-2", Position: 13},
			{ID: "", Position: 0},
			{ID: strings.Repeat("x", 300), Position: 1<<63 - 1},
		},
		// The events of a legacy TCP transaction: one commit position, their
		// prepare positions below it.
		{
			{ID: "6f1c3b8e-1d2a-4b5c-9e7f-0a1b2c3d4e5f", Position: 100, Prepare: 60},
			{ID: "order-17/line-2", Position: 100, Prepare: 70},
			{ID: "6f1c3b8e-1d2a-4b5c-9e7f-0a1b2c3d4e60", Position: 100},
			{ID: "order-17/line-3", Position: 110},
		},
	} {
		got, err := decodeHandled(encodeHandled(h))
		if err != nil || !reflect.DeepEqual(got, h) {
			t.Fatalf("%v: decoded %v, %v", h, got, err)
		}
	}
	window := make([]driver.Handled, 2000)
	for i := range window {
		window[i] = driver.Handled{ID: "6f1c3b8e-1d2a-4b5c-9e7f-0a1b2c3d4e5f", Position: uint64(1000 + 37*i)}
	}
	if n := len(encodeHandled(window)); n > 2000*19 {
		t.Errorf("a window of 2,000 UUIDs takes %d bytes, want at most 19 an id", n)
	}
	bad := [][]byte{{9}, {handledUUID, 1, 2}, {handledString, 5, 'a'}, {handledString, 1, 'a'},
		{handledString + withPrepare, 1, 'a', 20},     // no prepare position
		{handledString + withPrepare, 1, 'a', 20, 0},  // one not below
		{handledString + withPrepare, 1, 'a', 20, 11}} // one below 0
	for _, bad := range bad {
		if _, err := decodeHandled(bad); !errors.Is(err, errHandled) {
			t.Errorf("%v: %v, want errHandled", bad, err)
		}
	}
}

// A document written with the window as an array of {id, pos} is read as
// before.
func TestHandledWindow_of_the_array_form_is_read(t *testing.T) {
	d := metaDoc{Version: 4, OldForm: []handledDoc{{ID: "a", Position: 3}, {ID: "b", Position: 5}}, Evicted: 2}
	m, err := d.meta()
	if err != nil || !reflect.DeepEqual(m, driver.Meta{Version: 4, Handled: []driver.Handled{{ID: "a", Position: 3}, {ID: "b", Position: 5}}, Evicted: 2}) {
		t.Fatalf("%+v %v", m, err)
	}
	if again := toMetaDoc(m); again.OldForm != nil || len(again.Handled) == 0 {
		t.Fatalf("written again as %+v, want the binary form alone", again)
	}
}
