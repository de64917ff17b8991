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
}

func newSessionTable(ctx context.Context, log *zap.Logger) *sessionTable {
	return &sessionTable{ctx: ctx, log: log, m: make(map[encoding.SessionID]*sessionRecord)}
}

// attach records that c now serves c.sess. If the session already had a record here, its
// expiry timer is stopped and the record replaced; a connection still serving it is returned
// so that the caller can close it (ZooKeeper closes other connections of a resumed session).
// ok is false when the server is closing.
func (t *sessionTable) attach(c *clientConn) (old *clientConn, ok bool) {
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
		old = rec.conn
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
	ctx, cancel := context.WithTimeout(t.ctx, lifecycleTimeout)
	defer cancel()
	if err := rec.sess.Expire(ctx); err != nil {
		t.expireFailed(id, rec, err, log)
		return
	}
	log.Info("detached session expired")
}

// maxExpireRetry bounds how long a session whose expiry failed (its store out of reach) waits
// before it is tried again: as soon as the store is back, this server ends the session itself,
// exactly, rather than leave its ephemeral nodes to the store's own expiry (an etcd lease's
// TTL), which comes later and does not move their parents' pzxid.
const maxExpireRetry = 2 * time.Second

// expireFailed records session id, whose Expire failed with err, as detached again, to be
// expired after min(its timeout, maxExpireRetry), unless it was resumed here since or the
// server is closing. rec.sess already began its end; a client that resumes the session
// meanwhile gets a new Session (attach replaces the record).
func (t *sessionTable) expireFailed(id encoding.SessionID, rec *sessionRecord, err error, log interface {
	Warn(string, ...zap.Field)
}) {
	if errors.Is(err, context.Canceled) {
		return // the server is closing
	}
	retry := min(rec.sess.Timeout(), maxExpireRetry)
	log.Warn("expire session failed; trying again", zap.Duration("in", retry),
		zap.Error(fmt.Errorf("session %v: expire: %w", id, err)))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.m[id] != nil {
		return
	}
	rec.conn = nil
	t.m[id] = rec
	t.arm(id, rec, time.Now().Add(retry))
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
