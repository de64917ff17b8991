package encoding

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Sentinel decode errors. Errors returned by Decoder.Err and DecodeRecord wrap
// one of these (test with errors.Is); the wrapping text says which field and
// how many bytes were left.
var (
	// ErrShortBuffer means the input ended before a field, or before the
	// bytes a length or count promised.
	ErrShortBuffer = errors.New("zk encoding: short buffer")
	// ErrBadLength means a string or buffer length was negative and not -1
	// (null). (A negative vector count is an empty vector: VectorLen.)
	ErrBadLength = errors.New("zk encoding: bad length")
	// ErrBadMultiOp means a multi request or response contained an op type
	// that may not appear there. A server answers MarshallingError.
	ErrBadMultiOp = errors.New("zk encoding: bad op type in multi")
)

// Decoder reads jute-encoded values from a byte slice.
//
// The error is sticky: after the first failure every read returns the zero
// value and Err reports that first failure, so a record's Decode can read all
// its fields and check once. Every length read from the input is checked
// against the bytes that remain before anything is allocated, so hostile
// input costs at most a copy of itself and never panics.
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	buf []byte
	off int
	err error
	// null is set once a null ustring has been read (String).
	null bool
}

// NewDecoder returns a Decoder reading b. The Decoder does not modify b, and
// nothing it returns aliases b, so b may be reused once decoding is done.
func NewDecoder(b []byte) *Decoder { return &Decoder{buf: b} }

// Err returns the first error encountered, or nil.
func (d *Decoder) Err() error { return d.err }

// Remaining returns the number of unread bytes, or 0 after an error.
func (d *Decoder) Remaining() int {
	if d.err != nil {
		return 0
	}
	return len(d.buf) - d.off
}

// Fail records err as the decoder's error unless one is already recorded.
// Records use it to reject values that are well-formed jute but invalid
// for the record (for example an unknown op type inside a multi).
func (d *Decoder) Fail(err error) {
	if d.err == nil && err != nil {
		d.err = err
	}
}

