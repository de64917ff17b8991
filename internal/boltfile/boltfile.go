// Package boltfile writes a new bbolt database file from keys that arrive in order, page by
// page, bottom-up, as one sequential write: what a bulk load into bbolt through its B+tree
// (a search and an insert for every key, then a split of every node at each commit) costs
// many times over.
//
// The file is bbolt's format 2 (go.etcd.io/bbolt, internal/common): two meta pages, data pages,
// an empty freelist page (every page is in use), and the root bucket's leaf page naming each
// bucket's root page. Every bucket is stored as its own tree (never inline). Pages hold as many
// elements as fit in a page; an element larger than that gets a page of its own with overflow
// pages, as bbolt writes it. Structures are written in the machine's byte order, as bbolt maps
// them.
package boltfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
)

// The layout of bbolt's format 2 (internal/common: page.go, meta.go, bucket.go, types.go).
const (
	magic   = 0xED0CDAED
	version = 2

	pageHeaderSize   = 16 // id uint64, flags uint16, count uint16, overflow uint32
	leafElementSize  = 16 // flags, pos, ksize, vsize: uint32 each
	branchElemSize   = 16 // pos uint32, ksize uint32, pgid uint64
	bucketHeaderSize = 16 // root pgid uint64, sequence uint64

	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	metaPageFlag     = 0x04
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01

	metaChecksumOffset = 56 // the meta's bytes before its checksum
	maxPageElements    = 0xffff
)

var order = binary.NativeEndian

// Writer writes one database file. Buckets are written one after another, each one's keys in
// ascending order; the buckets themselves in any order, with distinct names. A Writer is not
// safe for concurrent use.
type Writer struct {
	f        *os.File
	w        *bufio.Writer
	path     string
	pageSize int
	next     uint64 // the next page id to write
	roots    []bucketRoot
	cur      *treeBuilder
	page     []byte // scratch for the page being written
	err      error
}

type bucketRoot struct {
	name []byte
	root uint64
}

// Create starts the database at path, which must not exist, with pages of pageSize bytes (the
// machine's page size, as bbolt creates a database with).
func Create(path string, pageSize int) (*Writer, error) {
	if pageSize < 1024 || pageSize&(pageSize-1) != 0 {
		return nil, fmt.Errorf("boltfile: page size %d is not a power of two of at least 1024", pageSize)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f, w: bufio.NewWriterSize(f, 1<<22), path: path, pageSize: pageSize, next: 2}
	// The meta pages are written last, by Close: until then the file is no database.
	if _, err := w.w.Write(make([]byte, 2*pageSize)); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Bucket ends the bucket being written, if any, and starts the one named name.
func (w *Writer) Bucket(name []byte) error {
	if err := w.endBucket(); err != nil {
		return err
	}
	if len(name) == 0 {
		return w.fail(errors.New("a bucket needs a name"))
	}
	for _, r := range w.roots {
		if bytes.Equal(r.name, name) {
			return w.fail(fmt.Errorf("bucket %q is written already", name))
		}
	}
	w.roots = append(w.roots, bucketRoot{name: bytes.Clone(name)})
	w.cur = &treeBuilder{w: w, flags: 0}
	return nil
}

// Put adds key and value to the bucket being written; key must follow the bucket's key before
// it. Put copies both.
func (w *Writer) Put(key, value []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.cur == nil {
		return w.fail(errors.New("a put outside a bucket"))
	}
	if err := w.cur.add(0, key, value); err != nil {
		return w.fail(err)
	}
	return nil
}

func (w *Writer) endBucket() error {
	if w.err != nil {
		return w.err
	}
	if w.cur == nil {
		return nil
	}
	root, err := w.cur.finish()
	if err != nil {
		return w.fail(err)
	}
	w.roots[len(w.roots)-1].root = root
	w.cur = nil
	return nil
}

// Close ends the last bucket, writes the root bucket, the freelist and the meta pages, syncs
// the file and closes it. Only a nil error means a complete database is on disk; after an
// error the file is left unfinished for the caller to remove.
func (w *Writer) Close() error {
	err := w.finish()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("boltfile %s: %w", w.path, err)
	}
	return nil
}

func (w *Writer) finish() error {
	if err := w.endBucket(); err != nil {
		return err
	}
	slices.SortFunc(w.roots, func(a, b bucketRoot) int { return bytes.Compare(a.name, b.name) })
	root := &treeBuilder{w: w, flags: bucketLeafFlag}
	var header [bucketHeaderSize]byte
	for _, r := range w.roots {
		order.PutUint64(header[:], r.root)
		if err := root.add(0, r.name, header[:]); err != nil {
			return err
		}
	}
	rootPage, err := root.finish()
	if err != nil {
		return err
	}
	freelist := w.next
	if err := w.writePage(freelist, freelistPageFlag, 0, nil); err != nil {
		return err
	}
	if err := w.w.Flush(); err != nil {
		return err
	}
	for id := uint64(0); id < 2; id++ {
		if _, err := w.f.WriteAt(w.metaPage(id, rootPage, freelist), int64(id)*int64(w.pageSize)); err != nil {
			return err
		}
	}
	return w.f.Sync()
}

// metaPage is meta page id (0 or 1) of transaction id: bbolt opens the one of the higher
// transaction that is valid, and both are.
func (w *Writer) metaPage(id, rootPage, freelist uint64) []byte {
	p := make([]byte, w.pageSize)
	order.PutUint64(p[0:], id)
	order.PutUint16(p[8:], metaPageFlag)
	m := p[pageHeaderSize:]
	order.PutUint32(m[0:], magic)
	order.PutUint32(m[4:], version)
	order.PutUint32(m[8:], uint32(w.pageSize))
	order.PutUint32(m[12:], 0)
	order.PutUint64(m[16:], rootPage)
	order.PutUint64(m[24:], 0)
	order.PutUint64(m[32:], freelist)
	order.PutUint64(m[40:], w.next)
	order.PutUint64(m[48:], id)
	h := fnv.New64a()
	h.Write(m[:metaChecksumOffset])
	order.PutUint64(m[metaChecksumOffset:], h.Sum64())
	return p
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// writePage writes the next page: a header of flags and count, then body, padded to whole
// pages. It must be page id w.next.
func (w *Writer) writePage(id uint64, flags uint16, count int, body []byte) error {
	if id != w.next {
		return fmt.Errorf("page %d written out of order (next is %d)", id, w.next)
	}
	size := pageHeaderSize + len(body)
	pages := (size + w.pageSize - 1) / w.pageSize
	if cap(w.page) < pages*w.pageSize {
		w.page = make([]byte, pages*w.pageSize)
	}
	p := w.page[:pages*w.pageSize]
	clear(p[size:])
	order.PutUint64(p[0:], id)
	order.PutUint16(p[8:], flags)
	order.PutUint16(p[10:], uint16(count))
	order.PutUint32(p[12:], uint32(pages-1))
	copy(p[pageHeaderSize:], body)
	w.next += uint64(pages)
	_, err := w.w.Write(p)
	return err
}
