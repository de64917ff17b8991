package zkdata

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"os"
	"syscall"
)

// logReader reads a transaction log's entries (FileTxnLog.FileTxnIterator).
type logReader struct {
	path string
	f    *os.File
	r    *bufio.Reader
	off  int64 // offset of the next entry
	size int64
	buf  []byte
}

// tornError is a log's last entry cut short: what a crash mid-write leaves, everything after
// it being zeros. ZooKeeper's iterator takes it as the end of the log (an EOFException).
type tornError struct {
	path string
	off  int64
	why  string
}

func (e *tornError) Error() string {
	return fmt.Sprintf("%s: torn entry at offset %d (%s)", e.path, e.off, e.why)
}

// maxEntry bounds an entry's length: far above jute.maxbuffer, below what a damaged length
// could make Load allocate.
const maxEntry = 256 << 20

func openLog(path string) (*logReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &logReader{path: path, f: f, r: bufio.NewReaderSize(f, 256<<10), size: fi.Size()}
	var h [16]byte
	if n, err := io.ReadFull(l.r, h[:]); err != nil {
		f.Close()
		if n == 0 || allZero(h[:n]) {
			return nil, &tornError{path: path, why: "no header"}
		}
		return nil, fmt.Errorf("%s: offset 0: header cut short: %w", path, err)
	}
	if m := binary.BigEndian.Uint32(h[:4]); m != logMagic {
		f.Close()
		return nil, fmt.Errorf("%s: offset 0: magic %#x, want %#x (not a ZooKeeper transaction log)", path, m, logMagic)
	}
	l.off = 16
	return l, nil
}

func (l *logReader) Close() error { return l.f.Close() }

// next returns the next entry's offset and txn bytes, checksum checked. It returns io.EOF at
// the end of the log (the file's end or its zero-filled preallocated tail), a *tornError for a
// torn last entry, and another error for damage ZooKeeper would not load past.
func (l *logReader) next() (int64, []byte, error) {
	at := l.off
	var h [12]byte
	n, err := io.ReadFull(l.r, h[:])
	if err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return at, nil, io.EOF
		}
		return at, nil, l.torn(at, at+int64(n), "entry header cut short")
	}
	crc := binary.BigEndian.Uint64(h[:8])
	length := int32(binary.BigEndian.Uint32(h[8:]))
	switch {
	case length == 0 && crc == 0:
		if nz, err := l.zerosFrom(at); err != nil {
			return at, nil, err
		} else if nz >= 0 {
			return at, nil, fmt.Errorf("%s: offset %d: empty entry followed by data at offset %d", l.path, at, nz)
		}
		return at, nil, io.EOF
	case length == 0:
		return at, nil, l.torn(at, at+12, "checksum without a length")
	case length < 0 || length > maxEntry:
		return at, nil, fmt.Errorf("%s: offset %d: bad entry length %d", l.path, at, length)
	case int64(length) > l.size-at-12:
		return at, nil, l.torn(at, l.size, fmt.Sprintf("entry of %d bytes past the end of the file", length))
	}
	if cap(l.buf) < int(length)+1 {
		l.buf = make([]byte, int(length)+1)
	}
	b := l.buf[:int(length)+1]
	n, err = io.ReadFull(l.r, b)
	if err != nil && n < int(length) {
		return at, nil, fmt.Errorf("%s: offset %d: %w", l.path, at, err)
	}
	// Util.readTxnBytes checks the end-of-record byte before the checksum is: an entry whose
	// write was cut short, the rest zeros, ends the log rather than fails it.
	if n == int(length) {
		return at, nil, l.torn(at, l.size, "no end-of-record byte")
	}
	if b[length] != 'B' {
		return at, nil, l.torn(at, at+12+int64(length), fmt.Sprintf("end-of-record byte %#x", b[length]))
	}
	txn := b[:length]
	if sum := adler32.Checksum(txn); uint64(sum) != crc {
		return at, nil, fmt.Errorf("%s: offset %d: checksum mismatch: stored %#x, computed %#x", l.path, at, crc, sum)
	}
	l.off = at + 12 + int64(length) + 1
	return at, txn, nil
}

// torn reports the entry at 'at' as torn when nothing but zeros follows from 'from', and as
// damage otherwise.
func (l *logReader) torn(at, from int64, why string) error {
	nz, err := l.zerosFrom(from)
	if err != nil {
		return err
	}
	if nz >= 0 {
		return fmt.Errorf("%s: offset %d: torn entry (%s) followed by data at offset %d", l.path, at, why, nz)
	}
	return &tornError{path: l.path, off: at, why: why}
}

// seekData is lseek's SEEK_DATA: the preallocated tail of a log is mostly a hole, which need
// not be read.
const seekData = 3

// zerosFrom returns the offset of the first non-zero byte at or after off, or -1.
func (l *logReader) zerosFrom(off int64) (int64, error) {
	buf := make([]byte, 1<<20)
	for off < l.size {
		if d, err := l.f.Seek(off, seekData); err == nil {
			off = d
		} else if errors.Is(err, syscall.ENXIO) {
			return -1, nil // only a hole is left
		}
		n, err := l.f.ReadAt(buf, off)
		for i, c := range buf[:n] {
			if c != 0 {
				return off + int64(i), nil
			}
		}
		off += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return -1, nil
			}
			return 0, fmt.Errorf("%s: %w", l.path, err)
		}
	}
	return -1, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