// take returns the next n bytes (aliasing d.buf) or nil after recording a
// short-buffer error naming what was being read.
func (d *Decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.buf)-d.off {
		d.err = fmt.Errorf("%w: %s needs %d bytes, %d remain", ErrShortBuffer, what, n, len(d.buf)-d.off)
		return nil
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

// Int32 reads a jute int.
func (d *Decoder) Int32() int32 {
	b := d.take(4, "int")
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

// Int64 reads a jute long.
func (d *Decoder) Int64() int64 {
	b := d.take(8, "long")
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// Bool reads a jute boolean. Any non-zero byte is true, as in ZooKeeper's
// BinaryInputArchive.
func (d *Decoder) Bool() bool {
	b := d.take(1, "boolean")
	return b != nil && b[0] != 0
}

// length reads a length prefix for a byte run. It returns -1 for null and
// otherwise a length no larger than the bytes remaining after the prefix.
func (d *Decoder) length(what string) int {
	n := d.Int32()
	if d.err != nil {
		return -1
	}
	switch {
	case n == -1:
		return -1
	case n < 0:
		d.err = fmt.Errorf("%w: %s length %d", ErrBadLength, what, n)
		return -1
	case int64(n) > int64(len(d.buf)-d.off):
		d.err = fmt.Errorf("%w: %s length %d, %d bytes remain", ErrShortBuffer, what, n, len(d.buf)-d.off)
		return -1
	}
	return int(n)
}

// Buffer reads a jute buffer. Null (length -1) is returned as nil and empty
// (length 0) as a non-nil empty slice, because ZooKeeper keeps the two
// apart (a znode can hold null data). The result is a copy.
func (d *Decoder) Buffer() []byte {
	n := d.length("buffer")
	if n < 0 {
		return nil
	}
	b := make([]byte, n)
	copy(b, d.take(n, "buffer"))
	return b
}

// String reads a jute ustring. Null decodes as "", in the fields where
// ZooKeeper answers a null as an empty string or refuses it whatever the field
// (NullString is for the others). Invalid UTF-8 is replaced as ZooKeeper's
// Java decoding replaces it (JavaString).
//
// The name makes *Decoder a fmt.Stringer: formatting a Decoder with %v or
// %s consumes input. Log d.Remaining() or d.Err() instead.
func (d *Decoder) String() string {
	n := d.length("ustring")
	if n < 0 {
		d.null = d.null || d.err == nil // -1 is null; an error is not
		return ""
	}
	return JavaString(d.take(n, "ustring"))
}

// NullString is a null ustring (length -1) where ZooKeeper's answer depends on the string being
// null rather than empty: the path of a write request (create, delete, setData, setACL, check) and
// of sync, and an ACL's scheme and id. Those records decode a null as NullString (NullableString)
// and the Encoder writes it back as null. It is the byte 0xff, which no decoded string holds
// (JavaString never writes it), so it cannot be a string a client sent.
const NullString = "\xff"

// NullableString is String with null decoded as NullString.
func (d *Decoder) NullableString() string {
	n := d.length("ustring")
	if n < 0 {
		d.null = d.null || d.err == nil // -1 is null; an error is not
		return NullString
	}
	return JavaString(d.take(n, "ustring"))
}

// knownString is NullableString, returning the one of known it equals rather than a new string.
func (d *Decoder) knownString(known []string) string {
	n := d.length("ustring")
	if n < 0 {
		d.null = d.null || d.err == nil // -1 is null; an error is not
		return NullString
	}
	b := d.take(n, "ustring")
	for _, k := range known {
		if string(b) == k {
			return k
		}
	}
	return JavaString(b)
}

// VectorLen reads a vector count and returns it, or -1 for a null vector or
// after an error. Any other negative count is 0: ZooKeeper reads a vector's
// elements while its count, counting down, is above zero. minElemSize is the
// fewest bytes one element can occupy (at least 1 is assumed); a count whose
// elements could not possibly fit in the remaining input is rejected before
// the caller allocates for it.
func (d *Decoder) VectorLen(minElemSize int) int {
	n := d.Int32()
	if d.err != nil {
		return -1
	}
	if minElemSize < 1 {
		minElemSize = 1
	}
	switch {
	case n == -1:
		return -1
	case n < 0:
		return 0
	case int64(n)*int64(minElemSize) > int64(len(d.buf)-d.off):
		d.err = fmt.Errorf("%w: vector of %d elements of at least %d bytes, %d bytes remain",
			ErrShortBuffer, n, minElemSize, len(d.buf)-d.off)
		return -1
	}
	return int(n)
}

// Strings reads a jute vector<ustring>. Null decodes as nil, empty as a
// non-nil empty slice.
func (d *Decoder) Strings() []string {
	n := d.VectorLen(4)
	if n < 0 {
		return nil
	}
	s := make([]string, n)
	for i := range s {
		s[i] = d.String()
	}
	if d.err != nil {
		return nil
	}
	return s
}

// Encoder appends jute-encoded values to a byte slice. Encoding cannot fail.
// The zero Encoder is ready to use and starts from an empty slice.
type Encoder struct {
	buf []byte
	// javaStrings writes strings as ZooKeeper writes a Java string (JavaBytes); MarshalReply
	// sets it for the replies and events that can hold characters outside the BMP.
	javaStrings bool
}

// NewEncoder returns an Encoder that appends to b.
func NewEncoder(b []byte) *Encoder { return &Encoder{buf: b} }

// Bytes returns the slice with everything encoded so far appended.
func (e *Encoder) Bytes() []byte { return e.buf }

// Int32 appends a jute int.
func (e *Encoder) Int32(v int32) { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }

// Int64 appends a jute long.
func (e *Encoder) Int64(v int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }

// Bool appends a jute boolean as 0 or 1.
func (e *Encoder) Bool(v bool) {
	var b byte
	if v {
		b = 1
	}
	e.buf = append(e.buf, b)
}

// Buffer appends a jute buffer: nil as null (length -1), a non-nil empty
// slice as length 0.
func (e *Encoder) Buffer(b []byte) {
	if b == nil {
		e.Int32(-1)
		return
	}
	e.Int32(int32(len(b)))
	e.buf = append(e.buf, b...)
}

// String appends a jute ustring. "" is written as empty (length 0), and
// NullString as null (length -1).
func (e *Encoder) String(s string) {
	if s == NullString {
		e.Int32(-1)
		return
	}
	if e.javaStrings {
		s = JavaBytes(s)
	}
	e.Int32(int32(len(s)))
	e.buf = append(e.buf, s...)
}

// Strings appends a jute vector<ustring>: nil as null (count -1), a non-nil
// empty slice as count 0.
func (e *Encoder) Strings(s []string) {
	if s == nil {
		e.Int32(-1)
		return
	}
	e.Int32(int32(len(s)))
	for _, v := range s {
		e.String(v)
	}
}

// Record is a jute record. Implementations must not retain the Encoder or
// Decoder passed to them: the package reuses them between calls.
type Record interface {
	// Encode appends the record's fields in jute order.
	Encode(e *Encoder)
	// Decode reads the record's fields in jute order; failures are
	// reported through d.Err.
	Decode(d *Decoder)
}

// encoderPool recycles Encoders for AppendRecord and AppendFrame. Passing an
// *Encoder to a Record's Encode is an interface call, so escape analysis
// must assume it escapes; without the pool every frame would allocate one.
var encoderPool = sync.Pool{New: func() any { return new(Encoder) }}

// AppendRecord appends the encoding of r to b and returns the extended slice.
func AppendRecord(b []byte, r Record) []byte {
	e := encoderPool.Get().(*Encoder)
	e.buf = b
	r.Encode(e)
	b = e.buf
	e.buf = nil
	encoderPool.Put(e)
	return b
}

// DecodeRecord decodes r from b. Bytes after the record are ignored, as
// ZooKeeper's BinaryInputArchive ignores them; old clients rely on this (for
// example a 36-byte ConnectResponse read by a client expecting 37). The
// error wraps ErrShortBuffer, ErrBadLength or ErrBadMultiOp. On error r may
// be partially filled.
//
// DecodeRecord inlines: called with a record of a known type, the compiler calls its Decode
// directly and keeps the Decoder and the record on the caller's stack.
func DecodeRecord(b []byte, r Record) error {
	d := Decoder{buf: b}
	r.Decode(&d)
	return d.err
}

// DecodeRecordNulls is DecodeRecord that also reports whether r held a null
// ustring (length -1), which String decodes as "". ZooKeeper's Java code gets
// a null there, and what it answers then depends on where the null is, which
// is the server's to decide (zetcd's parseRequestBody).
func DecodeRecordNulls(b []byte, r Record) (nullString bool, err error) {
	null, err := decodePooled(b, r)
	return null && err == nil, err
}

// decoderPool recycles the Decoders of DecodeRecordNulls, which a server calls with a request
// record it knows by its interface (NewRequest): passed to its Decode, an interface call, a
// Decoder escapes. Record.Decode does not keep its Decoder.
var decoderPool = sync.Pool{New: func() any { return new(Decoder) }}

// decodePooled decodes r from b with a pooled Decoder, and says whether a null ustring was read.
func decodePooled(b []byte, r Record) (null bool, err error) {
	d := decoderPool.Get().(*Decoder)
	*d = Decoder{buf: b}
	r.Decode(d)
	null, err = d.null, d.err
	*d = Decoder{}
	decoderPool.Put(d)
	return null, err
}
