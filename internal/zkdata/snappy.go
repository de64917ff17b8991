package zkdata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
)

// snappyMagic starts snappy-java's SnappyOutputStream (SnappyCodec.MAGIC_HEADER); a version
// and a compatible version, both ints, follow it. Then come blocks, each an int length and a
// raw snappy block. SnappyInputStream accepts the header again between blocks (streams written
// one after another), and so does snappyReader.
var snappyMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const snappyHeaderLen = 8 + 4 + 4

// maxSnappyBlock bounds a block; SnappyOutputStream writes blocks of 32 KiB by default.
const maxSnappyBlock = 64 << 20

type snappyReader struct {
	r    io.Reader
	comp []byte
	out  []byte
	rest []byte // decoded bytes not yet read
}

func newSnappyReader(r io.Reader) (*snappyReader, error) {
	var h [snappyHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, fmt.Errorf("snappy header: %w", err)
	}
	if !bytes.Equal(h[:8], snappyMagic) {
		return nil, errors.New("no snappy-java header")
	}
	return &snappyReader{r: r}, nil
}

func (z *snappyReader) Read(p []byte) (int, error) {
	for len(z.rest) == 0 {
		if err := z.block(); err != nil {
			return 0, err
		}
	}
	n := copy(p, z.rest)
	z.rest = z.rest[n:]
	return n, nil
}

// block decodes the next block, passing over a repeated stream header.
func (z *snappyReader) block() error {
	var l [4]byte
	if _, err := io.ReadFull(z.r, l[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("snappy block length: %w", err)
		}
		return err // io.EOF between blocks ends the stream
	}
	if bytes.Equal(l[:], snappyMagic[:4]) {
		var h [snappyHeaderLen - 4]byte
		if _, err := io.ReadFull(z.r, h[:]); err != nil {
			return fmt.Errorf("snappy header: %w", io.ErrUnexpectedEOF)
		}
		if !bytes.Equal(h[:4], snappyMagic[4:]) {
			return errors.New("damaged snappy header")
		}
		return nil
	}
	n := binary.BigEndian.Uint32(l[:])
	if n > maxSnappyBlock {
		return fmt.Errorf("snappy block of %d bytes", n)
	}
	if cap(z.comp) < int(n) {
		z.comp = make([]byte, n)
	}
	z.comp = z.comp[:n]
	if _, err := io.ReadFull(z.r, z.comp); err != nil {
		return fmt.Errorf("snappy block: %w", io.ErrUnexpectedEOF)
	}
	out, err := snappy.Decode(z.out[:cap(z.out)], z.comp)
	if err != nil {
		return fmt.Errorf("snappy block: %w", err)
	}
	z.out, z.rest = out, out
	return nil
}
