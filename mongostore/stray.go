package mongostore

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/retry"
)

// strayField returns the first top-level field of stored document raw that
// a projection's state, whose type stores its fields under keys
// (stateKeysOf), has no field for (none that the driver
// matches it to, in any case), holding a value (not null), the engine's
// own fields aside ("_id", those beginning with "_", and, in a document
// under the revision gate (gated), "revision"); "" when there is none, or
// when the state's type cannot say (keys nil: not a struct, a type that
// encodes or decodes itself, a struct with an inline map). A
// field renamed without a bson tag that keeps its stored name ("Charges",
// stored as "totalcharges" by the build before) is such a field: decoded,
// its value would be lost without a word, and the document's next write
// would drop it.
func strayField(raw bson.Raw, keys map[string]bool, gated bool) string {
	if keys == nil {
		return ""
	}
	elems, err := raw.Elements()
	if err != nil {
		return ""
	}
	for _, e := range elems {
		k := e.Key()
		switch t := e.Value().Type; {
		case gated && k == FieldRevision || strings.HasPrefix(k, "_"): // "_id" too
		case keys[k] || keys[strings.ToLower(k)]:
			// Its field, or one the driver matches it to in another case.
		case t == bson.TypeNull || t == bson.TypeUndefined:
			// Nothing to lose.
		default:
			return k
		}
	}
	return ""
}

// strayError is the error of stored document collection/id, decoded into
// state, whose field has no field in state's type: as for a document that
// does not decode, the document is at fault, and reading it again gives the
// same (retry.Permanent).
func strayError(collection, id string, state any, field string) error {
	t := reflect.TypeOf(state)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return retry.Permanent(fmt.Errorf("mongostore: decode %s/%s into %v: the stored document has field %q, which %[3]v has no field for "+
		"(a field renamed or removed without a new version? its value would be lost: keep its stored name with a bson tag, `bson:\"%[4]s\"`, "+
		"or raise the projection's version and rebuild it)", collection, id, t, field))
}

// decodeState decodes stored document raw of collection/id into state,
// refusing one that does not fit it: that does not decode (undecodable), or
// has a field state's type has no field for (strayField); gated: the
// document is under the revision gate, whose "revision" is the engine's.
func decodeState(collection, id string, raw bson.Raw, state any, gated bool) error {
	keys := stateKeysOf(reflect.TypeOf(state))
	if keys == nil {
		// A state that takes any field (a map, an inline map) or decodes
		// itself: given the state's fields alone, not the engine's.
		raw = stateOnly(raw, gated)
	}
	if err := bson.Unmarshal(raw, state); err != nil {
		return undecodable(collection, id, state, err)
	}
	if f := strayField(raw, keys, gated); f != "" {
		return strayError(collection, id, state, f)
	}
	return nil
}

// stateOnly is stored document raw without the engine's fields (ownFields,
// guardedFields; "revision" under the revision gate only): the state's.
func stateOnly(raw bson.Raw, gated bool) bson.Raw {
	elems, err := raw.Elements()
	if err != nil {
		return raw
	}
	d := make(bson.D, 0, len(elems))
	for _, e := range elems {
		switch k := e.Key(); k {
		case fieldID, fieldStream, fieldWrite, FieldDeleted, fieldMeta:
		case FieldRevision:
			if !gated {
				d = append(d, bson.E{Key: k, Value: e.Value()})
			}
		default:
			d = append(d, bson.E{Key: k, Value: e.Value()})
		}
	}
	out, err := bson.Marshal(d)
	if err != nil {
		return raw
	}
	return out
}

// stateKeys caches the keys each state type stores its fields under
// (stateKeysOf).
var stateKeys sync.Map // reflect.Type -> map[string]bool (nil: cannot say)

// stateKeysOf returns the keys under which the driver stores the fields of
// t (a struct, or a pointer to one), as its struct codec names them: the
// bson tag's name, else the field's name in lower case; the fields of an
// inline struct flattened, a field tagged "-" left out. nil when t cannot
// say: not a struct, one that encodes or decodes itself, or one with an
// inline map, which takes any field.
func stateKeysOf(t reflect.Type) map[string]bool {
	if k, ok := stateKeys.Load(t); ok {
		return k.(map[string]bool)
	}
	keys := map[string]bool{}
	if !structKeys(t, keys, 0) {
		keys = nil
	}
	for k := range keys {
		keys[strings.ToLower(k)] = true // the driver matches a key in another case too
	}
	stateKeys.Store(t, keys)
	return keys
}

// codecTypes are the interfaces of a type that encodes or decodes itself,
// whose stored fields its own code says.
var codecTypes = []reflect.Type{
	reflect.TypeFor[bson.Unmarshaler](), reflect.TypeFor[bson.ValueUnmarshaler](),
	reflect.TypeFor[bson.Marshaler](), reflect.TypeFor[bson.ValueMarshaler](),
}

// structKeys adds the keys of struct type t's fields to keys, and reports
// whether t says them all (see stateKeysOf).
func structKeys(t reflect.Type, keys map[string]bool, depth int) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || depth > 8 {
		return false
	}
	for _, c := range codecTypes {
		if t.Implements(c) || reflect.PointerTo(t).Implements(c) {
			return false
		}
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, skip, inline := fieldKey(sf)
		switch {
		case skip:
		case inline:
			ft := sf.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() != reflect.Struct || !structKeys(ft, keys, depth+1) {
				return false // an inline map takes any field
			}
		default:
			keys[name] = true
		}
	}
	return true
}

// fieldKey is the key of struct field sf as the driver's default struct
// tag parser gives it: the bson tag's name (or the whole tag, written
// without a key), else the field's name in lower case; skip for "-".
func fieldKey(sf reflect.StructField) (name string, skip, inline bool) {
	name = strings.ToLower(sf.Name)
	tag, ok := sf.Tag.Lookup("bson")
	if !ok && !strings.Contains(string(sf.Tag), ":") && len(sf.Tag) > 0 {
		tag = string(sf.Tag)
	}
	if tag == "-" {
		return "", true, false
	}
	for i, part := range strings.Split(tag, ",") {
		if i == 0 && part != "" {
			name = part
		}
		if part == "inline" {
			inline = true
		}
	}
	return name, false, inline
}
