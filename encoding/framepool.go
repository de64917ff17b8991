package encoding

import (
	"math/bits"
	"sync"
)

// The frame pool. A server encodes a frame for every reply and watch event, queues it and
// writes it once: in a buffer of its own, each is garbage as soon as it is written, and for a
// read served from memory that copy was the largest of its allocations (a quarter to a third of
// its bytes), which the collector then pays for. MarshalReply puts each frame in a buffer from
// a pool kept by size class, powers of two from minPooledFrame to maxPooledFrame bytes, and the
// writer gives it back (PooledFrame.Release). A buffer holds at most twice its frame's length
// (or minPooledFrame), which is what a server that bounds the bytes it queues should count
// (PooledFrame.Cap). A larger frame gets a buffer of its own, allocated at its length and left
// to the collector.

const (
	minPooledFrameShift = 6  // 64 bytes: an event or a reply header
	maxPooledFrameShift = 14 // 16 KiB
	minPooledFrame      = 1 << minPooledFrameShift
	maxPooledFrame      = 1 << maxPooledFrameShift
)

// framePools[i] holds buffers of capacity minPooledFrame<<i, as *[]byte so that a Put does
// not allocate.
var framePools [maxPooledFrameShift - minPooledFrameShift + 1]sync.Pool

// PooledFrame is an encoded frame in a buffer that may come from the frame pool. Its owner
// reads Bytes until it calls Release, after which neither may be used again: the buffer then
// holds another frame. A PooledFrame that is never released is simply collected. The zero value
// is no frame.
type PooledFrame struct {
	buf *[]byte
}

// Bytes is the frame: valid until Release.
func (f PooledFrame) Bytes() []byte {
	if f.buf == nil {
		return nil
	}
	return *f.buf
}

// Cap is the memory the frame holds: its buffer's capacity.
func (f PooledFrame) Cap() int {
	if f.buf == nil {
		return 0
	}
	return cap(*f.buf)
}

// Release gives the frame's buffer back to the pool, if it came from one (newPooledFrame makes
// every buffer: one of a size class's capacity, or one past maxPooledFrame of the frame's own).
// Call it once, when the frame has been written.
func (f PooledFrame) Release() {
	if f.buf == nil || cap(*f.buf) > maxPooledFrame {
		return
	}
	c := cap(*f.buf)
	*f.buf = (*f.buf)[:0]
	framePools[frameClass(c)].Put(f.buf)
}

// newPooledFrame returns a frame of length n, in a pooled buffer if n fits one.
func newPooledFrame(n int) PooledFrame {
	if n > maxPooledFrame {
		b := make([]byte, n)
		return PooledFrame{buf: &b}
	}
	i := frameClass(n)
	if p, ok := framePools[i].Get().(*[]byte); ok {
		*p = (*p)[:n]
		return PooledFrame{buf: p}
	}
	b := make([]byte, n, minPooledFrame<<i)
	return PooledFrame{buf: &b}
}

// frameClass is the index of the smallest size class that holds n bytes (n <= maxPooledFrame).
func frameClass(n int) int {
	if n <= minPooledFrame {
		return 0
	}
	return bits.Len(uint(n-1)) - minPooledFrameShift
}
