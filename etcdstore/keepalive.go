package etcdstore

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The leases of this process's sessions are kept alive by one leaseKeeper: one gRPC keepalive
// stream and two goroutines for the whole process, where the etcd client's Lease.KeepAlive
// costs two goroutines and a channel per lease (a third of a session's memory). The cadence is
// the etcd client's, which leaseTTL and orphanEndTTL count on: a lease is refreshed TTL/3 after
// its last refresh was answered, by a send loop that ticks every keepAliveTick.

// keepAliveTick is how often the keeper looks for leases due for a refresh.
const keepAliveTick = 500 * time.Millisecond

// leaseKeeper refreshes registered leases until they are removed or etcd reports them gone.
type leaseKeeper struct {
	client pb.LeaseClient
	log    *zap.Logger

	mu     sync.Mutex
	leases map[clientv3.LeaseID]*keptLease // guarded by mu
}

// keptLease is one lease the keeper refreshes.
type keptLease struct {
	next time.Time // when it is due
	// refs counts the sessions that asked for it: a session resumed on a new connection of this
	// process has two until the old one is detached.
	refs int
}

func newLeaseKeeper(client pb.LeaseClient, log *zap.Logger) *leaseKeeper {
	return &leaseKeeper{client: client, log: log, leases: map[clientv3.LeaseID]*keptLease{}}
}

// add starts refreshing id now, for one more holder.
func (k *leaseKeeper) add(id clientv3.LeaseID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.leases[id]
	if l == nil {
		l = &keptLease{}
		k.leases[id] = l
	}
	l.refs++
}

// remove drops one holder of id; the lease is no longer refreshed once it has none.
func (k *leaseKeeper) remove(id clientv3.LeaseID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.leases[id]; l != nil {
		if l.refs--; l.refs <= 0 {
			delete(k.leases, id)
		}
	}
}

// due returns the leases due for a refresh at now, and marks them not due again before their
// answer comes (or a tick from now, if it never does).
func (k *leaseKeeper) due(now time.Time) []clientv3.LeaseID {
	k.mu.Lock()
	defer k.mu.Unlock()
	var ids []clientv3.LeaseID
	for id, l := range k.leases {
		if !l.next.After(now) {
			ids = append(ids, id)
			l.next = now.Add(keepAliveTick)
		}
	}
	return ids
}

// answered records etcd's answer for a lease: refreshed for ttl seconds (next refresh at a third
// of it), or gone (ttl <= 0: nothing to refresh any more).
func (k *leaseKeeper) answered(id clientv3.LeaseID, ttl int64, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.leases[id]
	if l == nil {
		return
	}
	if ttl <= 0 {
		delete(k.leases, id)
		return
	}
	l.next = now.Add(time.Duration(ttl) * time.Second / 3)
}

// run keeps a keepalive stream open until ctx ends, reopening it after an error (a member that
// lost its leader, or went away: WithRequireLeader makes the balancer try another).
func (k *leaseKeeper) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := k.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		k.log.Debug("session keepalive stream ended; reopening", zap.Error(err))
		select {
		case <-ctx.Done():
		case <-time.After(keepAliveTick):
		}
	}
}

// stream sends the due refreshes over one stream and reads its answers, until either fails.
func (k *leaseKeeper) stream(ctx context.Context) error {
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	s, err := k.client.LeaseKeepAlive(sctx)
	if err != nil {
		return err
	}
	recvDone := make(chan error, 1)
	go func() {
		for {
			resp, err := s.Recv()
			if err != nil {
				recvDone <- err
				return
			}
			k.answered(clientv3.LeaseID(resp.ID), resp.TTL, time.Now())
		}
	}()
	t := time.NewTicker(keepAliveTick)
	defer t.Stop()
	for {
		for _, id := range k.due(time.Now()) {
			if err := s.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
				cancel()
				<-recvDone
				return err
			}
		}
		select {
		case err := <-recvDone:
			return err
		case <-t.C:
		case <-sctx.Done():
			<-recvDone
			return errors.New("keepalive stream cancelled")
		}
	}
}
