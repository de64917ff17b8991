package zkdata

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/zetcd/zetcd/encoding"
)

// The FileHeader magics (FileSnap.SNAP_MAGIC, FileTxnLog.TXNLOG_MAGIC).
const (
	snapMagic = 0x5a4b534e // "ZKSN"
	logMagic  = 0x5a4b4c47 // "ZKLG"
)

// The lengths of what may follow a snapshot's first seal: a DataTree.ZxidDigest (zxid,
// version, digest) and its seal, and the last processed zxid (3.9) and its seal. A seal is a
// long and the string "/".
const (
	sealLen   = 8 + 4 + 1
	digestLen = 8 + 4 + 8
	zxidLen   = 8
)

// openSnapshot opens a snapshot's uncompressed stream, by its name's last extension as
// SnapStream.getStreamMode does, after the check of SnapStream.isValidSnapshot.
func openSnapshot(path string) (io.Reader, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	ext := path[strings.LastIndexByte(path, '.')+1:]
	var r io.Reader
	switch ext {
	case "gz":
		r, err = gzip.NewReader(bufio.NewReaderSize(f, 256<<10))
	case "snappy":
		r, err = newSnappyReader(bufio.NewReaderSize(f, 256<<10))
	default:
		err = checkedStreamValid(f)
		r = f
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return r, f, nil
}

// checkedStreamValid is SnapStream.isValidCheckedStream: at least 10 bytes, ending in the
// string "/" of a seal.
func checkedStreamValid(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < 10 {
		return fmt.Errorf("only %d bytes", fi.Size())
	}
	var tail [5]byte
	if _, err := f.ReadAt(tail[:], fi.Size()-5); err != nil {
		return err
	}
	if tail != [5]byte{0, 0, 0, 1, '/'} {
		return fmt.Errorf("does not end with a seal")
	}
	return nil
}

// readSnapshot reads a snapshot into a new tree (FileSnap.deserialize), checking its seals.
func readSnapshot(path string, progress func(nodes int)) (*tree, error) {
	r, c, err := openSnapshot(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := newSnapReader(r)
	t := newTree(nodesHint(path))
	if err := readHeader(s, snapMagic); err != nil {
		return nil, err
	}
	if err := readSessions(s, t); err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	cache, err := readACLCache(s)
	if err != nil {
		return nil, fmt.Errorf("ACL cache: %w", err)
	}
	if _, err = readNodes(s, t, cache, progress); err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	t.replaced()
	if err := s.seal(); err != nil {
		return nil, err
	}
	if err := readTrailer(s); err != nil {
		return nil, err
	}
	return t, nil
}

// snapshotBytesPerNode is about what a node of 100 bytes of data and a short path takes in a
// snapshot; compressedRatio what snappy and gzip make of a snapshot.
const (
	snapshotBytesPerNode = 160
	compressedRatio      = 4
)

// nodesHint guesses how many nodes the snapshot at path holds, from its size: the tree's map is
// made that large at once rather than grown and rehashed a dozen times (a tenth of a large load).
func nodesHint(path string) int {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	size := fi.Size()
	if strings.HasSuffix(path, ".gz") || strings.HasSuffix(path, ".snappy") {
		size *= compressedRatio
	}
	return int(min(size/snapshotBytesPerNode, 1<<28))
}

// readHeader reads a FileHeader: magic, version, dbid.
func readHeader(s *snapReader, magic int32) error {
	m, err := s.int32()
	if err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if m != magic {
		return fmt.Errorf("header: magic %#x, want %#x", uint32(m), uint32(magic))
	}
	if _, err := s.int32(); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if _, err := s.int64(); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	return nil
}

// readSessions reads SerializeUtils.serializeSnapshot's sessions: a count, then id and timeout.
func readSessions(s *snapReader, t *tree) error {
	n, err := s.int32()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		id, err := s.int64()
		if err != nil {
			return err
		}
		timeout, err := s.int32()
		if err != nil {
			return err
		}
		t.sessions[id] = timeout
	}
	return nil
}

// readACLCache reads ReferenceCountedACLCache.serialize: a count, then an id and its ACL list.
func readACLCache(s *snapReader) (map[int64][]encoding.ACL, error) {
	n, err := s.int32()
	if err != nil {
		return nil, err
	}
	cache := make(map[int64][]encoding.ACL, max(n, 0))
	for ; n > 0; n-- {
		id, err := s.int64()
		if err != nil {
			return nil, err
		}
		m, err := s.int32()
		if err != nil {
			return nil, err
		}
		if m < 0 {
			return nil, fmt.Errorf("at offset %d: ACL list %d is null", s.offset()-4, id)
		}
		acl := make([]encoding.ACL, 0, min(m, 64))
		for ; m > 0; m-- {
			perms, err := s.int32()
			if err != nil {
				return nil, err
			}
			scheme, err := s.string()
			if err != nil {
				return nil, err
			}
			aid, err := s.string()
			if err != nil {
				return nil, err
			}
			acl = append(acl, encoding.ACL{Perms: encoding.Perm(perms), ID: encoding.ID{Scheme: scheme, ID: aid}})
		}
		cache[id] = acl
	}
	return cache, nil
}

// readNodes reads DataTree.serializeNodes into t: path and DataNode (data, ACL id,
// StatPersisted), parents before children, the root as "", ended by the path "/". One goroutine
// decodes the records while this one links them into the tree: at a million nodes each is
// about half a second of work.
func readNodes(s *snapReader, t *tree, cache map[int64][]encoding.ACL, progress func(int)) (int, error) {
	batches, stop := make(chan []snapNode, 8), make(chan struct{})
	var decodeErr error
	go func() {
		defer close(batches)
		decodeErr = decodeNodes(s, cache, batches, stop)
	}()
	count := 0
	var err error
	l := linker{t: t}
	for b := range batches {
		for i := 0; i < len(b) && err == nil; i++ {
			if err = l.link(b[i]); err != nil {
				close(stop)
			}
			count++
			if count%progressEvery == 0 && progress != nil {
				progress(count)
			}
		}
	}
	if err != nil {
		return count, err
	}
	return count, decodeErr
}

// snapNode is a node of the snapshot and the offset of its record.
type snapNode struct {
	path string
	n    *znode
	at   int64
}

// decodeNodes decodes node records in batches until the "/" that ends them, or until stop is
// closed.
func decodeNodes(s *snapReader, cache map[int64][]encoding.ACL, batches chan<- []snapNode, stop <-chan struct{}) error {
	const batchLen = 1024
	b := make([]snapNode, 0, batchLen)
	send := func() bool {
		select {
		case batches <- b:
			b = make([]snapNode, 0, batchLen)
			return true
		case <-stop:
			return false
		}
	}
	for {
		at := s.offset()
		path, err := s.string()
		if err != nil {
			return err
		}
		if path == "/" {
			send()
			return nil
		}
		n, err := readNode(s, cache)
		if err != nil {
			return fmt.Errorf("node %q at offset %d: %w", path, at, err)
		}
		if b = append(b, snapNode{path, n, at}); len(b) == batchLen && !send() {
			return nil
		}
	}
}

// linker links nodes into a tree in the snapshot's order.
type linker struct {
	t *tree
	// Nodes come depth first, so a node's parent is mostly the one of the node before.
	lastParentPath string
	lastParent     *znode
}

func (l *linker) link(sn snapNode) error {
	t := l.t
	if sn.path == "" {
		if t.nodes[""] != nil {
			return fmt.Errorf("node \"\" at offset %d: a second root", sn.at)
		}
		t.put("", sn.n, nil)
		return nil
	}
	parentPath, _ := split(sn.path)
	if parentPath != l.lastParentPath || l.lastParent == nil {
		l.lastParentPath, l.lastParent = parentPath, t.nodes[parentPath]
	}
	if l.lastParent == nil {
		return fmt.Errorf("node %q at offset %d: no parent %q", sn.path, sn.at, parentPath)
	}
	t.addUnder(sn.path, sn.n, l.lastParent, nil)
	t.indexEphemeral(sn.path, sn.n.owner)
	return nil
}

func readNode(s *snapReader, cache map[int64][]encoding.ACL) (*znode, error) {
	data, null, err := s.bytes()
	if err != nil {
		return nil, err
	}
	if !null && data == nil {
		data = []byte{}
	}
	aclID, err := s.int64()
	if err != nil {
		return nil, err
	}
	n := &znode{data: data}
	if aclID == -1 {
		n.acl = openACL
	} else if n.acl = cache[aclID]; n.acl == nil {
		// A setACL after the cache was written and before the node was, in a fuzzy snapshot;
		// replaying it sets the ACL (DataTree.deserialize lets it be,
		// ReferenceCountedACLCache.addUsage ignores the id).
		n.missingACL = aclID
	}
	b, err := s.take(8*4 + 4*3 + 8 + 8)
	if err != nil {
		return nil, err
	}
	d := encoding.NewDecoder(b)
	n.czxid, n.mzxid, n.ctime, n.mtime = d.Int64(), d.Int64(), d.Int64(), d.Int64()
	n.version, n.cversion, n.aversion = d.Int32(), d.Int32(), d.Int32()
	n.owner, n.pzxid = d.Int64(), d.Int64()
	return n, nil
}

// readTrailer reads what follows the first seal, by its length: nothing (3.5 and older), a
// digest (3.6 to 3.8), the last processed zxid (3.9 with digests off) or both (3.9), each
// sealed. More bytes than both are ignored, as ZooKeeper reads no further.
func readTrailer(s *snapReader) error {
	n := s.rest(digestLen + zxidLen + 2*sealLen + 1)
	var parts []int
	switch {
	case n == 0:
	case n == digestLen+sealLen:
		parts = []int{digestLen}
	case n == zxidLen+sealLen:
		parts = []int{zxidLen}
	case n >= digestLen+zxidLen+2*sealLen:
		parts = []int{digestLen, zxidLen}
	default:
		return fmt.Errorf("%d unexpected bytes after the nodes' seal", n)
	}
	for _, p := range parts {
		if _, err := s.take(p); err != nil {
			return err
		}
		if err := s.seal(); err != nil {
			return err
		}
	}
	return nil
}
