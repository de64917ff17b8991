package etcdstore

import (
	"context"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Sequential creates under one parent must be serialized: the name of each is the parent's
// create counter C before it (PROTOCOL.md §4.3), guarded at commit by the child-create key's
// Version. Left to race in etcd, n concurrent creates under one parent cost O(n²) failed
// transactions, every one a raft proposal. Instead this process serializes its own sequential
// creates per parent and caches the parent's counter between them (taken first from the
// replica, which may not have applied the create just committed), so that a sequential create
// is one etcd round trip (the guarded commit) and only a create from elsewhere (another zetcd,
// or a non-sequential create here) makes the cached counter stale; the commit's compares catch
// that, its Else branch reads the current counter, and the create retries with it.

// maxIdleSeqCounters bounds the counters kept for parents with no create in flight.
const maxIdleSeqCounters = 4096

// seqCounters holds one seqCounter per parent with sequential creates. mu protects m and every
// seqCounter's refs.
type seqCounters struct {
	mu sync.Mutex
	m  map[string]*seqCounter
}

// seqCounter serializes the sequential creates under one parent and caches its create counter.
type seqCounter struct {
	// lock (capacity 1) is held by the sequential create in flight under the parent; the
	// fields below belong to its holder.
	lock chan struct{}
	refs int // holders and waiters, under seqCounters.mu

	known      bool  // the fields below reflect etcd as last seen
	createsVer int64 // the parent's child-create key Version (0: absent)
	offsetsRev int64 // the parent's offsets key ModRevision (0: absent)
	offsetsC   int64 // its Creates correction
}

// acquire takes the parent's counter, waiting for the create in flight under it.
func (sc *seqCounters) acquire(ctx context.Context, parent string) (*seqCounter, error) {
	sc.mu.Lock()
	if sc.m == nil {
		sc.m = map[string]*seqCounter{}
	}
	c := sc.m[parent]
	if c == nil {
		if len(sc.m) >= maxIdleSeqCounters {
			for p, idle := range sc.m {
				if idle.refs == 0 {
					delete(sc.m, p)
				}
			}
		}
		c = &seqCounter{lock: make(chan struct{}, 1)}
		sc.m[parent] = c
	}
	c.refs++
	sc.mu.Unlock()
	select {
	case c.lock <- struct{}{}:
		return c, nil
	case <-ctx.Done():
		sc.mu.Lock()
		c.refs--
		sc.mu.Unlock()
		return nil, ctx.Err()
	}
}

// release gives the counter back; it stays cached for the next create under the parent.
func (sc *seqCounters) release(c *seqCounter) {
	<-c.lock
	sc.mu.Lock()
	c.refs--
	sc.mu.Unlock()
}

// counter is the create counter C: the next sequence number.
func (c *seqCounter) counter() int64 { return c.createsVer + c.offsetsC }

// compares guard the cached counter at commit.
func (c *seqCounter) compares(k keySchema, parent string) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Version(k.childCreates(parent)), "=", c.createsVer),
		clientv3.Compare(clientv3.ModRevision(k.offsets(parent)), "=", c.offsetsRev),
	}
}

// readOps read what update needs: the child-create and offsets keys of the parent.
func (c *seqCounter) readOps(k keySchema, parent string) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpGet(k.childCreates(parent), clientv3.WithKeysOnly()),
		clientv3.OpGet(k.offsets(parent)),
	}
}

// update caches the counter from the keys readOps read; it reports whether it changed.
func (c *seqCounter) update(creates, offsets *mvccpb.KeyValue) (bool, error) {
	wasKnown, wasVer, wasRev := c.known, c.createsVer, c.offsetsRev
	var o offsetsValue
	if offsets != nil {
		var err error
		if o, err = decodeOffsetsValue(offsets.Value); err != nil {
			c.known = false
			return false, err
		}
	}
	c.set(kvVersion(creates), kvModRev(offsets), o.Creates)
	return !wasKnown || wasVer != c.createsVer || wasRev != c.offsetsRev, nil
}

// set caches the counter from the child-create key's Version and the offsets key's
// ModRevision and Creates correction (0 for absent keys).
func (c *seqCounter) set(createsVer, offsetsRev, offsetsC int64) {
	c.known = true
	c.createsVer, c.offsetsRev, c.offsetsC = createsVer, offsetsRev, offsetsC
}

// committed records a successful create under the parent: its child-create key was put.
func (c *seqCounter) committed() { c.createsVer++ }

// forget drops the cached counter (the parent was found missing).
func (c *seqCounter) forget() { c.known = false }
