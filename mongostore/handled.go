package mongostore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/revgate/projector/projector/driver"
)

// A HandledIDs window is written with every change of its document, so
// its size is paid on every write: 2,000 ids as an array of {id, pos}
// subdocuments took about 150 KB of BSON, and FerretDB turns each
// subdocument into JSON and back. The store keeps it as one binary field
// instead, in the window's order, each entry:
//
//	tag 1, the 16 bytes of an id that is a UUID in its canonical form, or
//	tag 2, the id's length (uvarint) and its bytes;
//	then its position's difference from the entry before (zig-zag varint);
//	tags 3 and 4 are 1 and 2 for an event whose prepare position is below
//	its commit position (one of a transaction written by the legacy TCP
//	API), followed by how far below (uvarint).
//
// A window of 2,000 UUIDs takes about 38 KB. Documents written with the
// array ("handled") are still read; the next write stores the binary form.

const (
	handledUUID   = 1
	handledString = 2
	// withPrepare is added to the tag of an entry that has a prepare
	// position of its own.
	withPrepare = 2
)

// encodeHandled encodes a window.
func encodeHandled(h []driver.Handled) []byte {
	if len(h) == 0 {
		return nil
	}
	out := make([]byte, 0, len(h)*20)
	prev := int64(0)
	for _, x := range h {
		prepared := byte(0)
		if x.Prepare != 0 && x.Prepare < x.Position {
			prepared = withPrepare
		}
		if id, err := uuid.Parse(x.ID); err == nil && id.String() == x.ID {
			out = append(out, handledUUID+prepared)
			out = append(out, id[:]...)
		} else {
			out = append(out, handledString+prepared)
			out = binary.AppendUvarint(out, uint64(len(x.ID)))
			out = append(out, x.ID...)
		}
		out = binary.AppendVarint(out, int64(x.Position)-prev)
		prev = int64(x.Position)
		if prepared != 0 {
			out = binary.AppendUvarint(out, x.Position-x.Prepare)
		}
	}
	return out
}

var errHandled = errors.New("malformed window of handled ids")

// decodeHandled decodes what encodeHandled wrote.
func decodeHandled(b []byte) ([]driver.Handled, error) {
	var out []driver.Handled
	prev := int64(0)
	for len(b) > 0 {
		var id string
		tag, prepared := b[0], false
		if tag > withPrepare {
			tag, prepared = tag-withPrepare, true
		}
		switch {
		case tag == handledUUID && len(b) >= 17:
			var u uuid.UUID
			copy(u[:], b[1:17])
			id, b = u.String(), b[17:]
		case tag == handledString:
			n, k := binary.Uvarint(b[1:])
			if k <= 0 || uint64(len(b)-1-k) < n {
				return nil, fmt.Errorf("%w: an id at entry %d", errHandled, len(out))
			}
			id, b = string(b[1+k:1+k+int(n)]), b[1+k+int(n):]
		default:
			return nil, fmt.Errorf("%w: entry %d", errHandled, len(out))
		}
		d, k := binary.Varint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%w: a position at entry %d", errHandled, len(out))
		}
		b = b[k:]
		prev += d
		x := driver.Handled{ID: id, Position: uint64(prev)}
		if prepared {
			below, k := binary.Uvarint(b)
			if k <= 0 || below == 0 || below > x.Position {
				return nil, fmt.Errorf("%w: a prepare position at entry %d", errHandled, len(out))
			}
			b, x.Prepare = b[k:], x.Position-below
		}
		out = append(out, x)
	}
	return out, nil
}
