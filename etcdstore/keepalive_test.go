package etcdstore

import (
	"context"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
)

// TestLeaseKeeper: the keeper refreshes a lease while anyone holds it (two holders, as a session
// resumed on a new connection before its old one is detached) and lets it expire once no one
// does.
func TestLeaseKeeper(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	k := newLeaseKeeper(pb.NewLeaseClient(cli.ActiveConnection()), zaptest.NewLogger(t))
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go k.run(kctx)
	// Refreshed every third of a serving window (1 s here): the remaining TTL stays near 5 s or
	// more; the check only asks that it never runs out, with seconds to spare for a loaded
	// machine.
	const ttl, timeout = 6, 2 * time.Second
	grant, err := cli.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	remaining := func() int64 {
		t.Helper()
		r, err := cli.TimeToLive(ctx, grant.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r.TTL
	}
	k.add(grant.ID, timeout, ttl, time.Now())
	k.add(grant.ID, timeout, ttl, time.Now())
	k.remove(grant.ID) // one holder left
	for end := time.Now().Add(2 * ttl * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if r := remaining(); r < 1 {
			t.Fatalf("lease TTL down to %d s while held (granted %d s)", r, ttl)
		}
	}
	k.remove(grant.ID)
	for deadline := time.Now().Add(3 * ttl * time.Second); remaining() > 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lease still alive %d s after its last holder left (granted %d s)", 3*ttl, ttl)
		}
	}
	k.mu.Lock()
	n := len(k.leases)
	k.mu.Unlock()
	if n != 0 {
		t.Errorf("%d leases still kept", n)
	}
}

// TestLeaseKeeperLapses: a lease whose refreshes reach etcd never lapses; once they stop
// reaching it (cut off: the gate swallows them), the keeper opens its stream again after
// keepAliveStall, and reports the lease lapsed once, after its serving window; when they reach
// etcd again, the lease is confirmed anew.
func TestLeaseKeeperLapses(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	gate := &gatedLeaseClient{LeaseClient: pb.NewLeaseClient(cli.ActiveConnection())}
	k := newLeaseKeeper(gate, zaptest.NewLogger(t))
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lapses := make(chan lapsedLease, 10)
	go k.run(kctx)
	go k.watch(kctx, func(id clientv3.LeaseID, since time.Duration) { lapses <- lapsedLease{id, since} })

	// The window is the orphan end's (a timeout and a keepalive cadence after a refresh) less
	// the timeout and the margin: 4 s, a refresh due every 1.3 s; etcd's expiry is 10 s after
	// a refresh, beyond the test's hold.
	const ttl, timeout = 10, 2 * time.Second
	window := servingWindow(ttl, timeout)
	grant, err := cli.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	k.add(grant.ID, timeout, ttl, time.Now())
	select {
	case l := <-lapses:
		t.Fatalf("lease lapsed (%v unconfirmed) while its refreshes reached etcd", l.since)
	case <-time.After(3 * window):
	}

	held := time.Now()
	gate.hold(true)
	select {
	case l := <-lapses:
		if l.id != grant.ID || l.since <= window {
			t.Errorf("lapse %+v; want lease %x, unconfirmed for more than its window %v", l, grant.ID, window)
		}
		if d := time.Since(held); d > window+2*keepAliveTick {
			t.Errorf("lapse reported %v after the refreshes stopped reaching etcd; want at most its window %v and a tick", d, window)
		}
	case <-time.After(3 * window):
		t.Fatalf("no lapse %v after the refreshes stopped reaching etcd", 3*window)
	}
	for deadline := held.Add(2 * window); gate.streams() < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled keepalive stream was not opened again within %v", 2*window)
		}
	}
	select {
	case l := <-lapses:
		t.Errorf("lapse reported twice: %+v", l)
	case <-time.After(2 * keepAliveTick):
	}

	gate.hold(false)
	deadline := time.Now().Add(3 * window)
	for {
		k.mu.Lock()
		l := k.leases[grant.ID]
		if l == nil {
			k.mu.Unlock()
			t.Fatal("the lease expired in etcd while held")
		}
		confirmed, lapsed := l.confirmed, l.lapsed
		k.mu.Unlock()
		if !lapsed && confirmed.After(held) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease not confirmed again %v after its refreshes reach etcd again", 3*window)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r, err := cli.TimeToLive(ctx, grant.ID); err != nil || r.TTL < ttl-2 {
		t.Errorf("lease after the refreshes came back: TTL %v, %v", r.TTL, err)
	}
}

// gatedLeaseClient passes keepalive streams to etcd, except that while held their refreshes
// are swallowed, as if etcd were out of reach: no refresh, no answer.
type gatedLeaseClient struct {
	pb.LeaseClient
	mu     sync.Mutex
	held   bool
	opened int
}

func (g *gatedLeaseClient) hold(h bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = h
}

func (g *gatedLeaseClient) isHeld() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

func (g *gatedLeaseClient) streams() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opened
}

func (g *gatedLeaseClient) LeaseKeepAlive(ctx context.Context, opts ...grpc.CallOption) (pb.Lease_LeaseKeepAliveClient, error) {
	s, err := g.LeaseClient.LeaseKeepAlive(ctx, opts...)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.opened++
	g.mu.Unlock()
	return &gatedKeepAlive{Lease_LeaseKeepAliveClient: s, g: g}, nil
}

type gatedKeepAlive struct {
	pb.Lease_LeaseKeepAliveClient
	g *gatedLeaseClient
}

func (s *gatedKeepAlive) Send(req *pb.LeaseKeepAliveRequest) error {
	if s.g.isHeld() {
		return nil
	}
	return s.Lease_LeaseKeepAliveClient.Send(req)
}
