package etcdstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// Orphaned sessions. The zetcd serving a session keeps its lease alive and, when the client goes
// silent for its timeout, ends it itself in one transaction that also moves the parents' pzxid
// (endSession). If that zetcd dies and the client does not resume elsewhere, nobody does: etcd
// expires the lease later and deletes the ephemerals with it, but leaves their parents' pzxid
// behind, so a reconnecting client's setWatches catch-up would miss the NodeChildrenChanged.
// Instead, the elected leader (the reaper, reaper.go) adopts such sessions and ends them
// exactly as their own zetcd would have, before etcd's expiry (leaseTTL).
//
// Every process writes a process key (keys.go) under a short lease of its own, and names
// itself in the session keys it writes. A session whose named process has no process key is an
// orphan. The leader looks for orphans when it is elected, when the watch feed sees a process
// key deleted, and every orphanScanInterval. Whether an orphan is due is decided by its lease
// alone (watchOrphan, orphanEndTTL): it is ended once no keepalive came for its timeout plus
// the keepalive cadence, so never before its timeout has passed since its client was last
// heard by its process, whenever that process stopped. A process that is in fact alive (its
// process key lost to an etcd stall, say) keeps its sessions' leases refreshed, and the leader
// never ends them; a stall shorter than the timeout cannot age a lease that far. An orphan
// resumed elsewhere has a rewritten session key, which ends the adoption (and guards
// endSession). The formulas of these timings are timing.go.

const (
	// orphanScanInterval is the leader's periodic scan, behind the scans the watch feed
	// triggers; it bounds the delay when a trigger was missed (a leader change in between).
	orphanScanInterval = 10 * time.Second
	// orphanScanPage is how many session keys one scan request reads.
	orphanScanPage = 1000
)

// orphanAdoptions is the leader's set of adopted sessions, by id, with the session key
// ModRevision each adoption holds. mu guards m.
type orphanAdoptions struct {
	mu sync.Mutex
	m  map[encoding.SessionID]int64
	// scan asks the leader for an orphan scan (pokeScan): the watch feed pokes it when a process
	// key is deleted, an adoption as it ends.
	scan chan struct{}
}

// pokeScan asks for an orphan scan, never blocking: one already asked for will do.
func (o *orphanAdoptions) pokeScan() {
	select {
	case o.scan <- struct{}{}:
	default:
	}
}

// leadOrphans runs the leader's orphan scans until ctx ends (leadership lost or backend closed);
// the adoptions it started end with ctx too.
func (b *Store) leadOrphans(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(orphanScanInterval)
	defer t.Stop()
	for {
		if err := b.scanOrphans(ctx, &wg); err != nil && ctx.Err() == nil {
			b.log.Warn("orphaned sessions: scan failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.orphans.scan:
		}
	}
}

// scanOrphans adopts every session whose owning process has no process key.
func (b *Store) scanOrphans(ctx context.Context, wg *sync.WaitGroup) error {
	ctx = zetcd.WithOpLabel(ctx, zetcd.OpLabelOther)
	procs, err := b.kv.Get(ctx, b.keys.processKeysPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	live := map[uint64]bool{}
	for _, kv := range procs.Kvs {
		if id, ok := b.keys.processOfKey(string(kv.Key)); ok {
			live[id] = true
		}
	}
	// Sessions read after the process keys: a session taken over since by a live process names
	// it, and one whose process died since is found by the scan its deletion triggers.
	owners := map[uint64]bool{}
	from := b.keys.sessionKeysPrefix()
	end := clientv3.GetPrefixRangeEnd(from)
	for {
		r, err := b.kv.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(orphanScanPage))
		if err != nil {
			return err
		}
		for _, kv := range r.Kvs {
			id, ok := b.keys.sessionOfKey(string(kv.Key))
			if !ok {
				continue
			}
			sv, err := decodeSessionValue(kv.Value)
			if err != nil {
				b.log.Error("orphaned sessions: undecodable session key", zap.String("session", id.String()), zap.Error(err))
				continue
			}
			owners[sv.owner] = true
			if !live[sv.owner] {
				b.adoptOrphan(ctx, wg, id, kv.ModRevision, sv.owner)
			}
		}
		if !r.More || len(r.Kvs) == 0 {
			return b.collectTakenKeys(ctx, live, owners)
		}
		from = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
}

// collectTakenKeys deletes the taken keys (keys.go) of the processes that are neither live nor
// own a session, each only while the process has no process key: a process that is in fact
// alive and writes again finds its key gone and puts it again (observeTakenKey).
func (b *Store) collectTakenKeys(ctx context.Context, live, owners map[uint64]bool) error {
	r, err := b.kv.Get(ctx, b.keys.takenKeysPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	for _, kv := range r.Kvs {
		id, ok := b.keys.processOfTakenKey(string(kv.Key))
		if !ok || live[id] || owners[id] {
			continue
		}
		_, err := b.kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(b.keys.process(id)), "=", 0)).
			Then(clientv3.OpDelete(b.keys.taken(id))).Commit()
		if err != nil {
			return err
		}
	}
	return nil
}

// adoptOrphan starts watching session id, taken at session key ModRevision ownerRev, unless an
// adoption of that same ownership is running.
func (b *Store) adoptOrphan(ctx context.Context, wg *sync.WaitGroup, id encoding.SessionID, ownerRev int64, owner uint64) {
	o := &b.orphans
	o.mu.Lock()
	if rev, ok := o.m[id]; ok && rev == ownerRev {
		o.mu.Unlock()
		return
	}
	o.m[id] = ownerRev
	o.mu.Unlock()
	b.log.Info("adopting orphaned session", zap.String("session", id.String()), zap.String("process", fmt.Sprintf("%016x", owner)))
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			o.mu.Lock()
			if o.m[id] == ownerRev {
				delete(o.m, id)
			}
			o.mu.Unlock()
		}()
		b.watchOrphan(ctx, id, ownerRev, owner)
		o.pokeScan() // collects owner's taken key if this was its last session
	}()
}

