package zetcd

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// sessionTable tracks the sessions this server has served and that have not ended here: the
// ones a connection is serving, and detached ones whose expiry timer is pending. A session has
// at most one record; a record has either a connection or a timer.
//
// Life-cycle calls on a Session (Close, Expire, Detach) are made by the connection that served
// it after that connection's executor has stopped, or by an expiry timer after the connection
// is gone, so they never overlap a Handler call of the same Session.
type sessionTable struct {
	ctx context.Context // the server's; parent of Expire's context
	log *zap.Logger
	// reachable reports whether the store answers now (Server.storeReachable); an expiry is
	// not attempted while it does not.
	reachable func(context.Context) bool

	// mu protects closed and m. wg is only Added under mu while !closed.
	mu     sync.Mutex
	closed bool
	m      map[encoding.SessionID]*sessionRecord
	wg     sync.WaitGroup // running expiry callbacks
}

type sessionRecord struct {
	sess  Session
	conn  *clientConn // the connection serving sess; nil once detached
	timer *time.Timer // expiry timer while detached; nil while a connection serves sess
	// deadline is when timer fires (the dump four-letter word shows it).
	deadline time.Time
	// outage is set when an expiry found the store out of reach, or failed: once the store
	// answers again, the session gets a fresh timeout before it is expired (expireOrDefer).
	outage bool
}

func newSessionTable(ctx context.Context, log *zap.Logger, reachable func(context.Context) bool) *sessionTable {
	return &sessionTable{ctx: ctx, log: log, reachable: reachable, m: make(map[encoding.SessionID]*sessionRecord)}
}

// attach records that c now serves c.sess. If the session already had a record here, its
// expiry timer is stopped and the record replaced; a connection still serving it is returned
// so that the caller can close it (ZooKeeper closes other connections of a resumed session),
// and the Session of a detached one is detached (it may not be yet: an expiry put off while
// the store was out of reach keeps it whole). ok is false when the server is closing.
func (t *sessionTable) attach(c *clientConn) (old *clientConn, ok bool) {
	var replaced Session
	defer func() {
		if replaced != nil {
			replaced.Detach()
		}
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false
	}
	if rec := t.m[c.id]; rec != nil {
		if rec.timer != nil {
			// If the timer already fired, its callback finds the record replaced and does
			// nothing; if it got past that check first, Expire of the old Session is a no-op
			// for a session resumed since (Session contract).
			rec.timer.Stop()
		}
		if old = rec.conn; old == nil {
			replaced = rec.sess
		}
	}
	t.m[c.id] = &sessionRecord{sess: c.sess, conn: c}
	return old, true
}

// remove drops the record of c's session if c still serves it.
func (t *sessionTable) remove(c *clientConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rec := t.m[c.id]; rec != nil && rec.conn == c {
		delete(t.m, c.id)
	}
}

// detach records that c no longer serves its session (already Detached by the caller) and
// arms the expiry timer for deadline, unless c had been superseded or the server is closing.
func (t *sessionTable) detach(c *clientConn, deadline time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := t.m[c.id]
	if rec == nil || rec.conn != c {
		return
	}
	if t.closed {
		delete(t.m, c.id)
		return
	}
	rec.conn = nil
	t.arm(c.id, rec, deadline)
}

// arm sets the expiry timer of the detached session id to deadline. Called with mu held.
func (t *sessionTable) arm(id encoding.SessionID, rec *sessionRecord, deadline time.Time) {
	rec.deadline = deadline
	rec.timer = time.AfterFunc(time.Until(deadline), func() { t.expire(id, rec) })
}

// heard restarts the timeout of a detached session whose client has just asked to resume it,
// with its password, and could not be served because the backend could not reach its store: the
// client is alive and talking to this server, so its session must not expire for that, as a
// ZooKeeper ensemble that lost its leader gives every session a fresh timeout once it is back.
func (t *sessionTable) heard(id encoding.SessionID, passwd []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := t.m[id]
	if rec == nil || rec.timer == nil || subtle.ConstantTimeCompare(rec.sess.Password(), passwd) != 1 {
		return
	}
	if !rec.timer.Stop() {
		return // firing: expire has it
	}
	t.arm(id, rec, time.Now().Add(rec.sess.Timeout()))
}

