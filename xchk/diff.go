package xchk

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/zetcd/zetcd/encoding"
)

// difference is one field on which zetcd's and ZooKeeper's answers disagree.
type difference struct {
	field  string // e.g. "stat.cversion", "results[1].err", "children"
	zetcd  string // zetcd's value, formatted
	zk     string // ZooKeeper's value, formatted
	detail string // why equal-looking values differ (zxid and owner pairing), or ""
}

// label is the field without indices, for the metric: "results[1].stat.mzxid" counts as
// "results.stat.mzxid" so the label set stays small.
func (d difference) label() string {
	if !strings.Contains(d.field, "[") {
		return d.field
	}
	var b strings.Builder
	skip := false
	for _, r := range d.field {
		switch {
		case r == '[':
			skip = true
		case r == ']':
			skip = false
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	zxidType    = reflect.TypeFor[encoding.Zxid]()
	sessionType = reflect.TypeFor[encoding.SessionID]()
	bytesType   = reflect.TypeFor[[]byte]()
	stringsType = reflect.TypeFor[[]string]()
	resultType  = reflect.TypeFor[encoding.MultiResult]()
)

// ignoredFields are never compared: wall-clock times differ between any two servers.
var ignoredFields = map[string]bool{"Ctime": true, "Mtime": true}

// differ compares two records of the same type field by field, by reflection, so every record
// of the encoding package (and any added later) is compared without a hand-written comparison:
//
//   - Zxid fields are paired through the session's zxidMap (relative, not absolute);
//   - SessionID fields (ephemeralOwner) through the process's ownerMap;
//   - []byte keeps null apart from empty;
//   - []string (children, ephemerals) is compared as a set, null apart from empty;
//   - other slices element by element, structs field by field, interfaces by dynamic type
//     and then value;
//   - strings as a client reads them (encoding.JavaRoundTrip);
//   - Ctime and Mtime are skipped.
type differ struct {
	zxids  *zxidMap
	owners *ownerMap
	diffs  []difference
}

func (d *differ) add(field, z, k, detail string) {
	d.diffs = append(d.diffs, difference{field: field, zetcd: z, zk: k, detail: detail})
}

// records compares zetcd's record z with ZooKeeper's k under the field name prefix.
func (d *differ) records(prefix string, z, k encoding.Record) {
	d.value(prefix, reflect.ValueOf(z), reflect.ValueOf(k))
}

func (d *differ) value(field string, z, k reflect.Value) {
	if !z.IsValid() || !k.IsValid() {
		if z.IsValid() != k.IsValid() {
			d.add(orBody(field), describe(z), describe(k), "")
		}
		return
	}
	if z.Type() != k.Type() {
		d.add(orBody(field), z.Type().String(), k.Type().String(), "")
		return
	}
	switch t := z.Type(); {
	case t == zxidType:
		za, ka := encoding.Zxid(z.Int()), encoding.Zxid(k.Int())
		if why := d.zxids.pair(za, ka); why != "" {
			d.add(field, za.String(), ka.String(), why)
		}
		return
	case t == sessionType:
		za, ka := encoding.SessionID(z.Int()), encoding.SessionID(k.Int())
		if why := d.owners.pair(za, ka); why != "" {
			d.add(field, za.String(), ka.String(), why)
		}
		return
	case t == bytesType:
		if z.IsNil() != k.IsNil() || !bytes.Equal(z.Bytes(), k.Bytes()) {
			d.add(field, describe(z), describe(k), "")
		}
		return
	case t == stringsType:
		if z.IsNil() != k.IsNil() || !slices.Equal(sortedStrings(z), sortedStrings(k)) {
			d.add(field, describe(z), describe(k), "")
		}
		return
	case t == resultType:
		d.result(field, z.Interface().(encoding.MultiResult), k.Interface().(encoding.MultiResult))
		return
	}
	switch z.Kind() {
	case reflect.Pointer, reflect.Interface:
		if z.IsNil() || k.IsNil() {
			if z.IsNil() != k.IsNil() {
				d.add(orBody(field), describe(z), describe(k), "")
			}
			return
		}
		d.value(field, z.Elem(), k.Elem())
	case reflect.Struct:
		for i := range z.NumField() {
			f := z.Type().Field(i)
			if !f.IsExported() || ignoredFields[f.Name] {
				continue
			}
			d.value(join(field, lowerFirst(f.Name)), z.Field(i), k.Field(i))
		}
	case reflect.Slice:
		if z.IsNil() != k.IsNil() || z.Len() != k.Len() {
			d.add(join(field, "len"), describe(z), describe(k), "")
			return
		}
		for i := range z.Len() {
			d.value(fmt.Sprintf("%s[%d]", field, i), z.Index(i), k.Index(i))
		}
	case reflect.String:
		// ZooKeeper's string is what its client read; zetcd's is what zetcd will write, which
		// a client reads as JavaRoundTrip (a character outside the BMP is two U+FFFD).
		if encoding.JavaRoundTrip(z.String()) != k.String() {
			d.add(field, describe(z), describe(k), "")
		}
	default:
		if !z.Equal(k) {
			d.add(field, describe(z), describe(k), "")
		}
	}
}

// result compares one multi result as it travels on the wire: type and code, and the body
// (named by its own fields, e.g. "results[1].stat.mzxid") unless the op failed. A missing body
// and *encoding.Empty are the same thing.
func (d *differ) result(field string, z, k encoding.MultiResult) {
	d.value(join(field, "op"), reflect.ValueOf(z.Op), reflect.ValueOf(k.Op))
	d.value(join(field, "err"), reflect.ValueOf(z.Err), reflect.ValueOf(k.Err))
	if z.Op != k.Op || z.Op == encoding.OpError {
		return
	}
	body := func(r encoding.Record) reflect.Value {
		if _, empty := r.(*encoding.Empty); empty || r == nil {
			return reflect.Value{}
		}
		return reflect.ValueOf(r)
	}
	d.value(field, body(z.Record), body(k.Record))
}

func orBody(field string) string {
	if field == "" {
		return "body"
	}
	return field
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// lowerFirst turns a Go field name into the field's name in logs: "Cversion" → "cversion",
// "ACL" → "acl", "EphemeralOwner" → "ephemeralOwner".
func lowerFirst(s string) string {
	if strings.ToUpper(s) == s {
		return strings.ToLower(s)
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}

func sortedStrings(v reflect.Value) []string {
	s := slices.Clone(v.Interface().([]string))
	slices.Sort(s)
	return s
}

// maxShown bounds how much of a value a log line carries.
const maxShown = 256

// describe formats a value for a log line: null apart from empty, string lists sorted, long
// values cut.
func describe(v reflect.Value) string {
	if !v.IsValid() {
		return "none"
	}
	var s string
	switch {
	case (v.Kind() == reflect.Slice || v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil():
		s = "null"
	case v.Type() == bytesType:
		s = fmt.Sprintf("%q", v.Bytes())
	case v.Type() == stringsType:
		s = "[" + strings.Join(sortedStrings(v), " ") + "]"
	case v.Kind() == reflect.Slice:
		s = fmt.Sprintf("%d %+v", v.Len(), v.Interface())
	default:
		s = fmt.Sprintf("%+v", v.Interface())
	}
	if len(s) > maxShown {
		s = s[:maxShown] + "…"
	}
	return s
}

// rewrite changes, in place, every Zxid and SessionID field reachable from rec with the given
// functions: a ZooKeeper answer handed to a client is translated into the numbering of the
// client's zetcd session.
func rewrite(rec encoding.Record, zxid func(encoding.Zxid) encoding.Zxid, sid func(encoding.SessionID) encoding.SessionID) {
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch {
		case v.Type() == zxidType:
			if v.CanSet() {
				v.SetInt(int64(zxid(encoding.Zxid(v.Int()))))
			}
			return
		case v.Type() == sessionType:
			if v.CanSet() {
				v.SetInt(int64(sid(encoding.SessionID(v.Int()))))
			}
			return
		}
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			if v.Type() != bytesType && v.Type() != stringsType {
				for i := range v.Len() {
					walk(v.Index(i))
				}
			}
		}
	}
	if rec != nil {
		walk(reflect.ValueOf(rec))
	}
}