// watchOrphan ends an adopted session once its lease shows that no keepalive came for the
// session's timeout plus the keepalive cadence (orphanEndTTL): the client's last packet to its
// process is then older than its timeout, wherever the process went. A lease that is refreshed
// (its process alive after all) never gets there. It returns early when the session was resumed
// (its key rewritten) or ended, expired in etcd, its owner has a process key again, or ctx ends.
func (b *Store) watchOrphan(ctx context.Context, id encoding.SessionID, ownerRev int64, owner uint64) {
	log := b.log.With(zap.String("session", id.String()))
	for {
		o, err := b.readOrphan(ctx, id, ownerRev, owner)
		wait := time.Second
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			log.Warn("orphaned session: read lease", zap.Error(err))
		case o.gone:
			return
		case o.ttl > orphanEndTTL(o.granted, o.timeout):
			wait = time.Duration(o.ttl-orphanEndTTL(o.granted, o.timeout)) * time.Second
		default:
			zxid, owned, err := b.endSession(zetcd.WithOpLabel(ctx, zetcd.OpLabelExpire), id, ownerRev, owner)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("orphaned session: expire", zap.Error(err))
			case err == nil && owned:
				log.Info("expired orphaned session", zap.Int64("zxid", int64(zxid)))
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// orphan is what watchOrphan reads of an adopted session.
type orphan struct {
	gone         bool          // ended, resumed by a connection somewhere, expired in etcd, or its owner back
	ttl, granted int64         // the lease's remaining and granted TTL, whole seconds
	timeout      time.Duration // the session's negotiated timeout
}

// readOrphan reads the lease of session id, its session key, held at ownerRev, and the process
// key of its owner: an owner that has one again (it was alive, its key lost to an etcd stall)
// ends its sessions itself, and the adoption ends (the scan adopts the session again if that
// key goes again).
func (b *Store) readOrphan(ctx context.Context, id encoding.SessionID, ownerRev int64, owner uint64) (orphan, error) {
	ttl, err := b.lease.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return orphan{}, err
	}
	if ttl.TTL <= 0 {
		return orphan{gone: true}, nil // expired in etcd (or revoked) already
	}
	r, err := b.kv.Txn(ctx).Then(clientv3.OpGet(b.keys.session(id)), clientv3.OpGet(b.keys.process(owner), clientv3.WithCountOnly())).Commit()
	if err != nil {
		return orphan{}, err
	}
	sk, pk := r.Responses[0].GetResponseRange(), r.Responses[1].GetResponseRange()
	if len(sk.Kvs) == 0 || sk.Kvs[0].ModRevision != ownerRev || pk.Count > 0 {
		return orphan{gone: true}, nil
	}
	sv, err := decodeSessionValue(sk.Kvs[0].Value)
	if err != nil {
		return orphan{}, err
	}
	return orphan{ttl: ttl.TTL, granted: ttl.GrantedTTL, timeout: time.Duration(sv.timeoutMs) * time.Millisecond}, nil
}
