package projector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// RegisterOption tells [Register] the older forms of an event type: the
// names it was stored under before ([Renamed]) and its older shapes
// ([Upcast]).
type RegisterOption func(*entry)

// Renamed says that events of the type were also stored under the older
// names old, in the shape they have now: they decode into the type as they
// are.
func Renamed(old ...string) RegisterOption {
	return func(en *entry) { en.renamed = append(en.renamed, old...) }
}

// Upcast says that events stored under the name from (an older name, or an
// older version of the name: see below) have an older shape, and how to
// turn it into the next: fn, a pure function from the older shape Old to
// the next one, New. An event of that older form is decoded into Old, and
// then goes through fn and every upcaster given after this one, in the
// order of the options, so that v1 reaches v3 through v2: list them oldest
// first. The last one gives the registered type itself. A projection sees
// only that type.
//
// Old and New are Go types (their JSON is the payload's), or
// [json.RawMessage] for the raw JSON: from one upcaster to the next, a
// value of another type than the next one takes goes through its JSON.
// [Register] panics when two upcasters of Go types do not chain (New is not
// the next one's Old, or the last one's is not the registered type).
//
// Old may also be [Event]: fn then gets the event as stored (its type,
// stream, revision, metadata, time), with Data the payload as the
// upcasters before it left it, so that it can decide by the metadata:
// drop the events a test tenant wrote, fill a field from who wrote it.
// New is a payload's shape, never an Event.
//
// fn returns [DropEvent] to turn the event into none: no projection sees
// it, and a document gated by stream revision moves past it as past any
// event of a type its projection does not handle. Any other error, or a
// panic, makes the event undecodable ([ErrUndecodable]): its projection's
// failure policy has it, and the error names the event, its stored type
// and the upcaster that failed.
//
// The name from is a stored event type ("CardMoved" when the type is now
// registered as "CardMoved.v2", or "CardMovedV2", or renamed), or, for a
// registry that reads versions from metadata ([Registry.VersionField]), the
// stored type and the version as name.vN ("CardMoved.v1": type "CardMoved"
// with version 1 in its metadata).
//
// The name from may also be the name the type has now: every event stored
// under it (or under a name it was [Renamed] from) then decodes through
// fn, which must be the last upcaster, so that the events of the older
// forms go through it too, after their own upcasters ([Register] panics
// otherwise: the events it mends would go through the older forms'
// upcasters too). That repairs payloads stored in a shape that does not
// decode (a producer's bug), so that their parked events replay: fn, from
// [json.RawMessage], mends the bad ones and passes the others on as they
// are. From an [Event], it sees every event of the type, whatever its
// form, with its metadata.
func Upcast[Old, New any](from string, fn func(Old) (New, error)) RegisterOption {
	in, out := reflect.TypeFor[Old](), reflect.TypeFor[New]()
	for _, t := range []reflect.Type{in, out} {
		if t == reflect.TypeFor[[]byte]() {
			panic(fmt.Sprintf("projector: upcaster from %q: use json.RawMessage for the raw JSON, not []byte", from))
		}
	}
	if out == whole || out == reflect.PointerTo(whole) || in == reflect.PointerTo(whole) {
		panic(fmt.Sprintf("projector: upcaster from %q: an upcaster takes an Event (not a pointer to one) and gives the payload's next shape, not an Event", from))
	}
	s := upcaster{from: from, in: in, out: out, code: reflect.ValueOf(fn).Pointer(), fn: func(v any) (any, error) { return fn(v.(Old)) }}
	return func(en *entry) { en.steps = append(en.steps, s) }
}

// DropEvent is what an upcaster returns to turn an event into none (see
// [Upcast]). Like [io/fs.SkipDir], it is a signal, not a failure: no call
// returns it.
//
//lint:ignore ST1012 a signal an upcaster returns, as fs.SkipDir is, not an error
var DropEvent = errors.New("projector: event dropped by its upcaster")

