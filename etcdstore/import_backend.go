package etcdstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/zetcd/zetcd/internal/boltfile"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// backendWriter writes keys straight into the backend database of an etcd that has never
// started, in etcd's own layout (storage/mvcc: a key of the key bucket is a revision, its value
// the mvccpb.KeyValue written there; a deletion is a tombstone, the revision marked 't' and
// the KeyValue holding only the key). With a database and no write-ahead log, etcd bootstraps
// a new cluster on that database: it validates the storage version, rebuilds its index from
// the key bucket (its revision is the highest found there, the revisions below need not all
// be used), recovers the leases of the lease bucket, and attaches to them the keys that name
// them.
//
// The first revision, holding the import marker, is written through etcd's backend into a
// file of another name, synced, and renamed to etcd's database: the database of an import cut
// short holds the marker, and zetcd refuses it (without the database, etcd starts empty:
// nothing was imported). The whole database, that revision and the rest, is then written
// beside it page by page (internal/boltfile: the keys come in order, so the tree is built
// bottom-up, not through bbolt's B+tree inserts), synced once, and renamed over it: a crash
// leaves either database.
//
// The caller's goroutine encodes the entries into chunks; a goroutine of the writer writes
// them, so that building the next entries and writing pages overlap.
type backendWriter struct {
	path     string
	rev      int64 // the revision being written
	sub      int64 // its next write
	chunk    *backendChunk
	revBytes []byte // scratch for a key
	chunks   chan *backendChunk
	spare    chan *backendChunk // chunks written, to be filled again
	done     chan error         // the writing goroutine's result, once chunks is closed
}

// backendChunk is a run of entries for the database: keys and values end to end in one arena.
type backendChunk struct {
	arena []byte
	ends  []int // each entry's key end, then its value end, in the arena
	lease []bool
}

const (
	// backendChunkEntries and backendChunkBytes bound a chunk; its arena is allocated with room
	// for a little more than backendChunkBytes, so that it seldom grows.
	backendChunkEntries = 4096
	backendChunkBytes   = 1 << 20
)

// newBackendWriter creates etcd's database at path, which must not exist, with the buckets
// and storage version of this etcd, and the marker put at revision first.
func newBackendWriter(log *zap.Logger, path string, marker importPut, first int64) (*backendWriter, error) {
	if err := createBackend(log, path, marker, first); err != nil {
		return nil, err
	}
	chunks, spare, done := make(chan *backendChunk, 4), make(chan *backendChunk, 8), make(chan error, 1)
	go func() { done <- writeChunks(path, chunks, spare) }()
	return &backendWriter{path: path, rev: first, sub: 1, chunk: newBackendChunk(), revBytes: mvcc.NewRevBytes(), chunks: chunks, spare: spare, done: done}, nil
}

// createBackend creates the database with etcd's own backend, its first revision synced, in a
// file of another name then renamed to path.
func createBackend(log *zap.Logger, path string, marker importPut, first int64) error {
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		return fmt.Errorf("etcd's database %s exists already", path)
	}
	tmp := path + ".import"
	if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
		return err
	}
	be := backend.NewDefaultBackend(log, tmp)
	tx := be.BatchTx()
	tx.LockOutsideApply()
	for _, b := range []backend.Bucket{schema.Meta, schema.Key, schema.Lease} {
		tx.UnsafeCreateBucket(b)
	}
	schema.UnsafeSetStorageVersion(tx, &version.V3_7)
	kv := encodeKeyValue(nil, []byte(marker.key), []byte(marker.value), marker.lease, first, first, 1)
	tx.UnsafeSeqPut(schema.Key, mvcc.RevToBytes(mvcc.Revision{Main: first}, mvcc.NewRevBytes()), kv)
	tx.Unlock()
	be.ForceCommit()
	if err := be.Close(); err != nil {
		return err
	}
	return replaceFile(tmp, path)
}

func newBackendChunk() *backendChunk {
	return &backendChunk{arena: make([]byte, 0, backendChunkBytes+backendChunkBytes/4), ends: make([]int, 0, 2*backendChunkEntries)}
}

// begin starts revision rev, past every revision written before.
func (w *backendWriter) begin(rev int64) error {
	if rev <= w.rev {
		return fmt.Errorf("write revision %d: revision %d is written already", rev, w.rev)
	}
	w.rev, w.sub = rev, 0
	return nil
}

// put writes p in the open revision as a key's first put (version 1).
func (w *backendWriter) put(p importPut) {
	w.putKV([]byte(p.key), []byte(p.value), p.lease)
}

