package xchk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// Backend is a zetcd.Backend that cross-checks another one against a real ZooKeeper: every
// session it opens has a twin session on the oracle. It is safe for concurrent use.
type Backend struct {
	inner zetcd.Backend
	cfg   Config // defaults applied; read-only
	log   *zap.Logger
	m     metrics

	owners *ownerMap

	// gate keeps comparisons consistent across sessions. A write (writeOps) holds it
	// exclusively for its two executions, and so does ending a session (Close, Expire), so
	// both servers apply changes in the same order and no request of another session observes
	// one side changed and the other not; reads and watch operations hold it shared.
	gate sync.RWMutex

	// mu protects pairs, closed and the mutable fields of every pair.
	mu     sync.Mutex
	pairs  map[encoding.SessionID]*pair // by zetcd session id
	closed bool
}

// pair is a zetcd session and its ZooKeeper twin, across the connections that resume it.
type pair struct {
	zid   encoding.SessionID
	zxids *zxidMap // own lock

	// Guarded by Backend.mu.
	kid     encoding.SessionID // the twin's id; 0 if the session has no twin
	kpasswd []byte
	gen     uint64   // incremented by every Connect of the session
	current *session // the newest connection's session
}

var _ zetcd.Backend = (*Backend)(nil)

// NewBackend returns a Backend that serves sessions from inner and cross-checks them against
// the ZooKeeper at cfg.OracleAddr. It fails only on an invalid Config or a metrics
// registration conflict; the oracle is not contacted until the first session.
func NewBackend(inner zetcd.Backend, cfg Config) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Backend{
		inner:  inner,
		cfg:    cfg,
		log:    cfg.Logger,
		m:      m,
		owners: newOwnerMap(),
		pairs:  make(map[encoding.SessionID]*pair),
	}, nil
}

// Connect opens or resumes the session on the inner backend, then its twin on the oracle with
// the same timeout (and the client's lastZxidSeen translated). Refusals come from the inner
// backend only; an oracle that is down or slow leaves the session served but unchecked.
func (b *Backend) Connect(ctx context.Context, p zetcd.ConnectParams) (zetcd.Session, error) {
	s := &session{b: b, sink: p.Events}
	s.events = newEventMatcher(b.cfg.EventWait, s.unpairedEvent)
	ip := p
	ip.Events = zetcdSink{s}
	in, err := b.inner.Connect(ctx, ip)
	if err != nil {
		return nil, err
	}
	s.setInner(in)
	if err := b.attach(ctx, s, p); err != nil {
		s.dropOracle()
		b.forget(s)
		in.Detach()
		return nil, err
	}
	return s, nil
}

// attach finds or creates the session's pair and opens or resumes its twin. The error is a
// *MismatchError under FailFast, nil otherwise.
func (b *Backend) attach(ctx context.Context, s *session, p zetcd.ConnectParams) error {
	id := s.inner.ID()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errors.New("xchk: backend closed")
	}
	pr := b.pairs[id]
	if pr == nil {
		pr = &pair{zid: id, zxids: newZxidMap()}
		b.pairs[id] = pr
	}
	pr.gen++
	s.pair, s.gen = pr, pr.gen
	old := pr.current
	pr.current = s
	kid, kpasswd := pr.kid, pr.kpasswd
	b.mu.Unlock()
	if old != nil {
		// ZooKeeper closes the old twin connection when the twin is resumed; stop watching it.
		old.dropOracle()
	}

	resumed := p.SessionID != 0
	if resumed && kid == 0 {
		s.uncompared(encoding.OpCreateSession, "", errors.New("session has no twin in this process (opened elsewhere, or its twin failed)"))
		return nil
	}
	timeoutMs := int32(s.inner.Timeout() / time.Millisecond)
	req := encoding.ConnectRequest{
		TimeOut:      timeoutMs,
		SessionID:    kid,
		Passwd:       kpasswd,
		LastZxidSeen: pr.zxids.toZooKeeper(p.LastZxidSeen),
	}
	octx, cancel := context.WithTimeout(ctx, b.cfg.OracleTimeout)
	oc, resp, err := dialOracle(octx, b.cfg.OracleAddr, req, b.cfg.OracleTimeout, s.oracleEvent)
	cancel()
	switch {
	case errors.Is(err, errOracleExpired) && resumed:
		return s.report(encoding.OpCreateSession, "", []difference{{field: "session", zetcd: "resumed", zk: "expired",
			detail: fmt.Sprintf("twin %v refused", kid)}})
	case err != nil:
		s.uncompared(encoding.OpCreateSession, "", err)
		return nil
	}
	if !resumed {
		b.mu.Lock()
		pr.kid, pr.kpasswd = resp.SessionID, resp.Passwd
		b.mu.Unlock()
		b.owners.add(id, resp.SessionID)
	}
	s.setOracle(oc)
	if resp.TimeOut != timeoutMs {
		return s.report(encoding.OpCreateSession, "", []difference{{field: "timeout",
			zetcd: fmt.Sprint(timeoutMs), zk: fmt.Sprint(resp.TimeOut)}})
	}
	return nil
}

// forget drops s's pair if s is still its newest connection: the session has ended, or
// ZooKeeper will expire its twin.
func (b *Backend) forget(s *session) {
	b.mu.Lock()
	pr := s.pair
	if pr == nil || pr.current != s || b.pairs[pr.zid] != pr {
		b.mu.Unlock()
		return
	}
	delete(b.pairs, pr.zid)
	b.mu.Unlock()
	b.owners.remove(pr.zid)
}

// isCurrent reports whether s is the newest connection of its session.
func (b *Backend) isCurrent(s *session) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return s.pair != nil && s.pair.current == s
}

// twinCredentials returns the twin of s's session, if any.
func (b *Backend) twinCredentials(s *session) (encoding.SessionID, []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return s.pair.kid, s.pair.kpasswd
}

// Mismatches is the zetcd_xchk_mismatches_total{op,field} counter.
func (b *Backend) Mismatches() *prometheus.CounterVec { return b.m.mismatches }

// Requests is the zetcd_xchk_requests_total{op} counter.
func (b *Backend) Requests() *prometheus.CounterVec { return b.m.requests }

// Close ends every oracle connection; twin sessions then expire on ZooKeeper by themselves. Call
// it after the zetcd.Server serving this Backend has been closed. It does not close the inner
// backend.
func (b *Backend) Close() {
	b.mu.Lock()
	b.closed = true
	var ss []*session
	for _, pr := range b.pairs {
		if pr.current != nil {
			ss = append(ss, pr.current)
		}
	}
	clear(b.pairs)
	b.mu.Unlock()
	for _, s := range ss {
		s.dropOracle()
	}
}
