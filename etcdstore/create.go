package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// A create runs in three steps: plan (the checks that need no transaction, the parent's ACL
// decision, the sequential name), commit (one guarded Txn that creates the node, or reads in
// its Else branch what decides the failure), and classify (why a commit failed: a retry, or
// ZooKeeper's error code from znode.CheckCreate over what the Else branch read).

func (s *etcdSession) Create(ctx context.Context, req *encoding.CreateRequest) (*encoding.CreateResponse, encoding.Zxid, error) {
	path, _, z, err := s.create(ctx, "create", req.Path, req.Data, req.ACL, req.Flags, -1, znode.Kind(encoding.OpCreate, req.Flags))
	if err != nil {
		return nil, z, err
	}
	return &encoding.CreateResponse{Path: path}, z, nil
}

func (s *etcdSession) Create2(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	path, stat, z, err := s.create(ctx, "create2", req.Path, req.Data, req.ACL, req.Flags, -1, znode.Kind(encoding.OpCreate2, req.Flags))
	if err != nil {
		return nil, z, err
	}
	return &encoding.Create2Response{Path: path, Stat: stat}, z, nil
}

// createPlan is one create, planned: what the commit writes and guards.
type createPlan struct {
	op, path string
	parent   string
	data     []byte
	acl      []encoding.ACL // fixed (znode.FixupACL)
	kind     encoding.CreateMode
	mode     encoding.CreateMode
	ttl      int64
	lease    clientv3.LeaseID // the session's, for an ephemeral; else 0
	now      int64
	guard    aclGuard    // CREATE on the parent, pinned by the commit (acl.go)
	seq      *seqCounter // the parent's counter for a sequential create (seq.go); else nil
	counter  int64       // the counter a sequential name is made from; -1 for other creates
}

// name is the node the plan creates: the path, with the sequence suffix of counter for a
// sequential create.
func (p *createPlan) name() string {
	if p.counter < 0 {
		return p.path
	}
	return znode.SequentialName(p.path, p.counter)
}

// create runs ZooKeeper's create checks in PrepRequestProcessor's order (PROTOCOL.md §3.2).
// ttl is -1 for every opcode but createTTL. kind is the node made (znode.Kind): the flags in mode
// decide the checks and the sequence suffix, the opcode and flags together what the node is.
func (s *etcdSession) create(ctx context.Context, op, path string, data []byte, acl []encoding.ACL, mode encoding.CreateMode, ttl int64, kind encoding.CreateMode) (string, encoding.Stat, encoding.Zxid, error) {
	if !s.b.space.fits(createBytes(path, data) + sequenceSuffixLen) {
		return s.createNearLimit(ctx, op, path, data, acl, mode, ttl)
	}
	p, z, err := s.planCreate(ctx, op, path, data, acl, mode, ttl, kind)
	if p == nil || err != nil {
		return "", encoding.Stat{}, z, err
	}
	if p.seq != nil {
		defer s.b.seqs.release(p.seq)
	}
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		r, err := s.commitCreate(ctx, p)
		if err != nil {
			z, err := s.etcdFailure(op, path, err)
			return "", encoding.Stat{}, z, err
		}
		if r.Succeeded {
			return p.name(), s.created(p, r.Header.Revision), s.writeZxid(r.Header.Revision, 0), nil
		}
		retry, z, err := s.classifyCreate(ctx, p, r)
		if !retry {
			return "", encoding.Stat{}, z, err
		}
	}
	return "", encoding.Stat{}, s.zxid(0), fmt.Errorf("session %s: %s %q: too many conflicting retries", s.id, op, path)
}

// sequenceSuffixLen is the most a sequential create's name adds to its path.
const sequenceSuffixLen = 10

// createNearLimit runs a create that may not fit under the data limit (space.go) through the
// multi engine, which checks it in ZooKeeper's order, the data limit last.
func (s *etcdSession) createNearLimit(ctx context.Context, op, path string, data []byte, acl []encoding.ACL, mode encoding.CreateMode, ttl int64) (string, encoding.Stat, encoding.Zxid, error) {
	o := mop{op: encoding.OpCreate2, path: path, data: data, acl: acl, flags: mode, ttl: ttl}
	switch op {
	case "createContainer":
		o.op = encoding.OpCreateContainer
	case "createTTL":
		o.op = encoding.OpCreateTTL
	}
	res, z, err := s.slowWrite(ctx, op, o)
	if err != nil {
		return "", encoding.Stat{}, z, err
	}
	r := res.Record.(*encoding.Create2Response)
	return r.Path, r.Stat, z, nil
}

