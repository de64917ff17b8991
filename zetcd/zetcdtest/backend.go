// Package zetcdtest provides a fake zetcd.Backend for testing code that serves or decorates
// sessions (the server's connection layer, decorators such as xchk) without etcd.
package zetcdtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// Backend is an in-memory zetcd.Backend for testing the connection layer only: a flat map of
// paths to data, sessions that can be resumed with their password, and hooks to block, fail or
// panic on demand. It checks the Session contract the server must keep: no life-cycle call
// while a Handler call of the same Session runs, and no Handler call after a life-cycle call.
//
// Special create paths: "/block..." waits until Unblock is closed (or ctx ends); "/fail"
// returns a non-ErrCode error; "/notserving" wraps zetcd.ErrNotServing; "/panic" panics;
// "/nilresp" returns no response and no error.
// Contract violations are reported with t.Errorf.
type Backend struct {
	t    testing.TB
	zxid atomic.Int64
	// Unblock is closed by a test to release every create of a "/block..." path.
	Unblock chan struct{}
	// Blocked counts the creates of "/block..." paths waiting for Unblock now.
	Blocked atomic.Int64

	mu            sync.Mutex
	nextID        encoding.SessionID
	nodes         map[string][]byte
	sessions      map[encoding.SessionID]*sessionState
	connectParams []zetcd.ConnectParams
	connectHook   func(zetcd.ConnectParams) error // may return an error to inject
	connectDelay  time.Duration
}

// sessionState is a session as the fake "etcd" knows it.
type sessionState struct {
	passwd []byte
	ended  bool
	objs   []*Session // every Session returned by Connect for this id, oldest first
}

var _ zetcd.Backend = (*Backend)(nil)

// NewBackend returns an empty fake whose contract violations fail t.
func NewBackend(t testing.TB) *Backend {
	return &Backend{
		t:        t,
		Unblock:  make(chan struct{}),
		nextID:   0x1000,
		nodes:    map[string][]byte{},
		sessions: map[encoding.SessionID]*sessionState{},
	}
}

func password(id encoding.SessionID) []byte {
	p := make([]byte, 16)
	binary.BigEndian.PutUint64(p, uint64(id)^0xB3415C00)
	binary.BigEndian.PutUint64(p[8:], uint64(id)*31)
	return p
}

func (b *Backend) Connect(ctx context.Context, p zetcd.ConnectParams) (zetcd.Session, error) {
	b.mu.Lock()
	b.connectParams = append(b.connectParams, p)
	hook, delay := b.connectHook, b.connectDelay
	b.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if hook != nil {
		if err := hook(p); err != nil {
			return nil, err
		}
	}
	if p.LastZxidSeen > encoding.Zxid(b.zxid.Load()) {
		return nil, zetcd.ErrZxidAhead
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	id := p.SessionID
	st := b.sessions[id]
	if id == 0 {
		b.nextID++
		id = b.nextID
		st = &sessionState{passwd: password(id)}
		b.sessions[id] = st
	} else if st == nil || st.ended || !bytes.Equal(st.passwd, p.Passwd) {
		return nil, zetcd.ErrSessionExpired
	}
	s := &Session{
		b:        b,
		id:       id,
		passwd:   st.passwd,
		timeout:  p.Timeout,
		events:   p.Events,
		Gone:     make(chan struct{}),
		Closed:   make(chan struct{}),
		Expired:  make(chan struct{}),
		Detached: make(chan struct{}),
	}
	st.objs = append(st.objs, s)
	return s, nil
}

// SetConnectHook makes Connect call f first and fail with its error, if any.
func (b *Backend) SetConnectHook(f func(zetcd.ConnectParams) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.connectHook = f
}

// SetConnectDelay makes Connect wait d (or until its context ends) first.
func (b *Backend) SetConnectDelay(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.connectDelay = d
}

// LastConnect returns the parameters of the latest Connect call.
func (b *Backend) LastConnect() zetcd.ConnectParams {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.connectParams[len(b.connectParams)-1]
}

// Sessions returns the Session objects handed out for id, oldest first.
func (b *Backend) Sessions(id encoding.SessionID) []*Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.sessions[id]; st != nil {
		return append([]*Session(nil), st.objs...)
	}
	return nil
}

// Session returns the only Session object handed out for id; it fails the test if there are
// none or several.
func (b *Backend) Session(id encoding.SessionID) *Session {
	b.t.Helper()
	objs := b.Sessions(id)
	if len(objs) != 1 {
		b.t.Fatalf("session %v: %d Session objects, want 1", id, len(objs))
	}
	return objs[0]
}