// VersionField makes the registry read an event's version from the field of
// its metadata (a JSON object) named field: a number (2) or a string ("2",
// "v2"). An event of type T with version N there is decoded as the form
// registered as "T.vN" when there is one, else as T (so that the current
// version needs no form of its own); an event without it, as T. Where no
// form is named T but the type's name now is "T.vM", that name stands for
// T (the newest M, if several types are so named). A field
// that holds something else ("one", an object) makes the event undecodable
// ([ErrUndecodable]): its shape cannot be told. Where the current shape is
// registered as T (or [Renamed] from T), the registry cannot tell a
// version newer than the current one from the current one, so a producer
// that writes a new shape ahead of the projector's upgrade writes events
// the projector decodes as T: deploy the projector that knows a version
// first, or let the new version's events carry a new type name. Where it
// is registered as "T.vM", a version newer than M makes the event
// undecodable, rather than read as an older form (T, with no version,
// say), and so does an older version with no form of its own where the
// registry holds older forms of T (2, where the forms are T and "T.v3": a
// forgotten form, whose events T's upcaster would read wrong without a
// word); 0 and 1 are T's where T is an older form. Where it holds no older
// form (versions that only added fields), an older version is read as the
// current shape. Events
// whose versions are in their type names ("CardMoved.v2", "CardMovedV2")
// need no field: each name is a form of its own. It returns r.
func (r *Registry) VersionField(field string) *Registry {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versionField = field
	return r
}

// raw is the type of an upcaster's raw JSON; whole, of an upcaster that
// takes the whole event.
var (
	raw   = reflect.TypeFor[json.RawMessage]()
	whole = reflect.TypeFor[Event]()
)

// entry is one registration: the type, its name now, and its older forms.
type entry struct {
	t       reflect.Type
	name    string
	renamed []string
	steps   []upcaster
}

// upcaster is one upcaster: from the shape of the events stored as from (type
// in) to the next shape (type out).
type upcaster struct {
	from    string
	in, out reflect.Type
	code    uintptr // fn's code: another function is another upcaster
	fn      func(any) (any, error)
}

// form is how the events stored under one name decode: into type t, through
// the upcasters steps (none for the name now and the renamed ones).
type form struct {
	err   error  // why events of the form cannot decode (a version that is none)
	none  string // the form the event's metadata names, which is not registered
	t     reflect.Type
	name  string // the type's name now
	steps []upcaster
	first int // the place of steps[0] among the entry's upcasters
	all   int // how many upcasters the entry has
}

// noEvent is the payload of an event its upcaster dropped: no projection
// handles it, so that it passes as an event of a type nobody handles does.
type noEvent struct{}

// forms returns the forms of en, by name; it panics when its upcasters do
// not chain.
func (en entry) forms() map[string]form {
	out := map[string]form{en.name: {t: en.t, name: en.name}}
	for _, old := range en.renamed {
		out[old] = form{t: en.t, name: en.name}
	}
	repairs := false // an upcaster from the name now (see Upcast)
	for i, s := range en.steps {
		next := en.t
		if i+1 < len(en.steps) {
			next = en.steps[i+1].in
		}
		if s.out != next && s.out != raw && next != raw && next != whole {
			panic(fmt.Sprintf("projector: upcaster from %q of %q gives %v, but the next step takes %v", s.from, en.name, s.out, next))
		}
		if _, dup := out[s.from]; dup && (s.from != en.name || repairs) {
			panic(fmt.Sprintf("projector: %q is given twice as a form of %q", s.from, en.name))
		}
		if s.from == en.name && i+1 < len(en.steps) {
			if slices.ContainsFunc(en.steps[i+1:], func(x upcaster) bool { return x.from == en.name }) {
				panic(fmt.Sprintf("projector: %q is given twice as a form of %q", s.from, en.name))
			}
			panic(fmt.Sprintf("projector: the upcaster from %q, the name %q has now, mends events of the shape they have now: "+
				"list it last, after the upcasters of the older forms, or the events it mends go through those too", s.from, en.name))
		}
		repairs = repairs || s.from == en.name
		out[s.from] = form{t: en.t, name: en.name, steps: en.steps[i:], first: i, all: len(en.steps)}
	}
	if repairs {
		// The names the type was renamed from hold the shape it has now:
		// their events go through the upcaster from the name now too.
		last := len(en.steps) - 1
		for _, old := range en.renamed {
			out[old] = form{t: en.t, name: en.name, steps: en.steps[last:], first: last, all: len(en.steps)}
		}
	}
	return out
}

