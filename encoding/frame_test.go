package encoding

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"testing"
	"testing/iotest"
)

// countingReader records how many bytes were consumed, to prove that a bad
// length is rejected before the payload is read.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadFrame(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		max      int
		want     string // payload hex when err is nil
		err      error
		consumed int // bytes read from the stream
	}{
		{name: "ok", in: "00000003 616263 ff", want: "616263", consumed: 7},
		{name: "empty-payload", in: "00000000", want: "", consumed: 4},
		{name: "at-max", in: "00000002 6162", max: 2, want: "6162", consumed: 6},
		{name: "clean-eof", in: "", err: io.EOF},
		{name: "eof-in-length", in: "0000", err: io.ErrUnexpectedEOF, consumed: 2},
		{name: "eof-before-payload", in: "00000003", err: io.ErrUnexpectedEOF, consumed: 4},
		{name: "eof-in-payload", in: "00000003 6162", err: io.ErrUnexpectedEOF, consumed: 6},
		{name: "negative", in: "ffffffff 00000000", err: ErrNegativeLength, consumed: 4},
		{name: "min-int", in: "80000000", err: ErrNegativeLength, consumed: 4},
		{name: "over-max", in: "00000003 616263", max: 2, err: ErrFrameTooLarge, consumed: 4},
		{name: "over-default", in: "00100000 00", err: ErrFrameTooLarge, consumed: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := &countingReader{r: iotest.OneByteReader(bytes.NewReader(unhex(t, tt.in)))}
			got, err := ReadFrame(cr, nil, tt.max)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
			} else if err != nil || !bytes.Equal(got, unhex(t, tt.want)) {
				t.Fatalf("got %x, %v; want %s", got, err, tt.want)
			}
			if cr.n != tt.consumed {
				t.Fatalf("consumed %d bytes, want %d", cr.n, tt.consumed)
			}
		})
	}
}

// TestReadFrameOversizedNotRead: a reader that fails on any read after the
// length shows the payload of an oversized frame is never touched.
func TestReadFrameOversizedNotRead(t *testing.T) {
	r := io.MultiReader(bytes.NewReader(unhex(t, "7fffffff")), iotest.ErrReader(errors.New("payload read")))
	if _, err := ReadFrame(r, nil, 0); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v", err)
	}
}

func TestReadFrameError(t *testing.T) {
	boom := errors.New("boom")
	if _, err := ReadFrame(iotest.ErrReader(boom), nil, 0); err != boom {
		t.Fatalf("err = %v", err)
	}
	r := io.MultiReader(bytes.NewReader([]byte{0, 0, 0, 5, 1}), iotest.ErrReader(boom))
	if _, err := ReadFrame(r, nil, 0); err != boom {
		t.Fatalf("err = %v", err)
	}
}

