package esdbtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// deletedStream is the node's EventNumber.DeletedStream (long.MaxValue): the
// $tb a soft delete writes and the revision of a tombstone.
const deletedStream = math.MaxInt64

// metaPrefix starts the name of a stream's metadata stream.
const metaPrefix = "$$"

// Event types the node itself writes.
const (
	typeMetadata      = "$metadata"
	typeStreamDeleted = "$streamDeleted"
)

// Content types of the "content-type" metadata.
const (
	contentJSON   = "application/json"
	contentBinary = "application/octet-stream"
)

func isMetastream(stream string) bool { return strings.HasPrefix(stream, metaPrefix) }

// isSystemStream reports whether a stream is a system stream ("$" first),
// metadata streams included.
func isSystemStream(stream string) bool { return strings.HasPrefix(stream, "$") }

// originalOf returns the stream a metadata stream describes.
func originalOf(metastream string) string { return strings.TrimPrefix(metastream, metaPrefix) }

// streamMeta is a stream's metadata as the node reads it: the last event of
// its metadata stream, when that event is JSON. Zero values mean "not set".
type streamMeta struct {
	maxCount int64         // $maxCount, > 0
	maxAge   time.Duration // $maxAge, > 0
	tb       int64         // $tb, >= 0; valid when hasTB
	hasTB    bool
	acl      *streamACL // $acl
}

// metastreamMeta is the fixed metadata of every metadata stream: the node
// keeps only the last metadata event (ESConsts.MetaStreamMaxCount = 1).
var metastreamMeta = &streamMeta{maxCount: 1}

// emptyMeta is the metadata of a stream without (valid) metadata.
var emptyMeta = &streamMeta{}

// softDeleted reports whether the metadata is that of a soft-deleted stream.
func (m *streamMeta) softDeleted() bool { return m.hasTB && m.tb == deletedStream }

// streamACL is the $acl of stream metadata: the roles allowed per action; nil
// means "not set here".
type streamACL struct {
	read, write, del, metaRead, metaWrite []string
}

var errInvalidMetadata = errors.New("invalid metadata")

// parseMeta reads stream metadata as the node's StreamMetadata.TryFromJsonBytes
// does: anything malformed (not an object, a number that is not an integer
// or does not fit in an int64, a bad $acl) makes the whole metadata empty,
// and out-of-range values ($maxCount <= 0, $maxAge <= 0, $tb < 0) are
// ignored one by one.
func parseMeta(data []byte) *streamMeta {
	m, err := decodeMeta(data)
	if err != nil {
		return emptyMeta
	}
	return m
}

func decodeMeta(data []byte) (*streamMeta, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	var maxCount, maxAge, tb int64
	var hasMaxCount, hasMaxAge, hasTB bool
	m := &streamMeta{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim('}') {
			break
		}
		name, ok := tok.(string)
		if !ok {
			return nil, errInvalidMetadata
		}
		switch name {
		case "$maxCount":
			maxCount, err = integer(dec)
			hasMaxCount = true
		case "$maxAge":
			maxAge, err = integer(dec)
			hasMaxAge = true
		case "$tb":
			tb, err = integer(dec)
			hasTB = true
		case "$cacheControl":
			_, err = integer(dec)
		case "$tempStream":
			var t json.Token
			if t, err = dec.Token(); err == nil {
				if _, ok := t.(bool); !ok {
					err = errInvalidMetadata
				}
			}
		case "$acl":
			m.acl, err = decodeACL(dec)
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return nil, err
		}
	}
	if hasMaxCount && maxCount > 0 {
		m.maxCount = maxCount
	}
	if hasMaxAge && maxAge > 0 {
		m.maxAge = time.Duration(min(maxAge, math.MaxInt64/int64(time.Second))) * time.Second
	}
	if hasTB && tb >= 0 {
		m.tb, m.hasTB = tb, true
	}
	return m, nil
}

// decodeACL reads an $acl object. A key other than the five roles makes the
// node's reader fail, and with it the whole metadata.
func decodeACL(dec *json.Decoder) (*streamACL, error) {
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	acl := &streamACL{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim('}') {
			return acl, nil
		}
		var roles *[]string
		switch tok {
		case "$r":
			roles = &acl.read
		case "$w":
			roles = &acl.write
		case "$d":
			roles = &acl.del
		case "$mr":
			roles = &acl.metaRead
		case "$mw":
			roles = &acl.metaWrite
		default:
			return nil, errInvalidMetadata
		}
		if *roles, err = decodeRoles(dec); err != nil {
			return nil, err
		}
	}
}

// decodeRoles reads a role: a string or an array of strings.
func decodeRoles(dec *json.Decoder) ([]string, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if s, ok := tok.(string); ok {
		return []string{s}, nil
	}
	if tok != json.Delim('[') {
		return nil, errInvalidMetadata
	}
	roles := []string{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim(']') {
			return roles, nil
		}
		s, ok := tok.(string)
		if !ok {
			return nil, errInvalidMetadata
		}
		roles = append(roles, s)
	}
}

// integer reads a JSON integer that fits in an int64.
func integer(dec *json.Decoder) (int64, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, err
	}
	n, ok := tok.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return 0, errInvalidMetadata
	}
	return strconv.ParseInt(string(n), 10, 64)
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return errInvalidMetadata
	}
	return nil
}

// skipValue reads one JSON value of any kind.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