// decode turns e's payload, stored in form f, into the registered type,
// through f's upcasters; nil with no error when one dropped it.
func (f form) decode(e Event) (any, error) {
	if f.err != nil {
		return nil, f.err
	}
	v := any(json.RawMessage(e.Data))
	for i, s := range f.steps {
		out, err := s.run(v, e)
		if errors.Is(err, DropEvent) {
			return noEvent{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("upcaster %d of %d of %s (from %q, %v to %v): %w", f.first+i+1, f.all, f.name, s.from, s.in, s.out, err)
		}
		v = out
	}
	return as(v, f.t)
}

// run runs the upcaster on v, taken as its input type: for one that takes
// the whole event, e with v as its data.
func (s upcaster) run(v any, e Event) (out any, err error) {
	defer func() {
		// The upcaster's panic, or its input's JSON methods' (as recovers
		// its own): one event's, never the process's.
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panicked: %v", r)
		}
	}()
	var in any
	if s.in == whole {
		in, err = withData(e, v)
	} else {
		in, err = as(v, s.in)
	}
	if err != nil {
		return nil, err
	}
	return s.fn(in)
}

// withData returns e as stored, with v's JSON as its data and nothing
// decoded.
func withData(e Event, v any) (Event, error) {
	data, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			return Event{}, fmt.Errorf("encode %T: %w", v, err)
		}
	}
	e.Data, e.Payload, e.undecodable = data, nil, nil
	return e, nil
}

// as returns v as a value of type t: itself when it is one, else through
// its JSON. A panic of the type's own JSON methods is an error of this
// event's: one malformed payload must not stop the process.
func as(v any, t reflect.Type) (out any, err error) {
	if reflect.TypeOf(v) == t {
		return v, nil
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("decode into %v: panicked: %v", t, r)
		}
	}()
	data, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("encode %T: %w", v, err)
		}
	}
	p := reflect.New(t)
	if len(bytes.TrimSpace(data)) == 0 {
		// No body at all (a client may write an event with no data): the
		// zero value, as the empty object gives a struct.
		return p.Elem().Interface(), nil
	}
	if err := json.Unmarshal(data, p.Interface()); err != nil {
		return nil, fmt.Errorf("decode into %v: %w", t, err)
	}
	return p.Elem().Interface(), nil
}

