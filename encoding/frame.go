package encoding

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// DefaultMaxFrameBytes is ZooKeeper's default jute.maxbuffer: the largest
// frame payload a server accepts and a 3.6+ Java client will read.
const DefaultMaxFrameBytes = 0xfffff

// Frame errors. A peer that sends either has broken the protocol; ZooKeeper
// closes the connection without replying.
var (
	ErrFrameTooLarge  = errors.New("zk encoding: frame too large")
	ErrNegativeLength = errors.New("zk encoding: negative frame length")
)

// ReadFrame reads one frame from r and returns its payload.
//
// The payload is read into buf when cap(buf) is large enough (so a caller
// can reuse one buffer for every frame on a connection; the result is then
// overwritten by the next call) and into a newly allocated slice otherwise.
// max bounds the payload length; max <= 0 means DefaultMaxFrameBytes. A
// length that is negative or larger than max is rejected before any of the
// payload is read, so a hostile length costs no memory; the stream is then
// out of sync and must be closed.
//
// ReadFrame returns io.EOF only if the stream ended cleanly before the first
// byte of the length; a stream that ends anywhere later yields
// io.ErrUnexpectedEOF. Other read errors are returned as is.
func ReadFrame(r io.Reader, buf []byte, max int) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxFrameBytes
	}
	// The length prefix is read into buf itself: a local array would escape
	// through the io.Reader interface call and cost an allocation per frame.
	if cap(buf) < 4 {
		buf = make([]byte, 4, 512)
	}
	if _, err := io.ReadFull(r, buf[:4]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(buf[:4]))
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", ErrNegativeLength, n)
	}
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, max)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// AppendFrame appends one frame holding records encoded back to back (for a
// reply, a ReplyHeader then the body) and returns the extended slice. With
// enough capacity in b it does not allocate.
//
// AppendFrame panics if the payload exceeds math.MaxInt32 bytes, which no
// valid record comes near; the frame limit a peer enforces is far lower and
// is the caller's concern.
func AppendFrame(b []byte, records ...Record) []byte {
	e, start := startFrame(b)
	for _, r := range records {
		if r != nil {
			r.Encode(e)
		}
	}
	return finishFrame(e, start)
}

// startFrame appends a frame's length placeholder to b and returns a pooled encoder that
// appends to it, and where the frame starts; finishFrame ends it.
func startFrame(b []byte) (*Encoder, int) {
	start := len(b)
	e := encoderPool.Get().(*Encoder)
	e.buf = append(b, 0, 0, 0, 0)
	return e, start
}

// finishFrame fills in the length of the frame begun at start, gives the encoder back, and
// returns the bytes (AppendFrame says when it panics).
func finishFrame(e *Encoder, start int) []byte {
	b := e.buf
	e.buf = nil
	encoderPool.Put(e)
	n := len(b) - start - 4
	if n > math.MaxInt32 {
		panic("zk encoding: frame payload exceeds MaxInt32")
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	return b
}

// MarshalFrame returns one frame holding records (as AppendFrame) in a new slice of exactly
// its length, allocated once: the records are encoded into a pooled scratch buffer and copied
// out, where appending to an empty slice would grow it several times for a frame of a few
// hundred bytes. A scratch buffer grown past maxPooledScratch is not kept.
func MarshalFrame(records ...Record) []byte {
	sp := scratchPool.Get().(*[]byte)
	return copyOut(sp, AppendFrame((*sp)[:0], records...))
}

// MarshalReply is MarshalFrame(&hdr, body) for a reply (body nil: none), with the header taken
// by value: passed as a Record, it would escape to the heap with whatever holds it. The frame is
// in a buffer of the frame pool (PooledFrame), for the caller to give back once it is written.
//
// Its strings are ZooKeeper's bytes (JavaBytes) in the frames whose strings no rule keeps
// inside the BMP: a sync's path, getACL's ACL, whoAmI's users, and a watch event's path (the
// catch-up events of setWatches name the paths the client sent, which nothing validates).
// Node paths cannot hold such a character: the other replies need no look at their strings.
func MarshalReply(hdr ReplyHeader, body Record) PooledFrame {
	sp := scratchPool.Get().(*[]byte)
	e, start := startFrame((*sp)[:0])
	hdr.Encode(e)
	if body != nil {
		switch body.(type) {
		case *SyncResponse, *GetACLResponse, *WhoAmIResponse, *WatcherEvent:
			e.javaStrings = true
		}
		body.Encode(e)
		e.javaStrings = false
	}
	b := finishFrame(e, start)
	f := newPooledFrame(len(b))
	copy(*f.buf, b)
	releaseScratch(sp, b)
	return f
}

// copyOut returns a copy of b, which is in the scratch buffer *sp, and gives the buffer back.
func copyOut(sp *[]byte, b []byte) []byte {
	frame := make([]byte, len(b))
	copy(frame, b)
	releaseScratch(sp, b)
	return frame
}

// releaseScratch gives the scratch buffer *sp back, now holding b, unless b has grown past
// maxPooledScratch.
func releaseScratch(sp *[]byte, b []byte) {
	if cap(b) <= maxPooledScratch {
		*sp = b[:0]
		scratchPool.Put(sp)
	}
}

// maxPooledScratch bounds the scratch buffers MarshalFrame keeps.
const maxPooledScratch = 64 << 10

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 1<<10); return &b }}

// WriteFrame writes one frame holding records to w in a single Write, using
// buf as scratch space. It returns the (possibly grown) scratch buffer for
// reuse.
func WriteFrame(w io.Writer, buf []byte, records ...Record) ([]byte, error) {
	buf = AppendFrame(buf[:0], records...)
	_, err := w.Write(buf)
	return buf, err
}
