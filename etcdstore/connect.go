package etcdstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
	"github.com/zetcd/zetcd/zetcd"
)

// Connect: a session is opened (an etcd lease and the session key, in one revision) or resumed
// (its session key rewritten to name this process), then served by an etcdSession (session.go).

// Connect opens or resumes a session (see Backend).
func (b *Store) Connect(ctx context.Context, p zetcd.ConnectParams) (zetcd.Session, error) {
	open := b.resumeSession
	if p.SessionID == 0 {
		open = b.openSession
	}
	sess, err := open(ctx, p)
	if s, ok := sess.(*etcdSession); ok && err == nil {
		s.remote = p.RemoteAddr
		// Every connection holds ip:<its address>, and what its transport established.
		if ip := znode.RemoteIP(p.RemoteAddr); ip != "" {
			s.auth.Add(encoding.ID{Scheme: znode.SchemeIP, ID: ip})
		}
		for _, id := range p.AuthIDs {
			s.auth.Add(id)
		}
	}
	return sess, err
}

// openSession grants the lease (its id is the session id) and writes the session key: one
// revision, as createSession is one zxid in ZooKeeper.
func (b *Store) openSession(ctx context.Context, p zetcd.ConnectParams) (zetcd.Session, error) {
	asked := time.Now()
	grant, err := b.lease.Grant(ctx, b.leaseTTL(p.Timeout))
	if err != nil {
		return nil, fmt.Errorf("zetcd: create session: grant lease: %w", err)
	}
	id := encoding.SessionID(grant.ID)
	passwd := make([]byte, 16)
	if _, err := rand.Read(passwd); err != nil {
		return nil, fmt.Errorf("zetcd: create session: password: %w", err)
	}
	timeoutMs := int32(p.Timeout / time.Millisecond)
	val := encodeSessionValue(sessionValue{passwd: passwd, timeoutMs: timeoutMs, owner: b.process.id})
	put, err := b.kv.Put(ctx, b.keys.session(id), val, clientv3.WithLease(grant.ID))
	if err != nil {
		b.revokeQuietly(grant.ID)
		return nil, fmt.Errorf("zetcd: create session %s: %w", id, err)
	}
	if revOf(p.LastZxidSeen) > put.Header.Revision {
		b.revokeQuietly(grant.ID)
		return nil, zetcd.ErrZxidAhead
	}
	return b.startSession(id, passwd, time.Duration(timeoutMs)*time.Millisecond, put.Header.Revision, asked, p.Events), nil
}

// resumeSession checks the password against the session key and takes ownership of the session
// by rewriting the key with this process as its owner: the session key's ModRevision names the
// connection that owns it, so a zetcd that lost the session to another connection (or the leader
// that adopted it as an orphan) will not expire it.
func (b *Store) resumeSession(ctx context.Context, p zetcd.ConnectParams) (zetcd.Session, error) {
	key := b.keys.session(p.SessionID)
	asked := time.Now()
	get, err := b.kv.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("zetcd: resume session %s: %w", p.SessionID, err)
	}
	if len(get.Kvs) == 0 {
		return nil, zetcd.ErrSessionExpired
	}
	kv := get.Kvs[0]
	sv, err := decodeSessionValue(kv.Value)
	if err != nil {
		return nil, fmt.Errorf("zetcd: resume session %s: %w", p.SessionID, err)
	}
	if !bytes.Equal(sv.passwd, p.Passwd) {
		return nil, zetcd.ErrSessionExpired
	}
	if revOf(p.LastZxidSeen) > get.Header.Revision {
		return nil, zetcd.ErrZxidAhead
	}
	txn, err := b.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(key, encodeSessionValue(sessionValue{passwd: sv.passwd, timeoutMs: sv.timeoutMs, owner: b.process.id}), clientv3.WithIgnoreLease()),
			b.takenFrom(sv.owner)).
		Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, zetcd.ErrSessionExpired
		}
		return nil, fmt.Errorf("zetcd: resume session %s: %w", p.SessionID, err)
	}
	if !txn.Succeeded {
		// Another connection resumed or ended it at the same moment; the client retries.
		return nil, fmt.Errorf("zetcd: resume session %s: raced with another connection", p.SessionID)
	}
	return b.startSession(p.SessionID, sv.passwd, time.Duration(sv.timeoutMs)*time.Millisecond, txn.Header.Revision, asked, p.Events), nil
}

func (b *Store) revokeQuietly(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(b.bgCtx, 5*time.Second)
	defer cancel()
	if _, err := b.lease.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		b.log.Warn("revoke session lease", zap.String("session", encoding.SessionID(id).String()), zap.Error(err))
	}
}

// takenFrom is the put of process owner's taken key (keys.go) that goes with taking a session
// from it, which fails every write transaction of owner's checked before (processGuards). A resume
// on another connection of this process puts this process's own key: its committer may have the
// session's write on its way over one connection to etcd while the resume goes over another.
func (b *Store) takenFrom(owner uint64) clientv3.Op {
	return clientv3.OpPut(b.keys.taken(owner), "")
}

// startSession serves session id from this process; its lease was known alive at confirmed.
func (b *Store) startSession(id encoding.SessionID, passwd []byte, timeout time.Duration, ownerRev int64, confirmed time.Time, events zetcd.EventSink) *etcdSession {
	if events == nil {
		events = discardEvents{}
	}
	// Replies never carry a zxid older than the session's own creation or resumption.
	s := &etcdSession{b: b, id: id, passwd: passwd, timeout: timeout, ownerRev: ownerRev, lastRev: ownerRev, lastZxid: zxidOf(ownerRev, 0), auth: &znode.Identities{}}
	s.watcher = watch.NewWatcher(events, id, s.auth)
	b.local.add(s)
	b.keeper.add(clientv3.LeaseID(id), timeout, b.leaseTTL(timeout), confirmed)
	return s
}
