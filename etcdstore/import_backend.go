package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// backendWriter writes keys straight into the backend database of an etcd that has never
// started, in etcd's own layout (storage/mvcc: a key of the key bucket is a revision, its value
// the mvccpb.KeyValue written there). With a database and no write-ahead log, etcd bootstraps a
// new cluster on that database: it validates the storage version, rebuilds its index from the
// key bucket (its revision is the highest found there, the revisions below need not all be
// used), recovers the leases of the lease bucket, and attaches to them the keys that name them.
//
// The first revision, holding the import marker, is written into a file of another name, which
// becomes etcd's database once it is committed: the database of an import cut short by a crash
// holds the marker, and zetcd refuses it (without the database, etcd starts empty: nothing was
// imported).
type backendWriter struct {
	log  *zap.Logger
	path string
	be   backend.Backend
	tx   backend.BatchTx
	rev  int64 // the revision being written
	sub  int64 // its next write
	open bool
	// synced is set once the first revision, the marker's, is on disk; the others are
	// committed in etcd's batches, and all by close.
	synced bool
}

// newBackendWriter creates etcd's database at path, which must not exist, with the buckets
// and storage version of this etcd.
func newBackendWriter(log *zap.Logger, path string) (*backendWriter, error) {
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		return nil, fmt.Errorf("etcd's database %s exists already", path)
	}
	tmp := path + ".import"
	if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	be := backend.NewDefaultBackend(log, tmp)
	tx := be.BatchTx()
	tx.LockOutsideApply()
	for _, b := range []backend.Bucket{schema.Meta, schema.Key, schema.Lease} {
		tx.UnsafeCreateBucket(b)
	}
	schema.UnsafeSetStorageVersion(tx, &version.V3_7)
	tx.Unlock()
	return &backendWriter{log: log, path: path, be: be, tx: tx}, nil
}

// begin starts revision rev, past every revision written before.
func (w *backendWriter) begin(rev int64) error {
	if rev <= w.rev {
		return fmt.Errorf("write revision %d: revision %d is written already", rev, w.rev)
	}
	if err := w.end(); err != nil {
		return err
	}
	w.rev, w.sub, w.open = rev, 0, true
	w.tx.LockOutsideApply()
	return nil
}

// put writes p in the open revision as a key's first put (version 1).
func (w *backendWriter) put(p importPut) { w.putVersion(p, w.rev, 1) }

// putVersion writes p in the open revision as the version'th put of a key created in
// revision created, as etcd's put of an existing key keeps its create revision.
func (w *backendWriter) putVersion(p importPut, created, version int64) {
	kv := &mvccpb.KeyValue{Key: []byte(p.key), Value: []byte(p.value), CreateRevision: created, ModRevision: w.rev, Version: version, Lease: p.lease}
	b, err := proto.Marshal(kv)
	if err != nil {
		panic(err) // a KeyValue always marshals
	}
	w.tx.UnsafeSeqPut(schema.Key, mvcc.RevToBytes(mvcc.Revision{Main: w.rev, Sub: w.sub}, mvcc.NewRevBytes()), b)
	w.sub++
}

// grant writes the lease id with ttl seconds, which etcd's lessor recovers when it starts.
func (w *backendWriter) grant(id, ttl int64) error {
	if err := w.end(); err != nil {
		return err
	}
	w.tx.LockOutsideApply()
	schema.MustUnsafePutLease(w.tx, &leasepb.Lease{ID: id, TTL: ttl})
	w.tx.Unlock()
	return nil
}

// end closes the open revision; the first is committed at once, and its file renamed to
// etcd's database.
func (w *backendWriter) end() error {
	if !w.open {
		return nil
	}
	w.tx.Unlock()
	w.open = false
	if w.synced {
		return nil
	}
	w.synced = true
	err := w.be.Close()
	if err == nil {
		err = os.Rename(w.path+".import", w.path)
	}
	if err != nil {
		w.be = nil
		return err
	}
	w.be = backend.NewDefaultBackend(w.log, w.path)
	w.tx = w.be.BatchTx()
	return nil
}

// close commits and closes the database; it may be called again.
func (w *backendWriter) close() error {
	if w.be == nil {
		return nil
	}
	err := w.end()
	if w.be == nil {
		return err
	}
	w.be.ForceCommit()
	err = errors.Join(err, w.be.Close())
	w.be = nil
	return err
}

// backendFirstRev is the marker's revision in a database an import writes: the one it has when
// Import puts it into a new etcd (whose revision is 1).
const backendFirstRev = 2

// importBackend writes the plan into cfg.Backend's database, in the layout and revisions Import
// gives it through etcd's client, then starts that etcd and finishes through its client.
func (im *importer) importBackend(ctx context.Context, res ImportResult) (ImportResult, error) {
	im.first, res.FirstRev = backendFirstRev, backendFirstRev
	im.marker = im.markerValue()
	layout, why, err := im.layout()
	if err != nil {
		return res, err
	}
	res.Zxids, res.Why = im.zxidsDone(why)
	final, resume := im.finalRev(layout)
	start := time.Now()
	if err := im.writeBackend(layout, final); err != nil {
		return res, im.failed(err)
	}
	im.log.Info("import: etcd's database written", zap.String("path", im.cfg.Backend.Path), zap.Duration("took", time.Since(start)))
	cli, err := im.cfg.Backend.Start()
	if err != nil {
		return res, im.failed(err)
	}
	im.cfg.Client = cli
	if err := im.finish(ctx, final); err != nil {
		return res, im.failed(err)
	}
	res.Revisions, res.FinalRev, res.ResumeOK = len(layout.revs), final, resume
	im.log.Info("import done", zap.Int("nodes", res.Nodes), zap.String("zxids", string(res.Zxids)),
		zap.Int("revisions", res.Revisions), zap.Int64("final-revision", final))
	return res, nil
}

// writeBackend writes the marker's revision, each revision of layout, the sessions' leases and
// keys, and, if the revisions written stop short of final-1, the marker again there: finish
// commits final.
func (im *importer) writeBackend(l *importLayout, final int64) error {
	w, err := newBackendWriter(im.log.Named("backend").WithOptions(zap.IncreaseLevel(zap.WarnLevel)), im.cfg.Backend.Path)
	if err != nil {
		return err
	}
	defer w.close()
	marker := importPut{key: im.keys.importMarker(), value: im.marker}
	if err := w.begin(im.first); err != nil {
		return err
	}
	w.put(marker)
	zero := &importLayout{}
	for _, op := range im.plan.byZxid[0] {
		w.put(im.putFor(op, 0, zero))
	}
	for _, r := range l.revs {
		if err := w.begin(r.rev); err != nil {
			return err
		}
		for _, z := range r.zxids {
			for _, op := range im.plan.byZxid[z] {
				w.put(im.putFor(op, l.zxid(op.zxid), l))
			}
		}
	}
	for _, sess := range im.plan.sessions {
		if err := w.grant(sess.ID, sessionTTL(sess)); err != nil {
			return err
		}
	}
	sessionsAt := final - int64(len(im.sessionTxns))
	if last := sessionsAt - 1; last > w.rev {
		if err := w.begin(last); err != nil {
			return err
		}
		w.putVersion(marker, im.first, 2)
	}
	for i, puts := range im.sessionTxns {
		if err := w.begin(sessionsAt + int64(i)); err != nil {
			return err
		}
		for _, p := range puts {
			w.put(p)
		}
	}
	return w.close()
}