// putKV writes key, value and lease in the open revision as a key's first put (version 1).
func (w *backendWriter) putKV(key, value []byte, lease int64) {
	w.key(false)
	w.value(encodeKeyValue(w.chunk.arena, key, value, lease, w.rev, w.rev, 1))
}

// tombstone writes the deletion of key in the open revision.
func (w *backendWriter) tombstone(key string) {
	w.key(true)
	w.value(encodeKeyValue(w.chunk.arena, []byte(key), nil, 0, 0, 0, 0))
}

// grant writes the lease id with ttl seconds, which etcd's lessor recovers when it starts.
func (w *backendWriter) grant(id, ttl int64) error {
	v, err := proto.Marshal(&leasepb.Lease{ID: id, TTL: ttl})
	if err != nil {
		return err
	}
	c := w.chunk
	c.arena = binary.BigEndian.AppendUint64(c.arena, uint64(id))
	c.ends = append(c.ends, len(c.arena))
	c.lease = append(c.lease, true)
	w.value(append(c.arena, v...))
	return nil
}

// key appends the key of the open revision's next entry of the key bucket.
func (w *backendWriter) key(tombstone bool) {
	c := w.chunk
	w.revBytes = mvcc.RevToBytes(mvcc.Revision{Main: w.rev, Sub: w.sub}, w.revBytes)
	c.arena = append(c.arena, w.revBytes...)
	if tombstone {
		c.arena = append(c.arena, 't')
	}
	c.ends = append(c.ends, len(c.arena))
	c.lease = append(c.lease, false)
	w.sub++
}

// value ends the entry begun, arena being the chunk's arena with the value appended.
func (w *backendWriter) value(arena []byte) {
	c := w.chunk
	c.arena = arena
	c.ends = append(c.ends, len(arena))
	w.flushFull()
}

func (w *backendWriter) flushFull() {
	if len(w.chunk.lease) >= backendChunkEntries || len(w.chunk.arena) >= backendChunkBytes {
		w.chunks <- w.chunk
		select {
		case w.chunk = <-w.spare:
		default:
			w.chunk = newBackendChunk()
		}
	}
}

// close hands the last chunk over, and waits until everything is committed and synced and the
// database closed; only a nil error means all is on disk. It may be called again.
func (w *backendWriter) close() error {
	if w.chunks == nil {
		return nil
	}
	if len(w.chunk.lease) > 0 {
		w.chunks <- w.chunk
	}
	close(w.chunks)
	w.chunks = nil
	return <-w.done
}

// writeChunks writes a new database beside path, holding what path holds (the marker's
// revision, the buckets and storage version createBackend wrote) and every chunk's entries,
// syncs it and renames it to path. After a failure it drains chunks, so that their writer
// never blocks, and path still holds the marker's database.
func writeChunks(path string, chunks <-chan *backendChunk, spare chan<- *backendChunk) error {
	bulk := path + ".bulk"
	err := writeBulk(path, bulk, chunks, spare)
	for range chunks {
	}
	if err == nil {
		err = replaceFile(bulk, path)
	}
	if err != nil {
		os.Remove(bulk)
		return fmt.Errorf("etcd's database %s: %w", path, err)
	}
	return nil
}

// writeBulk writes bulk: the key bucket of path followed by the chunks' keys, which come in
// order after it; the lease bucket of path with the chunks' leases; path's other buckets.
// Each chunk written is emptied and offered back on spare.
func writeBulk(path, bulk string, chunks <-chan *backendChunk, spare chan<- *backendChunk) error {
	base, err := readBuckets(path)
	if err != nil {
		return err
	}
	if err := os.Remove(bulk); err != nil && !os.IsNotExist(err) {
		return err
	}
	w, err := boltfile.Create(bulk, os.Getpagesize())
	if err != nil {
		return err
	}
	keyName, leaseName := string(schema.Key.Name()), string(schema.Lease.Name())
	leases := base[leaseName]
	err = w.Bucket([]byte(keyName))
	for _, e := range base[keyName] {
		err = errors.Join(err, w.Put(e[0], e[1]))
	}
	for c := range chunks {
		if err != nil {
			break
		}
		from := 0
		for i, isLease := range c.lease {
			k, v := c.arena[from:c.ends[2*i]], c.arena[c.ends[2*i]:c.ends[2*i+1]]
			from = c.ends[2*i+1]
			if isLease {
				leases = append(leases, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			} else if err = w.Put(k, v); err != nil {
				break
			}
		}
		c.arena, c.ends, c.lease = c.arena[:0], c.ends[:0], c.lease[:0]
		select {
		case spare <- c:
		default:
		}
	}
	slices.SortFunc(leases, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
	base[leaseName] = leases
	for name, entries := range base {
		if err != nil || name == keyName {
			continue
		}
		err = w.Bucket([]byte(name))
		for _, e := range entries {
			err = errors.Join(err, w.Put(e[0], e[1]))
		}
	}
	return errors.Join(err, w.Close())
}

// readBuckets reads every bucket of the database at path.
func readBuckets(path string) (map[string][][2][]byte, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := map[string][][2][]byte{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			entries := [][2][]byte{}
			err := b.ForEach(func(k, v []byte) error {
				entries = append(entries, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
				return nil
			})
			out[string(name)] = entries
			return err
		})
	})
	return out, err
}

