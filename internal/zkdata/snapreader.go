package zkdata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"io"

	"github.com/zetcd/zetcd/encoding"
)

// snapReader reads jute values from a snapshot's uncompressed stream and keeps the Adler32 of
// every byte consumed, as SnapStream's CheckedInputStream does. The checksum is brought up to
// date lazily, a buffer at a time.
type snapReader struct {
	r       io.Reader
	buf     []byte
	pos     int // next byte to consume
	end     int // end of buffered bytes
	summed  int // buf[:summed] is in adler
	consume int64
	adler   hash.Hash32
}

// maxSnapBuffer bounds one buffer or string of a snapshot, well above jute.maxbuffer, so that
// a damaged length cannot make the reader allocate without limit.
const maxSnapBuffer = 256 << 20

func newSnapReader(r io.Reader) *snapReader {
	return &snapReader{r: r, buf: make([]byte, 256<<10), adler: adler32.New()}
}

// offset is the count of uncompressed bytes consumed.
func (s *snapReader) offset() int64 { return s.consume }

// need makes n bytes available at pos.
func (s *snapReader) need(n int) error {
	if s.end-s.pos >= n {
		return nil
	}
	s.adler.Write(s.buf[s.summed:s.pos])
	copy(s.buf, s.buf[s.pos:s.end])
	s.end -= s.pos
	s.pos, s.summed = 0, 0
	if n > len(s.buf) {
		nb := make([]byte, max(n, 2*len(s.buf)))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for s.end < n {
		m, err := s.r.Read(s.buf[s.end:])
		s.end += m
		if err != nil && s.end < n {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("at offset %d: %w", s.consume+int64(s.end), io.ErrUnexpectedEOF)
			}
			return err
		}
	}
	return nil
}

func (s *snapReader) take(n int) ([]byte, error) {
	if err := s.need(n); err != nil {
		return nil, err
	}
	b := s.buf[s.pos : s.pos+n]
	s.pos += n
	s.consume += int64(n)
	return b, nil
}

func (s *snapReader) int32() (int32, error) {
	b, err := s.take(4)
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

func (s *snapReader) int64() (int64, error) {
	b, err := s.take(8)
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// bytes reads a jute buffer: nil for null, a copy otherwise.
func (s *snapReader) bytes() ([]byte, bool, error) {
	n, err := s.int32()
	if err != nil {
		return nil, false, err
	}
	if n == -1 {
		return nil, true, nil
	}
	if n < 0 || n > maxSnapBuffer {
		return nil, false, fmt.Errorf("at offset %d: bad length %d", s.consume-4, n)
	}
	b, err := s.take(int(n))
	if err != nil {
		return nil, false, err
	}
	return append([]byte{}, b...), false, nil
}

// string reads a jute ustring, decoded as Java decodes it; null is an error here, as no
// snapshot string may be null.
func (s *snapReader) string() (string, error) {
	n, err := s.int32()
	if err != nil {
		return "", err
	}
	if n < 0 || n > maxSnapBuffer {
		return "", fmt.Errorf("at offset %d: bad string length %d", s.consume-4, n)
	}
	b, err := s.take(int(n))
	if err != nil {
		return "", err
	}
	return encoding.JavaString(b), nil
}

// checksum returns the Adler32 of every byte consumed so far.
func (s *snapReader) checksum() uint32 {
	s.adler.Write(s.buf[s.summed:s.pos])
	s.summed = s.pos
	return s.adler.Sum32()
}

// seal reads a SnapStream seal: the checksum of everything before it as a long, and the path
// "/" (SnapStream.checkSealIntegrity).
func (s *snapReader) seal() error {
	want := s.checksum()
	at := s.consume
	got, err := s.int64()
	if err != nil {
		return err
	}
	if _, err := s.string(); err != nil {
		return err
	}
	if uint64(got) != uint64(want) {
		return fmt.Errorf("checksum mismatch at offset %d: stored %#x, computed %#x", at, got, want)
	}
	return nil
}

// rest reads what is left of the stream, up to limit bytes, and makes the reader read those
// bytes next. A read error ends the rest, as atEOF explains.
func (s *snapReader) rest(limit int) int {
	s.checksum()
	tail := append([]byte{}, s.buf[s.pos:s.end]...)
	for len(tail) < limit {
		b := make([]byte, limit-len(tail))
		n, err := s.r.Read(b)
		tail = append(tail, b[:n]...)
		if err != nil {
			break
		}
	}
	s.r = bytes.NewReader(tail)
	s.pos, s.end, s.summed = 0, 0, 0
	return len(tail)
}
