package zetcd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// fakeBackend is an in-memory Backend for testing the connection layer only: a flat map of
// paths to data, sessions that can be resumed with their password, and hooks to block, fail or
// panic on demand. It checks the Session contract the server must keep: no life-cycle call
// while a Handler call of the same Session runs, and no Handler call after a life-cycle call.
//
// Special create paths: "/block..." waits until unblock is closed (or ctx ends); "/fail"
// returns a non-ErrCode error; "/panic" panics; "/nilresp" returns no response and no error.
type fakeBackend struct {
	t       *testing.T
	zxid    atomic.Int64
	unblock chan struct{}

	mu            sync.Mutex
	nextID        encoding.SessionID
	nodes         map[string][]byte
	sessions      map[encoding.SessionID]*fakeSessionState
	connectParams []ConnectParams
	connectHook   func(ConnectParams) error // may return an error to inject
	connectDelay  time.Duration
}

// fakeSessionState is a session as the fake "etcd" knows it.
type fakeSessionState struct {
	passwd []byte
	ended  bool
	objs   []*fakeSession // every Session returned by Connect for this id, oldest first
}

var _ Backend = (*fakeBackend)(nil)

func newFakeBackend(t *testing.T) *fakeBackend {
	return &fakeBackend{
		t:        t,
		unblock:  make(chan struct{}),
		nextID:   0x1000,
		nodes:    map[string][]byte{},
		sessions: map[encoding.SessionID]*fakeSessionState{},
	}
}

func fakePassword(id encoding.SessionID) []byte {
	p := make([]byte, 16)
	binary.BigEndian.PutUint64(p, uint64(id)^0xB3415C00)
	binary.BigEndian.PutUint64(p[8:], uint64(id)*31)
	return p
}

func (b *fakeBackend) Connect(ctx context.Context, p ConnectParams) (Session, error) {
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
		return nil, ErrZxidAhead
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	id := p.SessionID
	st := b.sessions[id]
	if id == 0 {
		b.nextID++
		id = b.nextID
		st = &fakeSessionState{passwd: fakePassword(id)}
		b.sessions[id] = st
	} else if st == nil || st.ended || !bytes.Equal(st.passwd, p.Passwd) {
		return nil, ErrSessionExpired
	}
	s := &fakeSession{
		b:        b,
		id:       id,
		passwd:   st.passwd,
		timeout:  p.Timeout,
		events:   p.Events,
		gone:     make(chan struct{}),
		closed:   make(chan struct{}),
		expired:  make(chan struct{}),
		detached: make(chan struct{}),
	}
	st.objs = append(st.objs, s)
	return s, nil
}

func (b *fakeBackend) lastConnect() ConnectParams {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.connectParams[len(b.connectParams)-1]
}

// objs returns the Session objects handed out for id, oldest first.
func (b *fakeBackend) objs(id encoding.SessionID) []*fakeSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.sessions[id]; st != nil {
		return append([]*fakeSession(nil), st.objs...)
	}
	return nil
}

// obj returns the only Session object handed out for id.
func (b *fakeBackend) obj(id encoding.SessionID) *fakeSession {
	b.t.Helper()
	objs := b.objs(id)
	if len(objs) != 1 {
		b.t.Fatalf("session %v: %d Session objects, want 1", id, len(objs))
	}
	return objs[0]
}

// fakeSession is one Session object returned by fakeBackend.Connect.
type fakeSession struct {
	b       *fakeBackend
	id      encoding.SessionID
	passwd  []byte
	timeout time.Duration
	events  EventSink
	gone    chan struct{} // closed by a test: the session ended elsewhere (Done)

	inCall    atomic.Int32
	lifecycle atomic.Bool // a life-cycle method has been called

	closeCalls, expireCalls, detachCalls atomic.Int32
	expireNoop                           atomic.Bool // Expire found the session resumed since
	closeOnce, expireOnce, detachOnce    sync.Once
	closed, expired, detached            chan struct{}
}

var _ Session = (*fakeSession)(nil)

func (s *fakeSession) ID() encoding.SessionID { return s.id }
func (s *fakeSession) Password() []byte       { return s.passwd }
func (s *fakeSession) Timeout() time.Duration { return s.timeout }

func (s *fakeSession) enterLifecycle(what string) {
	if n := s.inCall.Load(); n != 0 {
		s.b.t.Errorf("session %v: %s called while %d Handler call(s) run", s.id, what, n)
	}
	s.lifecycle.Store(true)
}

