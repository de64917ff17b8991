package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/internal/znode"
)

// The reaper deletes containers and TTL nodes as ZooKeeper's ContainerManager does: a container
// with no children whose create counter is above 0 (it once had a child), and a TTL node with
// no children whose mtime is older than its TTL. Exactly one zetcd process per etcd cluster and
// prefix reaps: the one elected through client/v3/concurrency under the prefix. Every interval
// it lists the reap index keys (one per container and TTL node, keys.go), reads the candidates
// from the replica, and deletes each one that qualifies with a guarded Txn (still no children,
// data key unchanged since read), so a concurrent create of a child or setData wins. Each
// deletion is one revision, like the deleteContainer txn ZooKeeper's leader logs. The elected
// process also ends orphaned sessions (orphans.go) and keeps /zookeeper/config (ensemble.go).

const (
	// DefaultReapInterval is ZooKeeper's znode.container.checkIntervalMs.
	DefaultReapInterval = 60 * time.Second
	// reaperSessionTTL is the lease TTL (seconds) of the reaper's election session: how long a
	// dead leader keeps the role from the others. As short as a process key's, so that a new
	// leader adopts the dead leader's orphaned sessions before etcd expires them.
	reaperSessionTTL = processTTL
	// reapBatch is how many index keys one range lists.
	reapBatch = 40
	// maxReapsPerPass is ZooKeeper's znode.container.maxPerMinute, per pass.
	maxReapsPerPass = 10000
)

// reaper is the backend's reaping state.
type reaper struct {
	leader atomic.Bool  // this process holds the reaper election
	reaped atomic.Int64 // nodes this process has deleted
	done   chan struct{}
}

// startReaper runs the reaper in the background until the backend is closed. Its first
// candidacy is registered before it returns, so that the election's one write happens while the
// backend starts rather than at some moment later.
func (b *Store) startReaper(ctx context.Context, cli *clientv3.Client, interval time.Duration) {
	b.reaper.done = make(chan struct{})
	cand, err := b.newReaperCandidate(ctx, cli)
	if err != nil {
		b.log.Warn("reaper: first candidacy", zap.Error(err))
	}
	go func() {
		defer close(b.reaper.done)
		for b.bgCtx.Err() == nil {
			if cand == nil {
				ctx, cancel := context.WithTimeout(b.bgCtx, 10*time.Second)
				cand, err = b.newReaperCandidate(ctx, cli)
				cancel()
			}
			if cand != nil {
				err = b.leadReaper(cand, interval)
				cand = nil
			}
			if err != nil && b.bgCtx.Err() == nil {
				b.log.Warn("reaper election", zap.Error(err))
				select {
				case <-b.bgCtx.Done():
				case <-time.After(time.Second):
				}
			}
		}
	}()
}

// stopReaper waits for the reaper to give up its role (Close cancels bgCtx first).
func (b *Store) stopReaper() {
	if b.reaper.done != nil {
		<-b.reaper.done
	}
}

// reaperCandidate is one candidacy in the reaper election: an election session whose key is
// already written, so that Campaign only waits.
type reaperCandidate struct {
	cli    *clientv3.Client
	sess   *concurrency.Session
	cancel context.CancelFunc // ends the session's keepalive
	val    string
}

// newReaperCandidate grants the election session and writes its candidate key exactly as
// concurrency.Election.Campaign would (Campaign then finds it and writes nothing).
func (b *Store) newReaperCandidate(ctx context.Context, cli *clientv3.Client) (*reaperCandidate, error) {
	// The session outlives bgCtx just long enough to revoke its lease on the way out, so that
	// another process takes over at once rather than after the lease TTL.
	sctx, cancel := context.WithCancel(context.Background())
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(reaperSessionTTL), concurrency.WithContext(sctx))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("session: %w", err)
	}
	c := &reaperCandidate{cli: cli, sess: sess, cancel: cancel, val: fmt.Sprintf("%x", sess.Lease())}
	k := b.keys.reaperElection() + "/" + c.val
	_, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, c.val, clientv3.WithLease(sess.Lease()))).Commit()
	if err != nil {
		c.close(b)
		return nil, fmt.Errorf("candidate key: %w", err)
	}
	return c, nil
}

// close revokes the candidacy's lease, which deletes its election key.
func (c *reaperCandidate) close(b *Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := c.cli.Revoke(ctx, c.sess.Lease()); err != nil {
		b.log.Debug("reaper: revoke election lease", zap.Error(err))
	}
	c.sess.Orphan()
	c.cancel()
}

// leadReaper waits to be elected and then reaps every interval until the election session ends
// or the backend closes.
func (b *Store) leadReaper(c *reaperCandidate, interval time.Duration) error {
	defer c.close(b)
	e := concurrency.NewElection(c.sess, b.keys.reaperElection())
	if err := e.Campaign(b.bgCtx, c.val); err != nil {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return fmt.Errorf("campaign: %w", err)
	}
	b.reaper.leader.Store(true)
	defer b.reaper.leader.Store(false)
	b.log.Info("reaper: elected; reaping containers and TTL nodes, ending orphaned sessions", zap.Duration("interval", interval))
	orphansCtx, stopOrphans := context.WithCancel(b.bgCtx)
	orphansDone := make(chan struct{})
	go func() {
		defer close(orphansDone)
		b.leadOrphans(orphansCtx)
	}()
	ensembleDone := make(chan struct{})
	go func() {
		defer close(ensembleDone)
		b.leadEnsemble(orphansCtx)
	}()
	defer func() {
		stopOrphans()
		<-orphansDone
		<-ensembleDone
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-b.bgCtx.Done():
			return nil
		case <-c.sess.Done():
			return errors.New("election session lost")
		case <-t.C:
			n, err := b.reapOnce(b.bgCtx)
			if err != nil && b.bgCtx.Err() == nil {
				b.log.Warn("reaper: pass failed", zap.Error(err))
			}
			if n > 0 {
				b.log.Debug("reaper: pass", zap.Int("deleted", n))
			}
		}
	}
}

