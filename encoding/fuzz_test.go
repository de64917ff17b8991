package encoding

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

// raw is a Record that is just its bytes, to re-frame fuzzed payloads.
type raw []byte

func (r *raw) Encode(e *Encoder) { e.buf = append(e.buf, *r...) }
func (r *raw) Decode(d *Decoder) { *r = append((*r)[:0], d.take(d.Remaining(), "raw")...) }

// checkReencode asserts that a successfully decoded record encodes to bytes
// that decode to an equal value. Equality of bytes with the input is not
// required: booleans normalise to 0/1, trailing bytes are ignored and the
// multi terminator's fields are not kept.
func checkReencode(t *testing.T, got Record, fresh func() Record) {
	t.Helper()
	enc := AppendRecord(nil, got)
	again := fresh()
	if err := DecodeRecord(enc, again); err != nil {
		t.Fatalf("re-decode %T: %v\nencoded %x", got, err, enc)
	}
	if !reflect.DeepEqual(got, again) {
		t.Fatalf("re-decode %T differs:\nfirst  %#v\nsecond %#v", got, got, again)
	}
	if enc2 := AppendRecord(nil, again); !bytes.Equal(enc, enc2) {
		t.Fatalf("encoding not stable:\n%x\n%x", enc, enc2)
	}
}

// checkDecodeErr asserts a decode error wraps one of the package sentinels,
// so callers can tell malformed input from anything else.
func checkDecodeErr(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrShortBuffer) && !errors.Is(err, ErrBadLength) && !errors.Is(err, ErrBadMultiOp) {
		t.Fatalf("decode error %v wraps no sentinel", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	for _, g := range goldens {
		f.Add(AppendFrame(nil, g.rec), uint16(0))
	}
	f.Add(AppendFrame(AppendFrame(nil, &Empty{}), &RequestHeader{Xid: 1, Op: OpPing}), uint16(4))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint16(0))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 1}, uint16(0))
	f.Add([]byte("ruok"), uint16(0))
	f.Add([]byte{0, 0, 0, 3, 'a'}, uint16(2))
	f.Fuzz(func(t *testing.T, data []byte, max uint16) {
		limit := int(max)
		if limit == 0 {
			limit = DefaultMaxFrameBytes
		}
		r := bytes.NewReader(data)
		buf := make([]byte, 0, 8)
		consumed := 0
		for {
			p, err := ReadFrame(r, buf, int(max))
			if err != nil {
				switch {
				case err == io.EOF:
					if consumed != len(data) {
						t.Fatalf("io.EOF after %d of %d bytes", consumed, len(data))
					}
				case errors.Is(err, io.ErrUnexpectedEOF):
					if consumed == len(data) {
						t.Fatal("ErrUnexpectedEOF at a frame boundary")
					}
				case errors.Is(err, ErrNegativeLength), errors.Is(err, ErrFrameTooLarge):
					// Rejected on the length alone: nothing beyond it read.
					if got := len(data) - r.Len(); got != consumed+4 {
						t.Fatalf("bad length consumed %d bytes, want %d", got-consumed, 4)
					}
				default:
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(p) > limit {
				t.Fatalf("payload %d bytes exceeds limit %d", len(p), limit)
			}
			if !bytes.Equal(p, data[consumed+4:consumed+4+len(p)]) {
				t.Fatal("payload differs from input")
			}
			rp := raw(p)
			reframed := AppendFrame(nil, &rp)
			if !bytes.Equal(reframed, data[consumed:consumed+4+len(p)]) {
				t.Fatalf("re-framed %x, input %x", reframed, data[consumed:consumed+4+len(p)])
			}
			consumed += 4 + len(p)
			if cap(p) >= cap(buf) {
				buf = p
			}
		}
	})
}

func FuzzConnectRequest(f *testing.F) {
	for _, g := range goldens {
		switch g.rec.(type) {
		case *ConnectRequest, *ConnectResponse:
			f.Add(goldenBytes(f, g.hex))
		}
	}
	f.Add(golden(f, "ConnectRequest/44-no-readonly")[:43])
	f.Fuzz(func(t *testing.T, data []byte) {
		var req ConnectRequest
		if err := DecodeRecord(data, &req); err != nil {
			checkDecodeErr(t, err)
		} else {
			if req.HasReadOnly != (len(data) > 28+len(req.Passwd)) {
				t.Fatalf("HasReadOnly %v with %d bytes and %d-byte passwd", req.HasReadOnly, len(data), len(req.Passwd))
			}
			checkReencode(t, &req, func() Record { return &ConnectRequest{} })
		}
		// The response shares the optional-byte rule; fuzz it on the same input.
		var resp ConnectResponse
		if err := DecodeRecord(data, &resp); err != nil {
			checkDecodeErr(t, err)
		} else {
			checkReencode(t, &resp, func() Record { return &ConnectResponse{} })
		}
	})
}

// seedOps adds every sample record, encoded, under each opcode whose table
// entry (request or response) has that record type.
func seedOps(f *testing.F, table func(Op) (Record, bool)) {
	samples := sampleRecords()
	for _, tt := range opTable {
		want, ok := table(tt.op)
		for _, s := range samples {
			if ok && reflect.TypeOf(s) == reflect.TypeOf(want) {
				f.Add(int32(tt.op), AppendRecord(nil, s))
			}
		}
	}
	f.Add(int32(OpMulti), golden(f, "MultiRequest/create-check"))
	f.Add(int32(OpCreate), golden(f, "CreateRequest"))
}

func fuzzTable(t *testing.T, table func(Op) (Record, bool), op int32, data []byte) {
	rec, ok := table(Op(op))
	if !ok {
		return
	}
	if err := DecodeRecord(data, rec); err != nil {
		checkDecodeErr(t, err)
		return
	}
	checkReencode(t, rec, func() Record { r, _ := table(Op(op)); return r })
}

func FuzzRequest(f *testing.F) {
	seedOps(f, NewRequest)
	f.Fuzz(func(t *testing.T, op int32, data []byte) { fuzzTable(t, NewRequest, op, data) })
}

func FuzzResponse(f *testing.F) {
	seedOps(f, NewResponse)
	f.Fuzz(func(t *testing.T, op int32, data []byte) { fuzzTable(t, NewResponse, op, data) })
}

func FuzzMultiRequest(f *testing.F) {
	f.Add(AppendRecord(nil, &MultiRequest{Ops: sampleMultiOps()}))
	f.Add(AppendRecord(nil, &MultiRequest{}))
	for _, g := range goldens {
		if _, ok := g.rec.(*MultiRequest); ok {
			f.Add(goldenBytes(f, g.hex))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r MultiRequest
		if err := DecodeRecord(data, &r); err != nil {
			checkDecodeErr(t, err)
			return
		}
		for _, op := range r.Ops {
			if op.Record == nil {
				t.Fatalf("op %v decoded without a record", op.Op)
			}
		}
		checkReencode(t, &r, func() Record { return &MultiRequest{} })
	})
}

func FuzzMultiResponse(f *testing.F) {
	f.Add(AppendRecord(nil, &MultiResponse{Results: sampleMultiResults()}))
	f.Add(AppendRecord(nil, &MultiResponse{}))
	for _, g := range goldens {
		if _, ok := g.rec.(*MultiResponse); ok {
			f.Add(goldenBytes(f, g.hex))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r MultiResponse
		if err := DecodeRecord(data, &r); err != nil {
			checkDecodeErr(t, err)
			return
		}
		checkReencode(t, &r, func() Record { return &MultiResponse{} })
	})
}
