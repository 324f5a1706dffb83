package keyspace

import (
	"sort"
	"strings"
)

// Hashes. A small hash is packed into one string, as Redis 7.0 packs it into a
// listpack: it costs one allocation (a held Redisson lock is such a hash), and
// it keeps insertion order, which is the order Redis replies for small hashes.
// Past Redis's limits (hash-max-listpack-entries 128, hash-max-listpack-value
// 64) it becomes a map, for good, as Redis's becomes a hash table; a map
// replies in sorted field order, so its replies are deterministic.
const (
	maxPackedEntries = 128
	maxPackedValue   = 64
)

// The packed form is a sequence of entries: a length byte and the field, a
// length byte and the value. Lengths fit a byte because of maxPackedValue.

// packedNext decodes the entry at off and returns its field, its value and the
// offset of the next entry.
func packedNext(p string, off int) (field, value string, next int) {
	n := int(p[off])
	field = p[off+1 : off+1+n]
	off += 1 + n
	n = int(p[off])
	value = p[off+1 : off+1+n]
	return field, value, off + 1 + n
}

// packedFind returns the offsets of the entry holding field and of its value.
func packedFind(p string, field []byte) (entry, value, end int, found bool) {
	for off := 0; off < len(p); {
		f, _, next := packedNext(p, off)
		if f == string(field) {
			return off, off + 1 + len(f), next, true
		}
		off = next
	}
	return 0, 0, 0, false
}

// newHash returns an empty hash object.
func newHash() object { return object{typ: typeHash} }

// hashMap returns the map of a hash that has left the packed form, or nil.
func (o *object) hashMap() map[string]string {
	m, _ := o.coll.(map[string]string)
	return m
}

// hashLen returns the number of fields.
func (o *object) hashLen() int {
	if m := o.hashMap(); m != nil {
		return len(m)
	}
	n := 0
	for off := 0; off < len(o.str); n++ {
		_, _, off = packedNext(o.str, off)
	}
	return n
}

// hashGet returns the value of field.
func (o *object) hashGet(field []byte) (string, bool) {
	if m := o.hashMap(); m != nil {
		v, ok := m[string(field)]
		return v, ok
	}
	_, v, end, ok := packedFind(o.str, field)
	if !ok {
		return "", false
	}
	return o.str[v+1 : end], true
}

// hashFit converts the hash to a map when any of the strings is too long for the
// packed form, as Redis's hashTypeTryConversion does before a write.
func (o *object) hashFit(strs ...[]byte) {
	if o.coll != nil {
		return
	}
	for _, s := range strs {
		if len(s) > maxPackedValue {
			o.hashToMap()
			return
		}
	}
}

// hashToMap moves a packed hash into a map.
func (o *object) hashToMap() {
	m := make(map[string]string)
	for off := 0; off < len(o.str); {
		var f, v string
		f, v, off = packedNext(o.str, off)
		m[f] = v
	}
	o.coll, o.str = m, ""
}

// hashSet sets field to value and reports whether the field is new. A field
// already present keeps its place. value is copied.
func (o *object) hashSet(field, value []byte) bool {
	if o.coll == nil && (len(field) > maxPackedValue || len(value) > maxPackedValue) {
		o.hashToMap()
	}
	if m := o.hashMap(); m != nil {
		_, exists := m[string(field)]
		m[string(field)] = string(value)
		return !exists
	}
	p := o.str
	var b strings.Builder
	if _, v, end, found := packedFind(p, field); found {
		b.Grow(len(p) - (end - v) + 1 + len(value))
		b.WriteString(p[:v])
		b.WriteByte(byte(len(value)))
		b.Write(value)
		b.WriteString(p[end:])
		o.str = b.String()
		return false
	}
	if o.hashLen() >= maxPackedEntries {
		o.hashToMap()
		o.hashMap()[string(field)] = string(value)
		return true
	}
	b.Grow(len(p) + 2 + len(field) + len(value))
	b.WriteString(p)
	b.WriteByte(byte(len(field)))
	b.Write(field)
	b.WriteByte(byte(len(value)))
	b.Write(value)
	o.str = b.String()
	return true
}

// hashDel removes field and reports whether it was there.
func (o *object) hashDel(field []byte) bool {
	if m := o.hashMap(); m != nil {
		if _, ok := m[string(field)]; !ok {
			return false
		}
		delete(m, string(field))
		return true
	}
	entry, _, end, found := packedFind(o.str, field)
	if !found {
		return false
	}
	o.str = o.str[:entry] + o.str[end:]
	return true
}

// hashEach calls fn for each field and value: in insertion order while packed,
// in sorted field order after.
func (o *object) hashEach(fn func(field, value string)) {
	m := o.hashMap()
	if m == nil {
		for off := 0; off < len(o.str); {
			var f, v string
			f, v, off = packedNext(o.str, off)
			fn(f, v)
		}
		return
	}
	fields := make([]string, 0, len(m))
	for f := range m {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		fn(f, m[f])
	}
}

// cloneHash returns a copy of a hash's value for COPY.
func (o *object) cloneHash() object {
	v := object{typ: typeHash, str: o.str}
	if m := o.hashMap(); m != nil {
		c := make(map[string]string, len(m))
		for f, val := range m {
			c[f] = val
		}
		v.coll = c
	}
	return v
}