// reapOnce makes one pass over the reap index and returns how many nodes it deleted.
func (b *Store) reapOnce(ctx context.Context) (int, error) {
	deleted := 0
	from := b.keys.reapIndexPrefix()
	end := clientv3.GetPrefixRangeEnd(from)
	for deleted < maxReapsPerPass {
		r, err := b.kv.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(reapBatch))
		if err != nil {
			return deleted, err
		}
		var paths []string
		for _, kv := range r.Kvs {
			if p, ok := b.keys.pathOfReapIndex(string(kv.Key)); ok {
				paths = append(paths, p)
			}
		}
		if len(paths) > 0 {
			n, err := b.reapCandidates(ctx, paths)
			deleted += n
			if err != nil {
				return deleted, err
			}
		}
		if !r.More || len(r.Kvs) == 0 {
			return deleted, nil
		}
		from = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
	return deleted, nil
}

// reapCandidate is a candidate as the replica holds it: its node, and its data key's
// ModRevision, which guards its deletion.
type reapCandidate struct {
	n       node
	dataRev int64
	exists  bool
	err     error // the node's keys do not decode
}

// reapCandidates reads candidates from the replica and deletes those that qualify. The replica
// may be behind etcd: every deletion is guarded by what was read, so a stale read leaves a node
// for a later pass and never deletes one that changed.
func (b *Store) reapCandidates(ctx context.Context, paths []string) (int, error) {
	cands := make([]reapCandidate, len(paths))
	b.tree.read(func(v replicaView) {
		for i, p := range paths {
			c := &cands[i]
			if c.n, _, c.exists, c.err = v.node(p, false); c.exists {
				c.dataRev = v.r.t.nodes[p].mod
			}
		}
	})
	now := b.nowMs()
	deleted := 0
	for i, p := range paths {
		c := cands[i]
		if !c.exists {
			// The node is gone and its index key was left behind: drop it.
			_, err := b.kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(b.keys.data(p)), "=", 0)).
				Then(clientv3.OpDelete(b.keys.reapIndex(p))).Commit()
			if err != nil {
				return deleted, err
			}
			continue
		}
		if c.err != nil {
			b.log.Warn("reaper: undecodable node", zap.String("path", p), zap.Error(c.err))
			continue
		}
		n, st := c.n, c.n.Stat
		var reap bool
		switch {
		case n.Meta.Mode.IsContainer():
			// C > 0: the container has had a child. cversion = 2C - numChildren.
			reap = st.NumChildren == 0 && st.Cversion > 0
		case n.Meta.Mode.IsTTL():
			reap = st.NumChildren == 0 && n.Meta.TTL > 0 && now-st.Mtime > n.Meta.TTL
		default:
			// Recreated as another kind: the index key is stale, unless the node changes again.
			_, err := b.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(b.keys.data(p)), "=", c.dataRev)).
				Then(clientv3.OpDelete(b.keys.reapIndex(p))).Commit()
			if err != nil {
				return deleted, err
			}
			continue
		}
		if !reap {
			continue
		}
		ok, err := b.reapNode(ctx, p, c.dataRev)
		if err != nil {
			return deleted, err
		}
		if ok {
			deleted++
			b.reaper.reaped.Add(1)
		}
	}
	return deleted, nil
}

// reapNode deletes an empty container or expired TTL node, as deleteContainer would: one
// guarded Txn that fails if the node has changed (setData, or deleted and created again) or has
// a child since it was read.
func (b *Store) reapNode(ctx context.Context, path string, dataRev int64) (bool, error) {
	parent, ok := znode.Parent(path)
	if !ok || znode.IsSystem(path) {
		return false, nil
	}
	qcmps, qops := b.quotaDeletes([]string{path})
	r, err := b.kv.Txn(ctx).If(append([]clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(b.keys.data(path)), "=", dataRev),
		clientv3.Compare(clientv3.CreateRevision(b.keys.childrenPrefix(path)), "=", 0).WithPrefix(),
	}, qcmps...)...).Then(append([]clientv3.Op{
		clientv3.OpDelete(b.keys.data(path)),
		clientv3.OpDelete(b.keys.metaPrefix(path), clientv3.WithPrefix()),
		clientv3.OpPut(b.keys.childDeletes(parent), ""),
		clientv3.OpDelete(b.keys.reapIndex(path)),
		b.fenceOp(),
	}, qops...)...).Commit()
	if err != nil {
		return false, err
	}
	if r.Succeeded {
		b.log.Debug("reaper: deleted", zap.String("path", path), zap.Stringer("zxid", zxidOf(r.Header.Revision, 0)))
	}
	return r.Succeeded, nil
}