func (s *fakeSession) Close(ctx context.Context) (encoding.Zxid, error) {
	s.enterLifecycle("Close")
	s.closeCalls.Add(1)
	s.b.mu.Lock()
	s.b.sessions[s.id].ended = true
	s.b.mu.Unlock()
	s.closeOnce.Do(func() { close(s.closed) })
	return encoding.Zxid(s.b.zxid.Add(1)), nil
}

func (s *fakeSession) Expire(ctx context.Context) error {
	s.enterLifecycle("Expire")
	s.expireCalls.Add(1)
	s.b.mu.Lock()
	st := s.b.sessions[s.id]
	if st.objs[len(st.objs)-1] != s {
		s.expireNoop.Store(true) // resumed since: nothing to do
	} else {
		st.ended = true
	}
	s.b.mu.Unlock()
	s.expireOnce.Do(func() { close(s.expired) })
	return nil
}

func (s *fakeSession) Detach() {
	s.enterLifecycle("Detach")
	s.detachCalls.Add(1)
	s.detachOnce.Do(func() { close(s.detached) })
}

// call brackets every Handler method.
func (s *fakeSession) call() func() {
	s.inCall.Add(1)
	if s.lifecycle.Load() {
		s.b.t.Errorf("session %v: Handler call after a life-cycle call", s.id)
	}
	return func() { s.inCall.Add(-1) }
}

func (s *fakeSession) readZxid() encoding.Zxid { return encoding.Zxid(s.b.zxid.Load()) }

func (s *fakeSession) stat(data []byte) encoding.Stat {
	return encoding.Stat{Czxid: s.readZxid(), Mzxid: s.readZxid(), DataLength: int32(len(data))}
}

func (s *fakeSession) create(ctx context.Context, path string, data []byte) (encoding.Zxid, error) {
	switch {
	case strings.HasPrefix(path, "/block"):
		select {
		case <-s.b.unblock:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	case path == "/fail":
		return 0, errors.New("fake backend: etcd unreachable")
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

func (s *fakeSession) Create(ctx context.Context, req *encoding.CreateRequest) (*encoding.CreateResponse, encoding.Zxid, error) {
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

func (s *fakeSession) Create2(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	defer s.call()()
	zxid, err := s.create(ctx, req.Path, req.Data)
	if err != nil {
		return nil, zxid, err
	}
	return &encoding.Create2Response{Path: req.Path, Stat: s.stat(req.Data)}, zxid, nil
}

func (s *fakeSession) Delete(ctx context.Context, req *encoding.DeleteRequest) (encoding.Zxid, error) {
	defer s.call()()
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.nodes[req.Path]; !ok {
		return encoding.Zxid(s.b.zxid.Add(1)), encoding.ErrNoNode
	}
	delete(s.b.nodes, req.Path)
	return encoding.Zxid(s.b.zxid.Add(1)), nil
}

func (s *fakeSession) get(path string) ([]byte, bool) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	d, ok := s.b.nodes[path]
	return d, ok
}

func (s *fakeSession) Exists(ctx context.Context, req *encoding.ExistsRequest) (*encoding.ExistsResponse, encoding.Zxid, error) {
	defer s.call()()
	d, ok := s.get(req.Path)
	if !ok {
		return nil, s.readZxid(), encoding.ErrNoNode
	}
	return &encoding.ExistsResponse{Stat: s.stat(d)}, s.readZxid(), nil
}

func (s *fakeSession) GetData(ctx context.Context, req *encoding.GetDataRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	defer s.call()()
	d, ok := s.get(req.Path)
	if !ok {
		return nil, s.readZxid(), encoding.ErrNoNode
	}
	return &encoding.GetDataResponse{Data: d, Stat: s.stat(d)}, s.readZxid(), nil
}

func (s *fakeSession) SetData(ctx context.Context, req *encoding.SetDataRequest) (*encoding.SetDataResponse, encoding.Zxid, error) {
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

func (s *fakeSession) GetACL(ctx context.Context, req *encoding.GetACLRequest) (*encoding.GetACLResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.GetACLResponse{ACL: []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}}, s.readZxid(), nil
}

func (s *fakeSession) SetACL(ctx context.Context, req *encoding.SetACLRequest) (*encoding.SetACLResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.SetACLResponse{}, encoding.Zxid(s.b.zxid.Add(1)), nil
}

func (s *fakeSession) GetChildren(ctx context.Context, req *encoding.GetChildrenRequest) (*encoding.GetChildrenResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.GetChildrenResponse{Children: s.children(req.Path)}, s.readZxid(), nil
}

func (s *fakeSession) GetChildren2(ctx context.Context, req *encoding.GetChildren2Request) (*encoding.GetChildren2Response, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.GetChildren2Response{Children: s.children(req.Path)}, s.readZxid(), nil
}

func (s *fakeSession) children(parent string) []string {
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

func (s *fakeSession) Sync(ctx context.Context, req *encoding.SyncRequest) (*encoding.SyncResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.SyncResponse{Path: req.Path}, s.readZxid(), nil
}

// AddWatch emits a NodeCreated event for the path through the connection's EventSink before it
// returns, so tests can check that an event a reply depends on is written before the reply.
func (s *fakeSession) AddWatch(ctx context.Context, req *encoding.AddWatchRequest) (encoding.Zxid, error) {
	defer s.call()()
	z := s.readZxid()
	s.events.Event(encoding.WatcherEvent{Type: encoding.EventNodeCreated, State: encoding.StateSyncConnected, Path: req.Path}, z)
	return z, nil
}

// The remaining operations are not modelled by the fake: the connection layer only needs to
// route them, which TestServerDispatchTable checks.

func (s *fakeSession) SetWatches(ctx context.Context, req *encoding.SetWatches) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), nil
}

func (s *fakeSession) SetWatches2(ctx context.Context, req *encoding.SetWatches2) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), nil
}

