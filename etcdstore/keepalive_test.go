package etcdstore

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"go.uber.org/zap/zaptest"
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
	// Refreshed every TTL/3 (2 s) plus a tick: the remaining TTL stays near 3.5 s or more; the
	// check only asks that it never runs out, with seconds to spare for a loaded machine.
	const ttl = 6
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
	k.add(grant.ID)
	k.add(grant.ID)
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
