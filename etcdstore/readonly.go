package etcdstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
	"github.com/zetcd/zetcd/zetcd"
)

// Read-only sessions (zetcd.ReadOnlyBackend): while the watch feed hears nothing from etcd, the
// replica is served as of the newest revision it received, to sessions local to this process
// that have no lease and write nothing to etcd, as ReadOnlyZooKeeperServer serves local
// sessions from the tree it holds. docs/operating.md, "Read-only mode".

var _ zetcd.ReadOnlyBackend = (*Store)(nil)

// CutOff reports whether the watch feed has heard nothing from etcd for feedStall: no event, no
// progress notification and no answer to the linearizable read of etcd's revision the feed
// makes when quiet (followWatch), on a watch that etcd ends when its member has no leader
// (feedContext). That is etcd without a quorum, or none of its members in reach. It is the
// test that makes the four-letter words answer "not currently serving" (awaitCurrent).
func (b *Store) CutOff() bool {
	return time.Since(time.Unix(0, b.feedHeard.Load())) > feedStall
}

// ReadOnlyStats are Stats' numbers from the replica as it is, without waiting for etcd.
func (b *Store) ReadOnlyStats() zetcd.BackendStats { return b.tree.backendStats() }

// readOnlySessions are the read-only sessions of this process. Their Done is one latch for all
// of them, closed (and the table emptied) when the feed hears etcd again: every read-only
// session ends then, as ReadOnlyZooKeeperServer's shutdown ends its local sessions.
type readOnlySessions struct {
	mu   sync.Mutex
	m    map[encoding.SessionID]*readOnlyEntry
	next int64 // the next session id (nextSessionID); 0 before the first
	// back is the latch of the sessions open now; nil while there are none. The feed loads
	// it on every response (storeHeard), so it is an atomic pointer.
	back atomic.Pointer[goneLatch]
}

// readOnlyEntry is one read-only session: what a client resumes it with, and the Session
// object of the connection that holds it now.
type readOnlyEntry struct {
	passwd  []byte
	timeout time.Duration
	holder  *readOnlySession
}

// storeHeard ends every read-only session: the feed heard etcd.
func (t *readOnlySessions) storeHeard() {
	if t.back.Load() == nil {
		return
	}
	t.mu.Lock()
	l := t.back.Swap(nil)
	t.m = nil
	t.mu.Unlock()
	if l != nil {
		l.close(nil)
	}
}

// nextSessionID forms read-only session ids as ZooKeeper's session trackers do
// (SessionTrackerImpl.initializeNextSessionId): the server's id in the top byte (here the low
// byte of the process id), the time in milliseconds below it, counting up from there. The
// caller holds mu.
func (t *readOnlySessions) nextSessionID(processID uint64) encoding.SessionID {
	if t.next == 0 {
		t.next = int64(uint64(time.Now().UnixMilli())<<24>>8) | int64((processID&0xff)<<56)
	}
	id := t.next
	t.next++
	return encoding.SessionID(id)
}

// ConnectReadOnly opens or resumes a read-only session (see zetcd.ReadOnlyBackend).
func (b *Store) ConnectReadOnly(_ context.Context, p zetcd.ConnectParams) (zetcd.Session, error) {
	if rev := b.tree.revision(); revOf(p.LastZxidSeen) > rev {
		return nil, zetcd.ErrZxidAhead
	}
	t := &b.readOnly
	t.mu.Lock()
	defer t.mu.Unlock()
	var e *readOnlyEntry
	id := p.SessionID
	if id == 0 {
		passwd := make([]byte, 16)
		if _, err := rand.Read(passwd); err != nil {
			return nil, fmt.Errorf("zetcd: create read-only session: password: %w", err)
		}
		id = t.nextSessionID(b.process.id)
		e = &readOnlyEntry{passwd: passwd, timeout: p.Timeout}
		if t.m == nil {
			t.m = map[encoding.SessionID]*readOnlyEntry{}
		}
		t.m[id] = e
	} else if e = t.m[id]; e == nil {
		return nil, fmt.Errorf("zetcd: session %s is not a read-only session of this process: %w", id, zetcd.ErrNotServing)
	} else if !bytes.Equal(e.passwd, p.Passwd) {
		return nil, zetcd.ErrSessionExpired
	}
	back := t.back.Load()
	if back == nil {
		back = &goneLatch{}
		t.back.Store(back)
	}
	s := b.newReadOnlySession(id, e, back, p)
	e.holder = s
	return s, nil
}

// readOnlySession is an etcdSession without a lease: the server calls only its reads (the
// others it answers NotReadOnly), and its life cycle touches nothing in etcd.
type readOnlySession struct {
	*etcdSession
	back *goneLatch
}

func (b *Store) newReadOnlySession(id encoding.SessionID, e *readOnlyEntry, back *goneLatch, p zetcd.ConnectParams) *readOnlySession {
	events := p.Events
	if events == nil {
		events = discardEvents{}
	}
	rev := b.tree.revision()
	s := &etcdSession{b: b, id: id, passwd: e.passwd, timeout: e.timeout, lastRev: rev, lastZxid: zxidOf(rev, 0),
		auth: &znode.Identities{}, remote: p.RemoteAddr, readOnly: true}
	s.watcher = watch.NewWatcher(events, id, s.auth)
	if ip := znode.RemoteIP(p.RemoteAddr); ip != "" {
		s.auth.Add(encoding.ID{Scheme: znode.SchemeIP, ID: ip})
	}
	for _, aid := range p.AuthIDs {
		s.auth.Add(aid)
	}
	return &readOnlySession{etcdSession: s, back: back}
}

// Done is closed when etcd is heard again (storeHeard).
func (s *readOnlySession) Done() <-chan struct{} { return s.back.done() }

// Err is nil: the session ended, and the client opens a read-write one.
func (s *readOnlySession) Err() error { return nil }

func (s *readOnlySession) AfterDone(f func()) (stop func() bool) { return s.back.after(f) }

// Detach releases the connection's watches; the session stays resumable here until it expires.
func (s *readOnlySession) Detach() {
	s.detached.Do(func() { s.b.watches.CloseWatcher(s.watcher) })
}

// Close ends the session, which has nothing in etcd: no zxid is consumed.
func (s *readOnlySession) Close(context.Context) (encoding.Zxid, error) {
	s.forget()
	s.Detach()
	return s.LastZxid(), nil
}

// Expire ends the session unless another connection has resumed it since.
func (s *readOnlySession) Expire(context.Context) error {
	s.forget()
	return nil
}

// forget removes the session from the table if this object still holds it.
func (s *readOnlySession) forget() {
	t := &s.b.readOnly
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[s.id]; e != nil && e.holder == s {
		delete(t.m, s.id)
	}
}

// RefuseWrite consumes nothing: a read-only session writes no error transaction.
func (s *readOnlySession) RefuseWrite(context.Context, encoding.Op) (encoding.Zxid, error) {
	return s.LastZxid(), nil
}