func (s *fakeSession) CheckWatches(ctx context.Context, req *encoding.CheckWatchesRequest) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), encoding.ErrNoWatcher
}

func (s *fakeSession) RemoveWatches(ctx context.Context, req *encoding.RemoveWatchesRequest) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), encoding.ErrNoWatcher
}

func (s *fakeSession) Multi(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.MultiResponse{}, s.readZxid(), nil
}

func (s *fakeSession) MultiRead(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.MultiResponse{}, s.readZxid(), nil
}

func (s *fakeSession) CreateContainer(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	defer s.call()()
	return nil, s.readZxid(), encoding.ErrUnimplemented
}

func (s *fakeSession) CreateTTL(ctx context.Context, req *encoding.CreateTTLRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	defer s.call()()
	return nil, s.readZxid(), encoding.ErrUnimplemented
}

func (s *fakeSession) DeleteContainer(ctx context.Context, req *encoding.DeleteContainerRequest) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), encoding.ErrUnimplemented
}

func (s *fakeSession) GetEphemerals(ctx context.Context, req *encoding.GetEphemeralsRequest) (*encoding.GetEphemeralsResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.GetEphemeralsResponse{Ephemerals: []string{}}, s.readZxid(), nil
}

func (s *fakeSession) GetAllChildrenNumber(ctx context.Context, req *encoding.GetAllChildrenNumberRequest) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.GetAllChildrenNumberResponse{}, s.readZxid(), nil
}

func (s *fakeSession) WhoAmI(ctx context.Context, req *encoding.Empty) (*encoding.WhoAmIResponse, encoding.Zxid, error) {
	defer s.call()()
	return &encoding.WhoAmIResponse{ClientInfo: []encoding.ClientInfo{}}, s.readZxid(), nil
}

func (s *fakeSession) Reconfig(ctx context.Context, req *encoding.ReconfigRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	defer s.call()()
	return nil, s.readZxid(), encoding.ErrReconfigDisabled
}

func (s *fakeSession) Sasl(ctx context.Context, req *encoding.GetSASLRequest) (*encoding.SetSASLResponse, encoding.Zxid, error) {
	defer s.call()()
	return nil, s.readZxid(), encoding.ErrUnimplemented
}

func (s *fakeSession) Auth(ctx context.Context, req *encoding.AuthPacket) (encoding.Zxid, error) {
	defer s.call()()
	return s.readZxid(), nil
}

func (s *fakeSession) Done() <-chan struct{} { return s.gone }

// AwaitEvents: the fake hands its events to the sink synchronously, so there is nothing to wait for.
func (s *fakeSession) AwaitEvents(ctx context.Context, zxid encoding.Zxid) error { return nil }