// expire is the expiry timer callback of a detached session.
func (t *sessionTable) expire(id encoding.SessionID, rec *sessionRecord) {
	t.mu.Lock()
	if t.closed || t.m[id] != rec {
		// Resumed here, or the server is closing: not ours to expire.
		t.mu.Unlock()
		return
	}
	delete(t.m, id)
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()

	log := t.log.With(zap.Stringer("session", id))
	defer func() {
		if r := recover(); r != nil {
			log.Error("panic while expiring session", zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	if t.expireOrDefer(id, rec, log) {
		log.Info("detached session expired")
	}
}

// maxExpireRetry bounds how long a session whose expiry was put off (its store out of reach)
// waits before the store is asked again: as soon as the store is back, the session's timeout
// starts afresh, and then this server ends the session itself, exactly, rather than leave its
// ephemeral nodes to the store's own expiry (an etcd lease's TTL), which comes later and does
// not move their parents' pzxid.
const maxExpireRetry = 2 * time.Second

// expireOrDefer expires the session of rec, whose timeout has run out, and reports whether it
// did. While the store is out of reach it expires nothing, and once the store answers again the
// session gets a fresh timeout, as a ZooKeeper leader elected after an outage gives every
// session: a client that kept trying to resume has done so by then, and one that went away is
// expired after it. An expiry that fails is treated the same way. Both put rec back in the
// table, detached (putBack), unless the session was resumed here since or the server is
// closing. rec is not in the table when it is called.
func (t *sessionTable) expireOrDefer(id encoding.SessionID, rec *sessionRecord, log expiryLog) bool {
	ctx, cancel := context.WithTimeout(t.ctx, lifecycleTimeout)
	defer cancel()
	switch {
	case !t.reachable(ctx):
		if ctx.Err() == nil {
			log.Debug("session timed out while the store is out of reach; not expired meanwhile")
			t.putBack(id, rec, true, time.Now().Add(min(rec.sess.Timeout(), maxExpireRetry)))
		}
		return false
	case rec.outage:
		log.Info("the store answers again; the session's timeout starts afresh")
		t.putBack(id, rec, false, time.Now().Add(rec.sess.Timeout()))
		return false
	}
	if err := rec.sess.Expire(ctx); err != nil {
		t.expireFailed(id, rec, err, log)
		return false
	}
	return true
}

// expireFailed records session id, whose Expire failed with err, as detached again, to be
// looked at again after min(its timeout, maxExpireRetry) and expired a fresh timeout after the
// store answers (expireOrDefer). rec.sess already began its end; a client that resumes the
// session meanwhile gets a new Session (attach replaces the record).
func (t *sessionTable) expireFailed(id encoding.SessionID, rec *sessionRecord, err error, log expiryLog) {
	if errors.Is(err, context.Canceled) {
		return // the server is closing
	}
	retry := min(rec.sess.Timeout(), maxExpireRetry)
	log.Warn("expire session failed; trying again once the store answers", zap.Duration("in", retry),
		zap.Error(fmt.Errorf("session %v: expire: %w", id, err)))
	t.putBack(id, rec, true, time.Now().Add(retry))
}

// expiryLog is what expireOrDefer logs to: the table's logger, or the connection's (connLog).
type expiryLog interface {
	Debug(string, ...zap.Field)
	Info(string, ...zap.Field)
	Warn(string, ...zap.Field)
}

// putBack records session id as detached again, its record's outage set as given, with its
// expiry timer armed for deadline, unless it was resumed here since or the server is closing:
// then it detaches rec's Session, which nothing else would (attach and close no longer see it).
func (t *sessionTable) putBack(id encoding.SessionID, rec *sessionRecord, outage bool, deadline time.Time) {
	t.mu.Lock()
	if t.closed || t.m[id] != nil {
		t.mu.Unlock()
		rec.sess.Detach()
		return
	}
	defer t.mu.Unlock()
	rec.conn, rec.outage = nil, outage
	t.m[id] = rec
	t.arm(id, rec, deadline)
}

// close stops every expiry timer, waits for expiry callbacks already running, and detaches
// every session still recorded (Detach is idempotent; connections have detached theirs).
// Nothing is expired: clients resume their sessions elsewhere.
func (t *sessionTable) close() {
	t.mu.Lock()
	t.closed = true
	var sessions []Session
	for id, rec := range t.m {
		if rec.timer != nil {
			rec.timer.Stop()
		}
		sessions = append(sessions, rec.sess)
		delete(t.m, id)
	}
	t.mu.Unlock()
	t.wg.Wait()
	for _, sess := range sessions {
		sess.Detach()
	}
}