// Session is one zetcd.Session returned by Backend.Connect. Its exported fields are for tests
// to read (the counters and channels record its life-cycle calls), except Gone, which a test
// closes.
type Session struct {
	b       *Backend
	id      encoding.SessionID
	passwd  []byte
	timeout time.Duration
	events  zetcd.EventSink
	Gone    chan struct{} // closed by a test: the session ended elsewhere (Done)
	// GoneErr, set by a test before it closes Gone, is what Err reports: an error wrapping
	// zetcd.ErrNotServing for a session the backend can no longer vouch for.
	GoneErr error

	inCall    atomic.Int32
	lifecycle atomic.Bool // a life-cycle method has been called

	authMu  sync.Mutex
	authIDs []encoding.ID // what AddAuthIDs added; WhoAmI lists them

	CloseCalls, ExpireCalls, DetachCalls atomic.Int32
	ExpireNoop                           atomic.Bool // Expire found the session resumed since
	// ExpireFailures, set by a test, is how many Expire calls fail next, with an error
	// wrapping zetcd.ErrNotServing (the store out of reach), ending nothing.
	ExpireFailures                    atomic.Int32
	closeOnce, expireOnce, detachOnce sync.Once
	Closed, Expired, Detached         chan struct{}
}

var _ zetcd.Session = (*Session)(nil)

func (s *Session) ID() encoding.SessionID { return s.id }
func (s *Session) Password() []byte       { return s.passwd }
func (s *Session) Timeout() time.Duration { return s.timeout }

func (s *Session) enterLifecycle(what string) {
	if n := s.inCall.Load(); n != 0 {
		s.b.t.Errorf("session %v: %s called while %d Handler call(s) run", s.id, what, n)
	}
	s.lifecycle.Store(true)
}

func (s *Session) Close(ctx context.Context) (encoding.Zxid, error) {
	s.enterLifecycle("Close")
	s.CloseCalls.Add(1)
	s.b.mu.Lock()
	s.b.sessions[s.id].ended = true
	s.b.mu.Unlock()
	s.closeOnce.Do(func() { close(s.Closed) })
	return encoding.Zxid(s.b.zxid.Add(1)), nil
}

func (s *Session) Expire(ctx context.Context) error {
	s.enterLifecycle("Expire")
	s.ExpireCalls.Add(1)
	for n := s.ExpireFailures.Load(); n > 0; n = s.ExpireFailures.Load() {
		if s.ExpireFailures.CompareAndSwap(n, n-1) {
			return fmt.Errorf("session %v: expire: store out of reach: %w", s.id, zetcd.ErrNotServing)
		}
	}
	s.b.mu.Lock()
	st := s.b.sessions[s.id]
	if st.objs[len(st.objs)-1] != s {
		s.ExpireNoop.Store(true) // resumed since: nothing to do
	} else {
		st.ended = true
	}
	s.b.mu.Unlock()
	s.expireOnce.Do(func() { close(s.Expired) })
	return nil
}

// AddAuthIDs records ids; WhoAmI lists them.
func (s *Session) AddAuthIDs(ids []encoding.ID) {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	s.authIDs = append(s.authIDs, ids...)
}

func (s *Session) Detach() {
	s.enterLifecycle("Detach")
	s.DetachCalls.Add(1)
	s.detachOnce.Do(func() { close(s.Detached) })
}

// call brackets every Handler method.
func (s *Session) call() func() {
	s.inCall.Add(1)
	if s.lifecycle.Load() {
		s.b.t.Errorf("session %v: Handler call after a life-cycle call", s.id)
	}
	return func() { s.inCall.Add(-1) }
}

func (s *Session) readZxid() encoding.Zxid { return encoding.Zxid(s.b.zxid.Load()) }

// ReadyToRead is true: the fake answers from memory.
func (s *Session) ReadyToRead() bool { return true }

// LastZxid is the fake's newest zxid.
func (s *Session) LastZxid() encoding.Zxid { return s.readZxid() }

// RefuseWrite consumes a zxid, as a refused write does.
func (s *Session) RefuseWrite(ctx context.Context, op encoding.Op) (encoding.Zxid, error) {
	defer s.call()()
	return encoding.Zxid(s.b.zxid.Add(1)), nil
}

func (s *Session) stat(data []byte) encoding.Stat {
	return encoding.Stat{Czxid: s.readZxid(), Mzxid: s.readZxid(), DataLength: int32(len(data))}
}