// formOf returns the form an event is stored in, and the name it was found
// under: the event's type with its metadata's version (see
// [Registry.VersionField]), else its type. Under VersionField, type T
// whose name now is "T.vN" (no form is named T) is that form's: an event
// of it without a version, or with an older one no form has, is read as
// "T.vN", the newest form so named (the type's name now, or an older name
// it was renamed from), as an event of T is read as T when T is a name; of
// a newer one, or one between no form has, it does not decode (see
// knownNewest).
func (r *Registry) formOf(e Event) (form, string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.forms[e.Type]
	if r.versionField == "" {
		return f, e.Type, ok
	}
	name := e.Type
	if newest, versioned := r.newest[e.Type]; !ok && versioned {
		f, ok, name = r.forms[newest], true, newest
	}
	v, held := metadataVersion(e.Metadata, r.versionField)
	switch {
	case v != "":
		key := e.Type + ".v" + v
		if f, ok := r.forms[key]; ok {
			return f, key, true
		}
		if written, ok := r.versions[key]; ok { // "T.v02", "T.V2"
			return r.forms[written], written, true
		}
		if newest := r.knownNewest(e.Type); newest != "" && ok {
			// The current shape's version is known, and v is not it: of a
			// shape the registry has never seen, it does not decode
			// (rather than as an older form's shape, or the current one).
			n, err := strconv.Atoi(v)
			switch tf, unversioned := r.forms[e.Type]; {
			case err != nil || n > versionNumber(newest):
				f.err = fmt.Errorf("its metadata's %q is %s, a version newer than %s, the newest this registry knows: deploy the projector that knows version %s before the writers that write it",
					r.versionField, v, newest, v)
				return f, name, ok
			case unversioned && !tf.current() && n <= 1:
				// 0 or 1, where the unversioned T is an older form (the one
				// before the first versioned one): T.
			case r.hasOlderForm(e.Type):
				// An older version with no form, where the registry holds
				// older forms of T (its shapes changed, each with a form):
				// forgotten, or registered under another name. Where it
				// holds none (versions that only added fields), it is read
				// as the current shape, as before.
				f.err = fmt.Errorf("its metadata's %q is %s, a version older than %s, the newest this registry knows, and no form is registered for it: "+
					"register %s (the shape of version %s) with its upcaster, or as a name of the current shape (Renamed) where it has that shape",
					r.versionField, v, newest, key, v)
				return f, name, ok
			}
		}
		f.none = key
	case held != "" && ok:
		// A version that is none: the event's shape cannot be told, and
		// it does not decode (rather than as the type's current shape).
		f.err = fmt.Errorf("its metadata's %q is %s, not a version (a number, or a string of one, with or without a \"v\")", r.versionField, held)
	}
	return f, name, ok
}

// knownNewest returns the newest form "T.vN" of type name t when N is
// the version of the current shape, known: the events of t without a
// version are not of the current shape (t is an older form, or none), or
// "T.vN" holds the current shape too. Then an event of a version no form
// has is of a shape the registry has never seen (a version newer than N,
// or, where older forms are registered, one older whose form was
// forgotten), except 0 or 1 where t is an older form: t, the form before
// the first versioned one. It returns ""
// otherwise; where t holds the current shape (its name now, or one it was
// renamed from), the current version is not known, and a version no form
// has is read as t (see [Registry.VersionField]). The caller holds r.mu.
func (r *Registry) knownNewest(t string) string {
	newest, versioned := r.newest[t]
	if !versioned {
		return ""
	}
	if f, ok := r.forms[t]; ok && f.current() {
		// t holds the current shape (the name now, or one it was Renamed
		// from): its version is not known, unless the newest "t.vN" holds
		// it too, and so names it.
		if nf := r.forms[newest]; !nf.current() || nf.t != f.t {
			return ""
		}
	}
	return newest
}

// hasOlderForm reports whether the registry holds a form of type name t
// that is not its current shape: t itself, or a "t.vN", read through an
// upcaster (noted as they are registered). The caller holds r.mu.
func (r *Registry) hasOlderForm(t string) bool { return r.older[t] }

// versionedBase is T of a form named "T.vN", else name itself.
func versionedBase(name string) string {
	if m := versionKey.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return name
}

// noteVersion notes name, a form's, when it is "T.vN": as version N of T,
// under "T.vN" written as formOf looks it up (for "T.v02" or "T.V2"; the
// first so written keeps it), and as the newest of its kind when N is the
// highest of them (see formOf); of two with the same N ("T.v3", "T.v03"),
// the first in order of their names.
func (r *Registry) noteVersion(name string) {
	m := versionKey.FindStringSubmatch(name)
	if m == nil {
		return
	}
	if key := m[1] + ".v" + strconv.Itoa(versionNumber(name)); key != name {
		if _, taken := r.versions[key]; !taken {
			r.versions[key] = name
		}
	}
	if cur, ok := r.newest[m[1]]; ok {
		if n, c := versionNumber(name), versionNumber(cur); n < c || n == c && name >= cur {
			return
		}
	}
	r.newest[m[1]] = name
}

// versionNumber is N of a name "T.vN" (0 if it does not fit an int).
func versionNumber(name string) int {
	n, _ := strconv.Atoi(name[strings.LastIndexAny(name, "vV")+1:])
	return n
}