func TestReadFrameBufferReuse(t *testing.T) {
	stream := AppendFrame(nil, &SyncRequest{Path: "/first"})
	stream = AppendFrame(stream, &SyncRequest{Path: "/second-longer-than-buf"})
	stream = AppendFrame(stream, &Empty{})
	r := bytes.NewReader(stream)

	buf := make([]byte, 0, 16)
	p, err := ReadFrame(r, buf, 0)
	if err != nil || &p[:1][0] != &buf[:1][0] {
		t.Fatalf("first frame: err %v, reused %v", err, err == nil && &p[0] == &buf[:1][0])
	}
	var s SyncRequest
	if err := DecodeRecord(p, &s); err != nil || s.Path != "/first" {
		t.Fatalf("first: %v %q", err, s.Path)
	}
	p, err = ReadFrame(r, buf, 0)
	if err != nil || cap(p) <= cap(buf) {
		t.Fatalf("second frame: err %v cap %d", err, cap(p))
	}
	if err := DecodeRecord(p, &s); err != nil || s.Path != "/second-longer-than-buf" {
		t.Fatalf("second: %v %q", err, s.Path)
	}
	buf = p // callers keep the grown buffer
	p, err = ReadFrame(r, buf, 0)
	if err != nil || len(p) != 0 || cap(p) != cap(buf) {
		t.Fatalf("third frame: %v len %d", err, len(p))
	}
	if _, err := ReadFrame(r, buf, 0); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestAppendFrame(t *testing.T) {
	hdr := &ReplyHeader{Xid: 7, Zxid: 0x1f, Err: ErrOK}
	body := &GetDataResponse{Data: []byte("hi"), Stat: sampleStat}
	prefix := []byte("xyz")
	out := AppendFrame(append([]byte{}, prefix...), hdr, nil, body)
	if !bytes.HasPrefix(out, prefix) {
		t.Fatal("prefix clobbered")
	}
	want := append(AppendRecord(nil, hdr), AppendRecord(nil, body)...)
	p, err := ReadFrame(bytes.NewReader(out[len(prefix):]), nil, 0)
	if err != nil || !bytes.Equal(p, want) {
		t.Fatalf("frame payload %x, %v", p, err)
	}
	if len(want) != 16+4+2+68 {
		t.Fatalf("payload size %d", len(want))
	}
	// The ping reply: header only.
	ping := AppendFrame(nil, &ReplyHeader{Xid: XidPing, Zxid: 0x1f})
	if !bytes.Equal(ping, unhex(t, "00000010 fffffffe 000000000000001f 00000000")) {
		t.Fatalf("ping reply %x", ping)
	}
}

func TestWriteFrame(t *testing.T) {
	var w bytes.Buffer
	buf, err := WriteFrame(&w, make([]byte, 5), &RequestHeader{Xid: XidPing, Op: OpPing})
	if err != nil || !bytes.Equal(w.Bytes(), unhex(t, "00000008 fffffffe 0000000b")) {
		t.Fatalf("%x %v", w.Bytes(), err)
	}
	if len(buf) != 12 {
		t.Fatalf("returned buffer len %d", len(buf))
	}
}

// TestFrameAllocs pins the allocation budget of the hot framing path: with a
// big enough buffer, reading a frame and encoding a reply allocate nothing.
// Encoders come from a sync.Pool because passing one to Record.Encode is an
// interface call that makes it escape; the records here are allocated
// outside the measured function, as a server reusing reply records would.
func TestFrameAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("instrumentation changes allocation counts")
	}
	frame := AppendFrame(nil, &RequestHeader{Xid: 1, Op: OpGetData}, &GetDataRequest{Path: "/some/znode", Watch: true})
	r := bytes.NewReader(frame)
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(1000, func() {
		r.Reset(frame)
		p, err := ReadFrame(r, buf, DefaultMaxFrameBytes)
		if err != nil || len(p) != len(frame)-4 {
			t.Fatalf("ReadFrame: %v", err)
		}
	}); n != 0 {
		t.Errorf("ReadFrame allocs = %v, want 0", n)
	}

	hdr := &ReplyHeader{Xid: 1, Zxid: 0x1f}
	body := &GetDataResponse{Data: bytes.Repeat([]byte("x"), 100), Stat: sampleStat}
	out := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(1000, func() {
		out = AppendFrame(out[:0], hdr, body)
	}); n != 0 {
		t.Errorf("AppendFrame allocs = %v, want 0", n)
	}
	if len(out) != 4+16+4+100+68 {
		t.Fatalf("frame length %d", len(out))
	}

	if n := testing.AllocsPerRun(1000, func() {
		out = AppendRecord(out[:0], hdr)
	}); n != 0 {
		t.Errorf("AppendRecord allocs = %v, want 0", n)
	}

	if n := testing.AllocsPerRun(1000, func() {
		out = MarshalFrame(hdr, body)
	}); n != 1 {
		t.Errorf("MarshalFrame allocs = %v, want 1 (the frame)", n)
	}
	// Decoding a request: its header (of a type the caller knows) allocates nothing; its body, a
	// record known only by its interface, as a server decodes it (NewRequest), only the path.
	req := AppendRecord(nil, &GetDataRequest{Path: "/some/znode", Watch: true})
	var rh RequestHeader
	var gd GetDataRequest
	if n := testing.AllocsPerRun(1000, func() {
		if err := DecodeRecord(frame[4:], &rh); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("DecodeRecord of a RequestHeader allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := decodeNullsOpaque(req, &gd); err != nil || gd.Path != "/some/znode" {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("DecodeRecordNulls of a GetDataRequest allocates %v times, want 1 (the path)", n)
	}

	// A reply's frame comes from the frame pool, given back once written: none in a steady state.
	reply := func(h ReplyHeader) { MarshalReply(h, body).Release() } // h is a local: does it escape?
	if n := testing.AllocsPerRun(1000, func() { reply(ReplyHeader{Xid: 1, Zxid: 0x1f}) }); n != 0 {
		t.Errorf("MarshalReply allocs = %v, want 0", n)
	}
}

// decodeNullsOpaque hides r's type from the compiler, which would otherwise call its Decode
// directly.
//
//go:noinline
func decodeNullsOpaque(b []byte, r Record) (bool, error) { return DecodeRecordNulls(b, r) }

// TestMarshalFrame: MarshalFrame and MarshalReply make the frame AppendFrame makes, for frames
// below and above the scratch buffers kept; MarshalFrame's at its exact length, MarshalReply's
// in a buffer of its size class (at most twice its length, or minPooledFrame), or of its exact
// length past maxPooledFrame.
func TestMarshalFrame(t *testing.T) {
	hdr := &ReplyHeader{Xid: 7, Zxid: 0x2f}
	for _, n := range []int{0, 100, 5000, maxPooledScratch + 1, 1 << 20} {
		body := &GetDataResponse{Data: bytes.Repeat([]byte("y"), n), Stat: sampleStat}
		want := AppendFrame(nil, hdr, body)
		if got := MarshalFrame(hdr, body); !bytes.Equal(got, want) || cap(got) != len(want) {
			t.Fatalf("MarshalFrame, %d bytes of data: frame of length %d and capacity %d, want %d equal bytes", n, len(got), cap(got), len(want))
		}
		for range 2 { // the second from the pool, where the first went back
			f := MarshalReply(*hdr, body)
			got := f.Bytes()
			wantCap := len(want)
			if len(want) <= maxPooledFrame {
				wantCap = max(minPooledFrame, 1<<bits.Len(uint(len(want)-1)))
			}
			if !bytes.Equal(got, want) || cap(got) != wantCap || f.Cap() != wantCap {
				t.Fatalf("MarshalReply, %d bytes of data: frame of length %d and capacity %d (Cap %d), want %d equal bytes in %d", n, len(got), cap(got), f.Cap(), len(want), wantCap)
			}
			f.Release()
		}
	}
	ping := AppendFrame(nil, &ReplyHeader{Xid: XidPing})
	if got := MarshalReply(ReplyHeader{Xid: XidPing}, nil).Bytes(); !bytes.Equal(got, ping) {
		t.Fatalf("ping frame %x, want %x", got, ping)
	}
}

func BenchmarkReadFrame(b *testing.B) {
	frame := AppendFrame(nil, &RequestHeader{Xid: 1, Op: OpGetData}, &GetDataRequest{Path: "/some/znode", Watch: true})
	r := bytes.NewReader(frame)
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(frame)
		if _, err := ReadFrame(r, buf, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendFrameGetData(b *testing.B) {
	hdr := &ReplyHeader{Xid: 1, Zxid: 0x1f}
	body := &GetDataResponse{Data: bytes.Repeat([]byte("x"), 100), Stat: sampleStat}
	out := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		out = AppendFrame(out[:0], hdr, body)
	}
}

func BenchmarkDecodeGetChildren2Response(b *testing.B) {
	in := AppendRecord(nil, &GetChildren2Response{Children: []string{"a", "bb", "ccc", "dddd"}, Stat: sampleStat})
	b.ReportAllocs()
	for b.Loop() {
		var r GetChildren2Response
		if err := DecodeRecord(in, &r); err != nil {
			b.Fatal(err)
		}
	}
}