func (s *Session) create(ctx context.Context, path string, data []byte) (encoding.Zxid, error) {
	switch {
	case strings.HasPrefix(path, "/block"):
		s.b.Blocked.Add(1)
		select {
		case <-s.b.Unblock:
			s.b.Blocked.Add(-1)
		case <-ctx.Done():
			s.b.Blocked.Add(-1)
			return 0, ctx.Err()
		}
	case path == "/fail":
		return 0, errors.New("fake backend: etcd unreachable")
	case path == "/notserving":
		return 0, fmt.Errorf("fake backend: %w", zetcd.ErrNotServing)
	case path == "/panic":
		panic("fake backend: boom")
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.nodes[path]; ok {
		return encoding.Zxid(s.b.zxid.Add(1)), encoding.ErrNodeExists
	}
	s.b.nodes[path] = data
	return encoding.Zxid(s.b.zxid.Add(1)), nil
}

func (s *Session) Create(ctx context.Context, req *encoding.CreateRequest) (*encoding.CreateResponse, encoding.Zxid, error) {
	defer s.call()()
	if req.Path == "/nilresp" {
		return nil, 0, nil
	}
	zxid, err := s.create(ctx, req.Path, req.Data)
	if err != nil {
		return nil, zxid, err
	}
	return &encoding.CreateResponse{Path: req.Path}, zxid, nil
}

func (s *Session) Create2(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	defer s.call()()
	zxid, err := s.create(ctx, req.Path, req.Data)
	if err != nil {
		return nil, zxid, err
	}
	return &encoding.Create2Response{Path: req.Path, Stat: s.stat(req.Data)}, zxid, nil
}

func (s *Session) Delete(ctx context.Context, req *encoding.DeleteRequest) (encoding.Zxid, error) {
	defer s.call()()
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.nodes[req.Path]; !ok {
		return encoding.Zxid(s.b.zxid.Add(1)), encoding.ErrNoNode
	}
	delete(s.b.nodes, req.Path)
	return encoding.Zxid(s.b.zxid.Add(1)), nil
}

func (s *Session) get(path string) ([]byte, bool) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	d, ok := s.b.nodes[path]
	return d, ok
}

func (s *Session) Exists(ctx context.Context, req *encoding.ExistsRequest) (*encoding.ExistsResponse, encoding.Zxid, error) {
	defer s.call()()
	d, ok := s.get(req.Path)
	if !ok {
		return nil, s.readZxid(), encoding.ErrNoNode
	}
	return &encoding.ExistsResponse{Stat: s.stat(d)}, s.readZxid(), nil
}

func (s *Session) GetData(ctx context.Context, req *encoding.GetDataRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	defer s.call()()
	d, ok := s.get(req.Path)
	if !ok {
		return nil, s.readZxid(), encoding.ErrNoNode
	}
	return &encoding.GetDataResponse{Data: d, Stat: s.stat(d)}, s.readZxid(), nil
}

func (s *Session) SetData(ctx context.Context, req *encoding.SetDataRequest) (*encoding.SetDataResponse, encoding.Zxid, error) {
	defer s.call()()
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.nodes[req.Path]; !ok {
		return nil, encoding.Zxid(s.b.zxid.Add(1)), encoding.ErrNoNode
	}
	s.b.nodes[req.Path] = req.Data
	z := encoding.Zxid(s.b.zxid.Add(1))
	return &encoding.SetDataResponse{Stat: encoding.Stat{Mzxid: z, DataLength: int32(len(req.Data))}}, z, nil
}

func (s *Session) GetACL(ctx context.Context, req *encoding.GetACLRequest) (*encoding.GetACLResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.GetACLResponse{ACL: []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}}, s.readZxid(), nil
}

func (s *Session) SetACL(ctx context.Context, req *encoding.SetACLRequest) (*encoding.SetACLResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.SetACLResponse{}, encoding.Zxid(s.b.zxid.Add(1)), nil
}

func (s *Session) GetChildren(ctx context.Context, req *encoding.GetChildrenRequest) (*encoding.GetChildrenResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.GetChildrenResponse{Children: s.children(req.Path)}, s.readZxid(), nil
}

func (s *Session) GetChildren2(ctx context.Context, req *encoding.GetChildren2Request) (*encoding.GetChildren2Response, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.GetChildren2Response{Children: s.children(req.Path)}, s.readZxid(), nil
}