// replaceFile renames from to to and syncs their directory, so that the rename survives a
// crash.
func replaceFile(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// encodeKeyValue appends the mvccpb.KeyValue etcd stores for a put of key, value and lease,
// fields in their order and zero fields left out, as proto.Marshal writes it.
func encodeKeyValue(b, key, value []byte, lease, created, modified, version int64) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, key)
	for _, f := range []struct {
		num protowire.Number
		v   int64
	}{{2, created}, {3, modified}, {4, version}} {
		if f.v != 0 {
			b = protowire.AppendTag(b, f.num, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(f.v))
		}
	}
	if len(value) > 0 {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, value)
	}
	if lease != 0 {
		b = protowire.AppendTag(b, 6, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(lease))
	}
	return b
}

// backendFirstRev is the marker's revision in a database an import writes: the one it has when
// Import puts it into a new etcd (whose revision is 1).
const backendFirstRev = 2

// importBackend writes the plan into cfg.Backend's database, in the layout and revisions Import
// gives it through etcd's client, finished as finish finishes it: etcd starts on it later, as
// zetcd's etcd.
func (im *importer) importBackend(res ImportResult) (ImportResult, error) {
	im.first, res.FirstRev = backendFirstRev, backendFirstRev
	im.marker = im.markerValue()
	layout, why, err := im.layout()
	if err != nil {
		return res, err
	}
	res.Zxids, res.Why = im.zxidsDone(why)
	if res.ZxidTable, err = im.addZxidTable(layout, why != ""); err != nil {
		return res, im.failed(err)
	}
	final, resume := im.finalRev(layout)
	start := time.Now()
	if err := im.writeBackend(layout, final); err != nil {
		return res, im.failed(err)
	}
	res.Revisions, res.FinalRev, res.ResumeOK = len(layout.revs), final, resume
	im.log.Info("import: etcd's database written", zap.String("path", im.cfg.Backend.Path), zap.Duration("took", time.Since(start)),
		zap.Int("nodes", res.Nodes), zap.String("zxids", string(res.Zxids)),
		zap.Int("revisions", res.Revisions), zap.Int64("final-revision", final))
	return res, nil
}

// writeBackend writes the marker's revision, each revision of layout, the sessions' leases and
// keys (and the table of zxids' chunks), and at final what finish commits: the marker
// deleted, the fence put, the table's head.
func (im *importer) writeBackend(l *importLayout, final int64) error {
	marker := importPut{key: im.keys.importMarker(), value: im.marker}
	w, err := newBackendWriter(im.log.Named("backend").WithOptions(zap.IncreaseLevel(zap.WarnLevel)), im.cfg.Backend.Path, marker, im.first)
	if err != nil {
		return err
	}
	defer w.close()
	var key, value []byte // scratch: putKV copies them
	put := func(op importOp, l *importLayout) {
		key = im.keys.appendImportKey(key[:0], op)
		value = appendImportValue(value[:0], op, l.zxid(op.zxid), l)
		w.putKV(key, value, op.lease)
	}
	for _, op := range im.plan.byZxid[0] {
		put(op, &importLayout{})
	}
	for _, r := range l.revs {
		if err := w.begin(r.rev); err != nil {
			return err
		}
		for _, z := range r.zxids {
			for _, op := range im.plan.byZxid[z] {
				put(op, l)
			}
		}
	}
	for _, sess := range im.plan.sessions {
		if err := w.grant(sess.ID, sessionTTL(sess)); err != nil {
			return err
		}
	}
	sessionsAt := final - int64(len(im.sessionTxns))
	for i, puts := range im.sessionTxns {
		if err := w.begin(sessionsAt + int64(i)); err != nil {
			return err
		}
		for _, p := range puts {
			w.put(p)
		}
	}
	if err := w.begin(final); err != nil {
		return err
	}
	w.tombstone(marker.key)
	w.put(importPut{key: im.keys.fence(), value: "0"})
	if im.zxidHead != "" {
		w.put(importPut{key: im.keys.migratedZxids(), value: im.zxidHead})
	}
	return w.close()
}