// metadataVersion returns the version in field of metadata: a number, or a
// string of one, with or without a "v", a whole one written as a decimal
// (2.0); held is the field's JSON. When the field holds something else
// ("1.0.0", "one"), v is ""; both are "" without the field, with null or
// "" in it, or without metadata that is a JSON object.
func metadataVersion(metadata []byte, field string) (v, held string) {
	if len(metadata) == 0 {
		return "", ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return "", ""
	}
	rawV, ok := m[field]
	if !ok || string(rawV) == "null" || string(rawV) == `""` {
		return "", ""
	}
	var s string
	if json.Unmarshal(rawV, &s) != nil {
		s = string(rawV)
	}
	s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "v"), "V")
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return strconv.FormatUint(n, 10), string(rawV)
	}
	// 2.0, "2.0": a whole number written as a decimal one.
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && f < math.MaxUint32 && f == math.Trunc(f) {
		return strconv.FormatUint(uint64(f), 10), string(rawV)
	}
	return "", string(rawV)
}

// versionAffix is a version in a type name: "CardMoved.v2", "card-moved_v2",
// "CardMovedV2", "V2.CardMoved".
var versionAffix = regexp.MustCompile(`(?i)(?:[._-]?v\d+$|^v\d+[._-])`)

// kin is what two type names close to each other share: the name without
// its version, in lower case.
func kin(name string) string {
	return strings.ToLower(versionAffix.ReplaceAllString(name, ""))
}

// Near returns the name now of a registered type that typeName, which is
// not registered, is close to: the same as one of its names but for case
// or a version ("CardMoved.v2" for "CardMoved.v3" when "CardMoved.v2" is
// the type's name now, also when "CardMoved.v1" is an older form of it;
// "cardMoved" for "CardMoved"). Such a type
// is most likely one the registry should know: a rename or a new version
// without its upcaster. Runners log it, and count it in
// [RunnerStats.UnknownTypes].
func (r *Registry) Near(typeName string) (registered string, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if _, known := r.forms[typeName]; known {
		return "", false
	}
	if _, versioned := r.newest[typeName]; versioned && r.versionField != "" {
		return "", false // known: read as its newest version (see formOf)
	}
	names := r.kin[kin(typeName)]
	if len(names) == 0 {
		return "", false
	}
	// The name its type has now, rather than an older form's.
	return r.forms[names[0]].name, true
}

// addKin files the names of forms under what they share with close names.
func (r *Registry) addKin(forms map[string]form) {
	for name := range forms {
		k := kin(name)
		if !slices.Contains(r.kin[k], name) {
			r.kin[k] = append(r.kin[k], name)
			slices.Sort(r.kin[k])
		}
	}
}

// namesOf returns every name events of Go type t are stored under: its
// name now and its older forms'. Under [Registry.VersionField] a form
// "T.vN" is type T with version N in the metadata: its events are stored
// as T; and as "T.vN" itself, which [Registry.Decode] reads as that form
// too (a log whose older events carry their versions in their type
// names), so a filter of these names lets them through.
func (r *Registry) namesOf(t reflect.Type) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for n, f := range r.forms {
		if f.t != t {
			continue
		}
		if base, ok := r.versionedAs(n); ok {
			add(base)
		}
		add(n)
	}
	return names
}

// versionedAs returns T for a form named "T.vN" under
// [Registry.VersionField]: the type name its events are stored under, with
// the version in their metadata.
func (r *Registry) versionedAs(form string) (string, bool) {
	if r.versionField == "" {
		return "", false
	}
	if m := versionKey.FindStringSubmatch(form); m != nil {
		return m[1], true
	}
	return "", false
}

// versionKey is a form's name that names a version: "T.vN" ("T.VN").
var versionKey = regexp.MustCompile(`^(.+)\.[vV][0-9]+$`)

// current reports whether f holds its type's current shape: it is the name
// now, or a name the type was renamed from (through the repair from the
// name now, if there is one).
func (f form) current() bool {
	return len(f.steps) == 0 || len(f.steps) == 1 && f.steps[0].from == f.name
}
