package esdbtest

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// setTruncateBefore returns a JSON object with "$tb" set to tb, its other
// members kept in their order, as the node's JObject edit in
// SoftUndeleteRawMeta does; false when raw is not a JSON object.
func setTruncateBefore(raw []byte, tb uint64) ([]byte, bool) {
	members, ok := objectMembers(raw)
	if !ok {
		return nil, false
	}
	value := json.RawMessage(strconv.FormatUint(tb, 10))
	replaced := false
	for i := range members {
		if members[i].name == "$tb" {
			members[i].value, replaced = value, true
		}
	}
	if !replaced {
		members = append(members, member{name: "$tb", value: value})
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(m.name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes(), true
}

type member struct {
	name  string
	value json.RawMessage
}

// objectMembers splits a JSON object into its members, compacted; a name
// given twice keeps its first place and its last value.
func objectMembers(raw []byte) ([]member, bool) {
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil || probe == nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var members []member
	seen := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return nil, false
		}
		if i, ok := seen[name]; ok {
			members[i].value = c.Bytes()
			continue
		}
		seen[name] = len(members)
		members = append(members, member{name: name, value: c.Bytes()})
	}
	return members, true
}
