package boltfile

import (
	"bytes"
	"fmt"
)

// treeBuilder writes one bucket's B+tree bottom-up: levels[0] gathers the leaf page being
// filled, each level above the branch page pointing at the pages written below it. A page is
// written once the next element would not fit in it; its first key then goes to its parent.
type treeBuilder struct {
	w      *Writer
	flags  uint32 // every leaf element's flags: bucketLeafFlag in the root bucket
	levels []*pageBuilder
	last   []byte // the last key added to the leaves
	any    bool
	body   []byte // scratch for a page's body
}

// pageBuilder is the page being filled at one level.
type pageBuilder struct {
	elems   []elem
	data    []byte // the elements' keys and values, end to end
	first   []byte // the page's first key
	written int    // pages written at this level
}

type elem struct {
	ksize, vsize int
	pgid         uint64 // a branch element's child
}

// elemSize is the size of an element of a page at level (0: a leaf).
func elemSize(level int) int {
	if level == 0 {
		return leafElementSize
	}
	return branchElemSize
}

func (t *treeBuilder) level(i int) *pageBuilder {
	for len(t.levels) <= i {
		t.levels = append(t.levels, &pageBuilder{})
	}
	return t.levels[i]
}

// add puts key and value at the leaves (level 0; value is copied), or key and child page pgid
// at a branch level (value nil).
func (t *treeBuilder) add(level int, key, value []byte) error {
	if level == 0 {
		if t.any && bytes.Compare(key, t.last) <= 0 {
			return fmt.Errorf("key %q does not follow key %q", key, t.last)
		}
		t.last, t.any = append(t.last[:0], key...), true
	}
	return t.addElem(level, key, elem{ksize: len(key), vsize: len(value)}, value)
}

func (t *treeBuilder) addElem(level int, key []byte, e elem, value []byte) error {
	p := t.level(level)
	size := pageHeaderSize + (len(p.elems)+1)*elemSize(level) + len(p.data) + e.ksize + e.vsize
	if len(p.elems) > 0 && (size > t.w.pageSize || len(p.elems) == maxPageElements) {
		if err := t.flush(level); err != nil {
			return err
		}
	}
	if len(p.elems) == 0 {
		p.first = append(p.first[:0], key...)
	}
	p.elems = append(p.elems, e)
	p.data = append(p.data, key...)
	p.data = append(p.data, value...)
	return nil
}

// flush writes level's page and adds it to the level above.
func (t *treeBuilder) flush(level int) error {
	id, err := t.write(level)
	if err != nil {
		return err
	}
	p := t.levels[level]
	return t.addElem(level+1, p.first, elem{ksize: len(p.first), pgid: id}, nil)
}

// write writes level's page as page w.next and empties the level.
func (t *treeBuilder) write(level int) (uint64, error) {
	p := t.levels[level]
	n := len(p.elems)
	es := elemSize(level)
	need := n*es + len(p.data)
	if cap(t.body) < need {
		t.body = make([]byte, need)
	}
	body := t.body[:need] // every element's bytes are written below
	copy(body[n*es:], p.data)
	at := n * es // where the next element's key starts, from the body's start
	for i, e := range p.elems {
		el := body[i*es:]
		pos := uint32(at - i*es) // from the element to its key
		if level == 0 {
			order.PutUint32(el[0:], t.flags)
			order.PutUint32(el[4:], pos)
			order.PutUint32(el[8:], uint32(e.ksize))
			order.PutUint32(el[12:], uint32(e.vsize))
		} else {
			order.PutUint32(el[0:], pos)
			order.PutUint32(el[4:], uint32(e.ksize))
			order.PutUint64(el[8:], e.pgid)
		}
		at += e.ksize + e.vsize
	}
	flags := uint16(leafPageFlag)
	if level > 0 {
		flags = branchPageFlag
	}
	id := t.w.next
	if err := t.w.writePage(id, flags, n, body); err != nil {
		return 0, err
	}
	p.elems, p.data = p.elems[:0], p.data[:0]
	p.written++
	return id, nil
}

// finish writes the pages still being filled, bottom-up, and returns the root page's id: the
// one page of the top level (an empty leaf for an empty bucket).
func (t *treeBuilder) finish() (uint64, error) {
	t.level(0)
	for i := 0; ; i++ {
		p := t.levels[i]
		if i == len(t.levels)-1 && p.written == 0 {
			return t.write(i)
		}
		if err := t.flush(i); err != nil {
			return 0, err
		}
	}
}