// planCreate runs the checks that come before the commit and plans it. A nil plan means the
// create is answered already (z, err: a ZooKeeper error or a failure).
func (s *etcdSession) planCreate(ctx context.Context, op, path string, data []byte, acl []encoding.ACL, mode encoding.CreateMode, ttl int64, kind encoding.CreateMode) (*createPlan, encoding.Zxid, error) {
	parent, acl, code := znode.CheckCreateRequest(znode.CreateOp{Path: path, ACL: acl, Flags: mode, TTL: ttl}, s.auth, s.b.providers())
	if code != 0 {
		z, err := s.fail(ctx, op, path, code)
		return nil, z, err
	}
	p := &createPlan{op: op, path: path, parent: parent, data: data, acl: acl, kind: kind, mode: mode,
		ttl: ttl, now: s.b.nowMs(), counter: -1}
	if kind == encoding.ModeEphemeral {
		p.lease = clientv3.LeaseID(s.id)
	}
	// CREATE on the parent, decided on the replica's ACL and pinned by the commit (acl.go):
	// after NoNode of the parent, before everything that depends on the name.
	p.guard = s.guardACL(ctx, parent, encoding.PermCreate)
	if code, z, err := s.settle(ctx, &p.guard, 0); err != nil || code != 0 {
		z, err := s.answerSettled(op, path, z, code, err)
		return nil, z, err
	}
	if mode.IsSequential() {
		if z, err := s.planSequence(ctx, p); err != nil {
			return nil, z, err
		}
	}
	// Names that fail validation are refused after the parent lookup (NoNode wins).
	if !znode.ValidatePath(p.name()) {
		code, z, err := s.settle(ctx, &p.guard, encoding.ErrBadArguments)
		s.releaseSeq(p)
		z, err = s.answerSettled(op, path, z, code, err)
		return nil, z, err
	}
	return p, 0, nil
}

// answerSettled turns settle's outcome into a reply's zxid and error.
func (s *etcdSession) answerSettled(op, path string, z encoding.Zxid, code encoding.ErrCode, err error) (encoding.Zxid, error) {
	if err != nil {
		z, err = s.etcdFailure(op, path, err)
	}
	return z, orCode(err, code)
}

// planSequence takes the parent's counter C (read before a sequential create, or cached by this
// process's previous one, seq.go), guarded by the counter's compares at commit, and names the
// node after it. On an error the counter is released and the create answered.
func (s *etcdSession) planSequence(ctx context.Context, p *createPlan) (encoding.Zxid, error) {
	b := s.b
	seq, err := b.seqs.acquire(ctx, p.parent)
	if err != nil {
		return s.zxid(0), fmt.Errorf("session %s: %s %q: %w", s.id, p.op, p.path, err)
	}
	p.seq = seq
	if !seq.known {
		s.counterFromTree(ctx, p.parent, seq)
	}
	if !seq.known {
		r, err := b.kv.Txn(ctx).Then(append([]clientv3.Op{
			clientv3.OpGet(b.keys.data(p.parent), clientv3.WithKeysOnly()),
		}, seq.readOps(b.keys, p.parent)...)...).Commit()
		if err != nil {
			s.releaseSeq(p)
			return s.etcdFailure(p.op, p.path, err)
		}
		if firstKV(r, 0) == nil {
			s.releaseSeq(p)
			return s.fail(ctx, p.op, p.path, encoding.ErrNoNode)
		}
		if _, err := seq.update(firstKV(r, 1), firstKV(r, 2)); err != nil {
			s.releaseSeq(p)
			return s.zxid(r.Header.Revision), fmt.Errorf("session %s: %s %q: %w", s.id, p.op, p.path, err)
		}
	}
	p.counter = seq.counter()
	return 0, nil
}

// counterFromTree caches the parent's counter as the replica holds it, if the parent is there
// once the replica has reached the session's floor; the commit's compares guard it. A parent
// the replica lacks is left to etcd: NoNode is never answered from the replica alone.
func (s *etcdSession) counterFromTree(ctx context.Context, parent string, seq *seqCounter) {
	if !s.treeAt(ctx) {
		return
	}
	s.b.tree.read(func(v replicaView) {
		if rn := v.r.t.nodes[parent]; rn != nil && rn.keys.exists() && rn.keys.decodeErr() == nil {
			more := rn.keys.moreOrZero()
			seq.set(more.creates.version, more.offsets.mod, more.offs.Creates)
		}
	})
}

// releaseSeq gives back the plan's sequence counter, if it holds one, when no commit follows.
func (s *etcdSession) releaseSeq(p *createPlan) {
	if p.seq != nil {
		s.b.seqs.release(p.seq)
		p.seq = nil
	}
}

