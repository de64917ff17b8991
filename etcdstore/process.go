package etcdstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// This process's identity in etcd: its process key, which tells the elected leader it is alive
// (orphans.go), and its taken key, which fails its writes once one of its sessions was taken
// (commit.go, processGuards).

// processRegistration is this process's identity and process key.
type processRegistration struct {
	id   uint64 // random, nonzero; written into the session keys this process owns
	done chan struct{}
	// takenKey and processKey are this process's taken and process keys (keys.go).
	takenKey, processKey string
	// takenRev and takenMod are the CreateRevision and ModRevision of this process's taken key
	// that its write transactions compare (processGuards): set as the key is first put, then
	// by the watch feed as it applies each put of the key (observeTakenKey); takenMod 0 while
	// unknown.
	takenRev, takenMod atomic.Int64
	// processRev is the CreateRevision of this process's process key as its last put left it.
	processRev atomic.Int64
	// recreating is set while a goroutine puts the taken key again after it was deleted.
	recreating atomic.Bool
}

func newProcessID() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id, nil
		}
	}
}

// registerProcess writes this process's key under a lease of processTTL and keeps it alive
// until the backend closes, writing it again under a new lease if etcd ever expires the old
// one. On close it revokes the lease, so that the leader adopts this process's sessions at once.
func (b *Store) registerProcess(ctx context.Context) error {
	id, err := newProcessID()
	if err != nil {
		return fmt.Errorf("zetcd: process id: %w", err)
	}
	b.process = processRegistration{id: id, done: make(chan struct{}), takenKey: b.keys.taken(id), processKey: b.keys.process(id)}
	created, mod, err := b.putTakenKey(ctx)
	if err != nil {
		return err
	}
	b.process.takenRev.Store(created)
	b.process.takenMod.Store(mod)
	lease, err := b.putProcessKey(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer close(b.process.done)
		for {
			ch, err := b.lease.KeepAlive(b.bgCtx, lease)
			if err == nil {
				for range ch {
				}
			}
			if b.bgCtx.Err() != nil {
				break
			}
			b.log.Warn("process key lease lost; registering again", zap.Error(err))
			for b.bgCtx.Err() == nil {
				ctx, cancel := context.WithTimeout(b.bgCtx, 5*time.Second)
				lease, err = b.putProcessKey(ctx)
				cancel()
				if err == nil {
					break
				}
				b.log.Warn("register process key", zap.Error(err))
				select {
				case <-b.bgCtx.Done():
				case <-time.After(time.Second):
				}
			}
			if b.bgCtx.Err() != nil {
				break
			}
		}
		// bgCtx is done: revoke with a context of its own, briefly.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := b.lease.Revoke(ctx, lease); err != nil {
			b.log.Debug("revoke process key lease", zap.Error(err))
		}
	}()
	return nil
}

// putProcessKey puts this process's key on a new lease, and records the key's CreateRevision
// (processGuards).
func (b *Store) putProcessKey(ctx context.Context) (clientv3.LeaseID, error) {
	grant, err := b.lease.Grant(ctx, processTTL)
	if err != nil {
		return 0, fmt.Errorf("zetcd: process key: grant lease: %w", err)
	}
	r, err := b.kv.Put(ctx, b.process.processKey, encodeProcessValue(b.advertise), clientv3.WithLease(grant.ID), clientv3.WithPrevKV())
	if err != nil {
		b.revokeQuietly(grant.ID)
		return 0, fmt.Errorf("zetcd: process key: %w", err)
	}
	created := r.Header.Revision
	if r.PrevKv != nil {
		created = r.PrevKv.CreateRevision
	}
	b.process.processRev.Store(created)
	return grant.ID, nil
}

// putTakenKey puts this process's taken key (keys.go) and returns its CreateRevision and
// ModRevision.
func (b *Store) putTakenKey(ctx context.Context) (created, mod int64, err error) {
	r, err := b.kv.Put(ctx, b.process.takenKey, "", clientv3.WithPrevKV())
	if err != nil {
		return 0, 0, fmt.Errorf("zetcd: taken key: %w", err)
	}
	if r.PrevKv != nil {
		return r.PrevKv.CreateRevision, r.Header.Revision, nil
	}
	return r.Header.Revision, r.Header.Revision, nil
}

// observeProcessKeys asks the leader for an orphan scan when one of evs deletes a process key,
// and follows this process's taken key (observeTakenKey).
func (b *Store) observeProcessKeys(evs []*clientv3.Event) {
	scan := false
	for _, ev := range evs {
		if ev.Type == mvccpb.DELETE {
			if _, ok := b.keys.processOfKey(string(ev.Kv.Key)); ok {
				scan = true
			}
		}
		if id, ok := b.keys.processOfTakenKey(string(ev.Kv.Key)); ok && id == b.process.id {
			b.observeTakenKey(ev.Kv)
		}
	}
	if scan {
		b.orphans.pokeScan()
	}
}

// observeTakenKeyAt does what the watch feed's observeTakenKey does, from etcd's state at rev:
// after a reload of the replica, which skips the events it missed.
func (b *Store) observeTakenKeyAt(ctx context.Context, rev int64) error {
	r, err := b.kv.Get(ctx, b.process.takenKey, clientv3.WithRev(rev))
	if err != nil {
		return err
	}
	var kv *mvccpb.KeyValue
	if len(r.Kvs) > 0 {
		kv = r.Kvs[0]
	}
	b.observeTakenKey(kv)
	return nil
}

// observeTakenKey takes the CreateRevision and ModRevision of this process's taken key from kv,
// as the watch feed (or a reload, resyncWatches) shows it; a kv without one (deleted: the leader collected it
// while this process had no process key) makes this process put it again, which the feed then
// shows. Until then the first transaction of each batch fails on it (the key holds no trace
// of the sessions taken from this process while it was gone), and the batch is checked again
// guarded by its sessions' keys (committer.ownerGuards).
func (b *Store) observeTakenKey(kv *mvccpb.KeyValue) {
	if kv != nil && kv.CreateRevision != 0 {
		b.process.takenRev.Store(kv.CreateRevision)
		b.process.takenMod.Store(kv.ModRevision)
		return
	}
	if !b.process.recreating.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer b.process.recreating.Store(false)
		for b.bgCtx.Err() == nil {
			ctx, cancel := context.WithTimeout(b.bgCtx, 5*time.Second)
			_, _, err := b.putTakenKey(ctx)
			cancel()
			if err == nil {
				return
			}
			b.log.Warn("put the taken key again", zap.Error(err))
			select {
			case <-b.bgCtx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}