func (s *Session) children(parent string) []string {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	prefix := strings.TrimSuffix(parent, "/") + "/"
	names := []string{}
	for p := range s.b.nodes {
		if rest, ok := strings.CutPrefix(p, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
			names = append(names, rest)
		}
	}
	return names
}

func (s *Session) Sync(ctx context.Context, req *encoding.SyncRequest) (*encoding.SyncResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.SyncResponse{Path: req.Path}, s.readZxid(), nil
}

// AddWatch emits a NodeCreated event for the path through the connection's zetcd.EventSink before it
// returns, so tests can check that an event a reply depends on is written before the reply.
func (s *Session) AddWatch(ctx context.Context, req *encoding.AddWatchRequest) (encoding.Zxid, error) {
	defer s.call()()
	z := s.readZxid()
	s.events.Event(encoding.WatcherEvent{Type: encoding.EventNodeCreated, State: encoding.StateSyncConnected, Path: req.Path}, z)
	return z, nil
}

// Emit hands ev at zxid to the connection's zetcd.EventSink from the calling goroutine, as a
// store's watch feed does for another session's change.
func (s *Session) Emit(ev encoding.WatcherEvent, zxid encoding.Zxid) { s.events.Event(ev, zxid) }

// The remaining operations are not modelled by the fake: the connection layer only needs to
// route them, which TestServerDispatchTable checks.

func (s *Session) SetWatches(ctx context.Context, req *encoding.SetWatches) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), nil
}

func (s *Session) SetWatches2(ctx context.Context, req *encoding.SetWatches2) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), nil
}

func (s *Session) CheckWatches(ctx context.Context, req *encoding.CheckWatchesRequest) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), encoding.ErrNoWatcher
}

func (s *Session) RemoveWatches(ctx context.Context, req *encoding.RemoveWatchesRequest) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), encoding.ErrNoWatcher
}

func (s *Session) Multi(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.MultiResponse{}, s.readZxid(), nil
}

func (s *Session) MultiRead(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.MultiResponse{}, s.readZxid(), nil
}

func (s *Session) CreateContainer(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	defer s.call()()
	return nil, s.readZxid(), encoding.ErrUnimplemented
}

func (s *Session) CreateTTL(ctx context.Context, req *encoding.CreateTTLRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	defer s.call()()
	return nil, s.readZxid(), encoding.ErrUnimplemented
}

func (s *Session) DeleteContainer(ctx context.Context, req *encoding.DeleteContainerRequest) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), encoding.ErrUnimplemented
}

func (s *Session) GetEphemerals(ctx context.Context, req *encoding.GetEphemeralsRequest) (*encoding.GetEphemeralsResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.GetEphemeralsResponse{Ephemerals: []string{}}, s.readZxid(), nil
}

func (s *Session) GetAllChildrenNumber(ctx context.Context, req *encoding.GetAllChildrenNumberRequest) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.GetAllChildrenNumberResponse{}, s.readZxid(), nil
}

func (s *Session) WhoAmI(ctx context.Context, req *encoding.Empty) (*encoding.WhoAmIResponse, encoding.Zxid, error) {
	defer s.call()()
	s.authMu.Lock()
	defer s.authMu.Unlock()
	infos := []encoding.ClientInfo{}
	for _, id := range s.authIDs {
		infos = append(infos, encoding.ClientInfo{AuthScheme: id.Scheme, User: id.ID})
	}
	return &encoding.WhoAmIResponse{ClientInfo: infos}, s.readZxid(), nil
}

func (s *Session) Reconfig(ctx context.Context, req *encoding.ReconfigRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	defer s.call()()
	return nil, s.readZxid(), encoding.ErrReconfigDisabled
}

func (s *Session) Sasl(ctx context.Context, req *encoding.GetSASLRequest) (*encoding.SetSASLResponse, encoding.Zxid, error) {
	defer s.call()()
	return nil, s.readZxid(), encoding.ErrUnimplemented
}

func (s *Session) Auth(ctx context.Context, req *encoding.AuthPacket) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), nil
}

func (s *Session) Done() <-chan struct{} { return s.Gone }

func (s *Session) Err() error {
	select {
	case <-s.Gone:
		return s.GoneErr
	default:
		return nil
	}
}

func (s *Session) AfterDone(f func()) (stop func() bool) { return zetcd.AfterClose(s.Gone, f) }

// AwaitEvents: the fake hands its events to the sink synchronously, so there is nothing to wait for.
func (s *Session) AwaitEvents(ctx context.Context, zxid encoding.Zxid) error { return nil }