// commitCreate runs the create's one Txn. Its Else branch reads the parent (with its lease, for
// NoChildrenForEphemerals), the node, the parent's child-create key, the parent's offsets
// (sequential) or puts the error key (otherwise: no retry is possible unless the parent's ACL
// changed, so the failure is final and consumes its revision now), and the parent's ACL key.
func (s *etcdSession) commitCreate(ctx context.Context, p *createPlan) (*clientv3.TxnResponse, error) {
	b := s.b
	name := p.name()
	parentKey, nodeKey, createsKey := b.keys.data(p.parent), b.keys.data(name), b.keys.childCreates(p.parent)
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(parentKey), ">", 0),
		clientv3.Compare(clientv3.LeaseValue(parentKey), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(nodeKey), "=", 0),
	}
	if p.seq != nil {
		cmps = append(cmps, p.seq.compares(b.keys, p.parent)...)
	}
	cmps = append(cmps, p.guard.cmps(b.keys)...)
	ttlMs := int64(0)
	if p.kind.IsTTL() {
		ttlMs = p.ttl
	}
	aclVal := encodeACLValue(aclValue{Ctime: p.now, Mode: p.kind, TTL: ttlMs, ACL: p.acl})
	then := []clientv3.Op{
		clientv3.OpPut(nodeKey, encodeDataValue(p.data, p.now, zxidIndexes{}), clientv3.WithLease(p.lease)),
		// An ephemeral's ACL key shares its lease, so that etcd removes both if it ever
		// expires the session itself.
		clientv3.OpPut(b.keys.acl(name), aclVal, clientv3.WithLease(p.lease)),
		clientv3.OpPut(createsKey, ""),
	}
	if znode.IsReaped(p.kind) {
		then = append(then, clientv3.OpPut(b.keys.reapIndex(name), ""))
	}
	els := []clientv3.Op{
		// Not keys-only: etcd serves those from its index, which has no Lease field, and
		// the parent's lease tells NoChildrenForEphemerals.
		clientv3.OpGet(parentKey),
		clientv3.OpGet(nodeKey, clientv3.WithKeysOnly()),
		clientv3.OpGet(createsKey, clientv3.WithKeysOnly()),
	}
	if p.seq != nil {
		els = append(els, clientv3.OpGet(b.keys.offsets(p.parent)))
	} else {
		els = append(els, b.putErrorIf(p.guard.finalConds(b.keys)...))
	}
	els = append(els, clientv3.OpGet(b.keys.acl(p.parent)))
	return b.kv.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
}

// created records a committed create and returns the new node's Stat.
func (s *etcdSession) created(p *createPlan, rev int64) encoding.Stat {
	if p.seq != nil {
		p.seq.committed()
	}
	return encoding.Stat{
		Czxid: zxidOf(rev, 0), Mzxid: zxidOf(rev, 0), Pzxid: zxidOf(rev, 0),
		Ctime: p.now, Mtime: p.now,
		EphemeralOwner: encoding.SessionID(p.lease),
		DataLength:     int32(len(p.data)),
	}
}

// classifyCreate says why a create's commit failed: retry (the parent's ACL or sequence counter
// moved since the plan, which is updated), or the reply (ZooKeeper's error code, decided by
// znode.CheckCreate over what the Else branch read, or a failure).
func (s *etcdSession) classifyCreate(ctx context.Context, p *createPlan, r *clientv3.TxnResponse) (retry bool, z encoding.Zxid, err error) {
	failed := func(err error) (bool, encoding.Zxid, error) {
		return false, s.zxid(r.Header.Revision), fmt.Errorf("session %s: %s %q: %w", s.id, p.op, p.path, err)
	}
	parentKV, nodeKV, createsKV := firstKV(r, 0), firstKV(r, 1), firstKV(r, 2)
	counterMoved := false
	if p.seq != nil && parentKV != nil {
		if counterMoved, err = p.seq.update(createsKV, firstKV(r, 3)); err != nil {
			return failed(err)
		}
	}
	if parentKV != nil {
		// The parent's ACL changed since the decision: decide again.
		stale, err := s.staleGuard(&p.guard, firstKV(r, 4))
		if err != nil {
			return failed(err)
		}
		if stale {
			if code, z, err := s.settle(ctx, &p.guard, 0); err != nil || code != 0 {
				z, err := s.answerSettled(p.op, p.path, z, code, err)
				return false, z, err
			}
			p.renumber()
			return true, 0, nil
		}
	}
	if parentKV == nil && p.seq != nil {
		p.seq.forget()
	}
	if counterMoved {
		// Another create under the parent took our sequence number: take the next.
		p.renumber()
		return true, 0, nil
	}
	// The ACL decision stands (not stale): the parent's ACL as the Else branch read it is the
	// one decided on; with its existence and lease, the node's existence, and the counter the
	// name was made from.
	view := znode.Nodes{p.name(): znode.Node{Exists: nodeKV != nil}}
	if parentKV != nil {
		parent, err := parentFromElse(firstKV(r, 4))
		if err != nil {
			return failed(err)
		}
		parent.Exists, parent.EphemeralOwner, parent.Creates = true, encoding.SessionID(parentKV.Lease), p.counter
		view[p.parent] = parent
	}
	_, _, code := znode.CheckCreate(view, znode.CreateOp{Path: p.path, ACL: p.acl, Flags: p.mode, TTL: p.ttl}, s.auth, s.b.providers())
	if code == 0 {
		return failed(fmt.Errorf("transaction failed for no known reason"))
	}
	if p.counter < 0 {
		return false, s.writeZxid(r.Header.Revision, 0), code
	}
	z, err = s.fail(ctx, p.op, p.path, code)
	return false, z, err
}

// renumber names a sequential create after its counter's current value (after a retry).
func (p *createPlan) renumber() {
	if p.seq != nil {
		p.counter = p.seq.counter()
	}
}
