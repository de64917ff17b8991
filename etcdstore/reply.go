package etcdstore

import (
	"context"
	"fmt"

	"github.com/zetcd/zetcd/encoding"
)

// What every handler of an etcdSession answers with: the reply's zxid (zxid, writeZxid), and the
// error of a request refused before any check (fail: it puts the error key, so that it consumes
// a zxid) or failed by etcd (etcdFailure). Reads are answered from the replica once it has
// reached the session's floor (read.go; ErrNotServing when it cannot, see awaitTree); writes go
// through the committer (commit.go).

// zxid records that the session was answered from the state at revision rev and returns the
// reply's zxid; replies never go back in zxid. With rev 0 (a request refused without a
// transaction of its own, or answered from no particular state) the zxid is the newest this
// process has applied or answered (newestZxid): ZooKeeper puts its lastProcessedZxid in every
// reply, so such a reply shows the other sessions' writes too, not only this session's. (The
// front waits for its events before it sends the reply: AwaitEvents.)
func (s *etcdSession) zxid(rev int64) encoding.Zxid {
	if rev == 0 {
		z := s.b.newestZxid()
		return s.seen(revOf(z), z)
	}
	return s.seen(rev, s.b.tree.stateZxid(rev))
}

// writeZxid records that the session's write numbered index in revision rev committed (or
// failed, consuming that zxid) and returns the reply's zxid, the write's own.
func (s *etcdSession) writeZxid(rev int64, index uint16) encoding.Zxid {
	return s.seen(rev, zxidOf(rev, int(index)))
}

// seen raises the session's floor to rev and its last zxid to z, and returns its last zxid.
func (s *etcdSession) seen(rev int64, z encoding.Zxid) encoding.Zxid {
	s.lastRev = max(s.lastRev, rev)
	if z > s.lastZxid {
		s.lastZxid = z
		s.b.answered(z)
	}
	return s.lastZxid
}

// fail answers a failed write that was refused before reaching a transaction: it consumes a
// revision through the error key, as ZooKeeper logs an error txn.
func (s *etcdSession) fail(ctx context.Context, op string, path string, code encoding.ErrCode) (encoding.Zxid, error) {
	put, err := s.b.kv.Put(ctx, s.b.keys.errorKey(), "")
	if isNoSpace(err) {
		// etcd's NOSPACE alarm: the refusal stands, without a zxid of its own.
		s.b.space.sawNoSpace()
		return s.zxid(0), code
	}
	if err != nil {
		return 0, fmt.Errorf("session %s: %s %q: record failure: %w", s.id, op, path, err)
	}
	return s.writeZxid(put.Header.Revision, 0), code
}

// etcdFailure wraps a transport error, turning a vanished lease into SessionExpired and etcd's
// NOSPACE refusal into QuotaExceeded (space.go).
func (s *etcdSession) etcdFailure(op, path string, err error) (encoding.Zxid, error) {
	if isLeaseGone(err) {
		return s.zxid(0), encoding.ErrSessionExpired
	}
	if isNoSpace(err) {
		s.b.space.sawNoSpace()
		return s.zxid(0), encoding.ErrQuotaExceeded
	}
	return 0, fmt.Errorf("session %s: %s %q: %w", s.id, op, path, err)
}

// storeErr is the reply of a Handler method whose etcd request failed: no response, and
// etcdFailure's zxid and error (a vanished lease is SessionExpired; any other error closes the
// connection, and the session survives).
func storeErr[R any](s *etcdSession, op, path string, err error) (*R, encoding.Zxid, error) {
	z, err := s.etcdFailure(op, path, err)
	return nil, z, err
}
