package mongostore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// A RevisionMap's revisions, one a stream the document has had, are
// written with every change of its document. Kept as a subdocument with a
// field a stream, they cost the embedded server (FerretDB) time that grows
// with the square of the streams at every read and write: it checks each
// field it decodes against those before it. A document of 4,000 streams
// took 300 ms a read and write there, of 16,000 streams 3 s. The store
// keeps them as one binary field instead (under the same name, "revs": see
// revisionsField): how many streams (uvarint), then
// the streams in order, each:
//
//	how many bytes it shares with the stream before it (uvarint),
//	the length of the rest (uvarint) and its bytes,
//	its revision (uvarint).
//
// Streams named by a prefix and an id share most of their bytes: 4,000 of
// them take about 40 KB, and a read and write 16 ms. Documents written with
// the subdocument are still read; the next write stores the binary form.

var errRevisions = errors.New("malformed revisions of streams")

// encodeRevisions encodes revs.
func encodeRevisions(revs map[string]uint64) []byte {
	if len(revs) == 0 {
		return nil
	}
	streams := make([]string, 0, len(revs))
	size := 0
	for s := range revs {
		streams = append(streams, s)
		size += len(s)
	}
	slices.Sort(streams)
	out := make([]byte, 0, size/2+len(streams)*4)
	out = binary.AppendUvarint(out, uint64(len(streams)))
	prev := ""
	for _, s := range streams {
		shared := commonPrefix(prev, s)
		out = binary.AppendUvarint(out, uint64(shared))
		out = binary.AppendUvarint(out, uint64(len(s)-shared))
		out = append(out, s[shared:]...)
		out = binary.AppendUvarint(out, revs[s])
		prev = s
	}
	return out
}

// commonPrefix is how many bytes a and b share at their start.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// decodeRevisions decodes what encodeRevisions wrote.
func decodeRevisions(b []byte) (map[string]uint64, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: their count", errRevisions)
	}
	b = b[k:]
	out := make(map[string]uint64, n)
	prev := ""
	var name strings.Builder
	for len(b) > 0 {
		shared, k := binary.Uvarint(b)
		if k <= 0 || shared > uint64(len(prev)) {
			return nil, fmt.Errorf("%w: a stream's shared prefix at entry %d", errRevisions, len(out))
		}
		b = b[k:]
		rest, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < rest {
			return nil, fmt.Errorf("%w: a stream's name at entry %d", errRevisions, len(out))
		}
		b = b[k:]
		name.Reset()
		name.WriteString(prev[:shared])
		name.Write(b[:rest])
		b = b[rest:]
		rev, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%w: a revision at entry %d", errRevisions, len(out))
		}
		b = b[k:]
		next := name.String()
		if len(out) > 0 && next <= prev {
			return nil, fmt.Errorf("%w: stream %q after %q, out of order", errRevisions, next, prev)
		}
		prev = next
		out[prev] = rev
	}
	if uint64(len(out)) != n {
		return nil, fmt.Errorf("%w: %d streams of %d", errRevisions, len(out), n)
	}
	return out, nil
}

// revisionsField is a RevisionMap's revisions as the store keeps them in
// "_meta.revs": one binary field (encodeRevisions), read from it or from the
// subdocument of one field a stream that earlier versions wrote. Under the
// same name, an earlier version of the store fails to read the binary form
// (its document cannot be decoded), rather than taking the document for one
// without revisions and applying every event again.
type revisionsField map[string]uint64

// MarshalBSONValue implements bson.ValueMarshaler: a binary value of the
// generic subtype.
func (r revisionsField) MarshalBSONValue() (byte, []byte, error) {
	b := encodeRevisions(r)
	out := make([]byte, 5, 5+len(b))
	binary.LittleEndian.PutUint32(out, uint32(len(b)))
	return byte(bson.TypeBinary), append(out, b...), nil
}

// UnmarshalBSONValue implements bson.ValueUnmarshaler: the binary form, or
// the subdocument of earlier versions.
func (r *revisionsField) UnmarshalBSONValue(typ byte, data []byte) error {
	switch bson.Type(typ) {
	case bson.TypeBinary:
		if len(data) < 5 || int(binary.LittleEndian.Uint32(data)) != len(data)-5 {
			return fmt.Errorf("%w: a binary value of %d bytes", errRevisions, len(data))
		}
		m, err := decodeRevisions(data[5:])
		*r = m
		return err
	case bson.TypeEmbeddedDocument:
		var old map[string]int64
		if err := bson.Unmarshal(data, &old); err != nil {
			return err
		}
		m := make(revisionsField, len(old))
		for k, v := range old {
			m[k] = uint64(v)
		}
		*r = m
		return nil
	case bson.TypeNull:
		*r = nil
		return nil
	}
	return fmt.Errorf("%w: a value of BSON type %s", errRevisions, bson.Type(typ))
}
